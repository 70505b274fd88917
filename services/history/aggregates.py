"""Per-job and fleet-wide aggregates over the deduplicated views: pure DataFrame transforms.

They are computed from the latest revision of every rescale on each query, so
they are never stale and a re-sent or updated record cannot be counted twice.
Each row carries its rescale's downtime (tables.py derives it as the record
arrives), so a summary reads `rescales_latest` alone.

Definitions (also in README.md, "The history service"):
- duration: `end - start` of a terminated rescale (FLIP-487's summary statistics);
- downtime: the summed durations of a terminated rescale's scheduler-state spans
  other than `Executing` (the job is not processing records in them);
- rescales per hour: rescales / hours between the job's first and latest start,
  at least one hour (a job with a single burst is not extrapolated);
- flapping score: direction reversals (up <-> down) of the total post-rescale
  slots along the job's COMPLETED rescales, ordered by end time, within the hour
  that ends at the job's latest COMPLETED rescale. Anchoring the window on event
  time keeps the view (and the planner, which uses the same rule) replayable.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

TERMINAL_STATES = ("COMPLETED", "FAILED", "IGNORED")
PERCENTILES = (0.5, 0.95, 0.99)
HOUR_MS = 3_600_000
FLAP_WINDOW_MS = HOUR_MS


def sorted_values(column: str) -> Column:
    """Aggregate: the group's non-null values of `column`, ascending."""
    from pyspark.sql import functions as F

    return F.sort_array(F.collect_list(F.col(column)))


def percentile_of_sorted(values: Column, p: float) -> Column:
    """Spark's exact `percentile` (linear interpolation) of an ascending array; null if empty.

    Collecting a group's values into an array sorted by `sort_array` (a typed sort;
    `array_sort` calls an interpreted comparator) and picking from it gives the same
    doubles as `percentile`, whose per-group hash map of boxed counts was most of
    `job_summary`'s time: over 10M rows, 17.0 -> 12.7 s of CPU (docs/benchmarks.md),
    and `fleet_summary`, one group of every row, the same as before.
    """
    from pyspark.sql import functions as F

    n = F.size(values)
    position = (n - 1).cast("double") * F.lit(p)
    lower, higher = F.floor(position).cast("int"), F.ceil(position).cast("int")
    low, high = F.get(values, lower).cast("double"), F.get(values, higher).cast("double")
    between = (higher - position) * low + (position - lower) * high
    return F.when(n == 0, F.lit(None).cast("double")).when(lower == higher, low).otherwise(between)


_SORTED = "_sorted_"


def _percentiles(column: str) -> Column:
    """An aggregate placeholder that `_with_percentiles` turns into the column's percentiles."""
    return sorted_values(column).alias(_SORTED + column)


def _with_percentiles(frame: DataFrame) -> DataFrame:
    """Each placeholder of `_percentiles` replaced, in its place, by p50, p95 and p99."""
    from pyspark.sql import functions as F

    columns: list[Column] = []
    for name in frame.columns:
        if not name.startswith(_SORTED):
            columns.append(F.col(name))
            continue
        prefix = name.removeprefix(_SORTED).removesuffix("_ms")
        columns += [
            percentile_of_sorted(F.col(name), p).alias(f"{prefix}_p{round(p * 100)}_ms")
            for p in PERCENTILES
        ]
    return frame.select(*columns)


def _measures(reasons: Sequence[str]) -> list[Column]:
    """The aggregate columns shared by `job_summary` and `fleet_summary`; their
    percentiles are filled in by `_with_percentiles` after the aggregate."""
    from pyspark.sql import functions as F

    first, last = F.min("start_timestamp_ms"), F.max("start_timestamp_ms")
    hours = F.greatest(F.lit(1.0), (last - first) / F.lit(float(HOUR_MS)))
    return [
        F.count(F.lit(1)).alias("total"),
        F.count_if(F.col("in_progress")).alias("in_progress"),
        *[
            F.count_if(F.col("terminal_state") == s).alias(s.lower())
            for s in ("COMPLETED", "FAILED", "IGNORED")
        ],
        *[
            F.count_if(F.col("terminated_reason") == r).alias(f"reason_{r.lower()}")
            for r in reasons
        ],
        _percentiles("duration_ms"),
        _percentiles("downtime_ms"),
        (F.count(F.lit(1)) / hours).alias("rescales_per_hour"),
        F.timestamp_millis(last).alias("latest_rescale_time"),
        F.max("updated_at").alias("latest_update_time"),
    ]


def completed_in_window(latest: DataFrame, window_ms: int = FLAP_WINDOW_MS) -> DataFrame:
    """Each job's COMPLETED rescales in the window ending at its latest COMPLETED one.

    The anchors (one row per job) are aggregated apart and broadcast, so the window's
    few rows are picked out as the table is read: a window function over the job's
    rescales would shuffle and sort them all first (over 10M rows: 5.8 -> 3.4 s of CPU,
    docs/benchmarks.md). A million jobs broadcast a few tens of MB.
    """
    from pyspark.sql import functions as F

    completed = latest.where(
        (F.col("terminal_state") == "COMPLETED") & F.col("end_timestamp_ms").isNotNull()
    )
    anchors = completed.groupBy("job_id").agg(F.max("end_timestamp_ms").alias("_anchor"))
    return (
        completed.join(F.broadcast(anchors), on="job_id")
        .where(F.col("end_timestamp_ms") >= F.col("_anchor") - F.lit(window_ms))
        .drop("_anchor")
    )


def flapping_scores(latest: DataFrame, window_ms: int = FLAP_WINDOW_MS) -> DataFrame:
    """`job_id, flapping_score` of every job whose total slots changed in the window.

    Jobs that are missing scored 0; callers join and coalesce.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy("job_id").orderBy(
        "end_timestamp_ms", "start_timestamp_ms", "rescale_uuid"
    )
    slots = F.col("total_post_rescale_slots")
    steps = (
        completed_in_window(latest, window_ms)
        .where(slots.isNotNull())
        .withColumn("_direction", F.signum(slots - F.lag(slots).over(order)))
        .where(F.col("_direction").isNotNull() & (F.col("_direction") != 0))
    )
    previous = F.lag("_direction").over(order)
    reversal = (previous.isNotNull() & (previous != F.col("_direction"))).cast("int")
    scored = steps.withColumn("_reversal", reversal)
    return scored.groupBy("job_id").agg(F.sum("_reversal").alias("flapping_score"))


def job_summary(latest: DataFrame, reasons: Sequence[str]) -> DataFrame:
    """One row per job: counts, reason counts, duration and downtime percentiles, flapping.

    `latest`: the `rescales` view.
    """
    from pyspark.sql import functions as F

    per_job = _with_percentiles(latest.groupBy("job_id").agg(*_measures(reasons)))
    flapping = flapping_scores(latest)
    return per_job.join(flapping, on="job_id", how="left").withColumn(
        "flapping_score", F.coalesce(F.col("flapping_score"), F.lit(0))
    )


def fleet_summary(latest: DataFrame, reasons: Sequence[str]) -> DataFrame:
    """One row for the whole fleet: the `job_summary` measures over every rescale."""
    from pyspark.sql import functions as F

    totals = _with_percentiles(
        latest.agg(F.count_distinct("job_id").alias("jobs"), *_measures(reasons))
    )
    flapping = flapping_scores(latest).agg(
        F.coalesce(F.max("flapping_score"), F.lit(0)).alias("max_flapping_score"),
        F.count_if(F.col("flapping_score") > 0).alias("jobs_with_reversals"),
    )
    return totals.crossJoin(flapping)
