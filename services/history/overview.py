"""FLIP-487's rescale overview and summary, for one job or the fleet.

Flink serves them at `/jobs/:jobid/rescales/overview` (counts of ignored,
in-progress, completed and failed rescales plus the latest rescale per terminal
state) and `/rescales/summary` (duration statistics per terminal state, Flink's
`StatsSummary`: min, max, average and percentiles). Here the numbers come from
the deduplicated `rescales` view (DataFrame functions) and are printed as text
(pure formatting functions). `history summary` computes the same numbers from
the committed Delta table without Spark (lake.py); a test holds the two equal.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from services.history.aggregates import percentile_of_sorted, sorted_values
from services.history.render import table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

STAT_PERCENTILES = (0.5, 0.9, 0.95, 0.99, 0.999)
"""The quantiles of Flink's StatsSummary."""
COUNT_LABELS = (
    ("in_progress", "in progress"),
    ("completed", "completed"),
    ("failed", "failed"),
    ("ignored", "ignored"),
    ("total", "total"),
)


def counts(latest: DataFrame) -> DataFrame:
    """One row: how many rescales are in progress, completed, failed, ignored, in total."""
    from pyspark.sql import functions as F

    state = F.col("terminal_state")
    return latest.agg(
        F.count_if(state.isNull()).alias("in_progress"),
        F.count_if(state == "COMPLETED").alias("completed"),
        F.count_if(state == "FAILED").alias("failed"),
        F.count_if(state == "IGNORED").alias("ignored"),
        F.count(F.lit(1)).alias("total"),
    )


def latest_per_terminal_state(latest: DataFrame) -> DataFrame:
    """The most recently ended rescale of each terminal state."""
    from pyspark.sql import functions as F

    columns = [
        "terminal_state",
        "job_id",
        "rescale_uuid",
        "trigger_cause",
        "terminated_reason",
        "start_time",
        "end_time",
        "duration_ms",
    ]
    newest = F.max_by(F.struct(*columns), F.struct("end_timestamp_ms", "rescale_uuid"))
    return (
        latest.where(F.col("terminal_state").isNotNull())
        .groupBy("terminal_state")
        .agg(newest.alias("r"))
        .select("r.*")
        .orderBy("terminal_state")
    )


def duration_stats(latest: DataFrame) -> DataFrame:
    """Per terminal state, and `ALL` terminated: count, min, avg, percentiles, max (ms)."""
    from pyspark.sql import functions as F

    terminated = latest.where(F.col("terminal_state").isNotNull())
    both = terminated.unionByName(terminated.withColumn("terminal_state", F.lit("ALL")))
    values = F.col("_values")
    return (
        both.groupBy("terminal_state")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.min("duration_ms").alias("min"),
            F.avg("duration_ms").alias("avg"),
            sorted_values("duration_ms").alias("_values"),
            F.max("duration_ms").alias("max"),
        )
        .select(
            "terminal_state",
            "count",
            "min",
            "avg",
            *[percentile_of_sorted(values, p).alias(label(p)) for p in STAT_PERCENTILES],
            "max",
        )
        .orderBy(F.col("terminal_state") == "ALL", "terminal_state")
    )


def label(p: float) -> str:
    return f"p{p * 100:g}"


def human_ms(value: float | None) -> str:
    """A duration for people: 850 ms, 31.2 s, 4 min 10 s, 2 h 03 min."""
    if value is None:
        return "-"
    ms = float(value)
    if ms < 1_000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    seconds = round(ms / 1000)
    if seconds < 3_600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def format_overview(
    scope: str, count_row: Mapping[str, Any], latest_rows: Sequence[Mapping[str, Any]]
) -> str:
    """The overview: counts, then the latest rescale of each terminal state."""
    lines = [f"Rescale overview of {scope}"]
    lines += [f"  {label:<12} {count_row[key]:>8}" for key, label in COUNT_LABELS]
    lines += ["", "Latest rescale per terminal state"]
    if not latest_rows:
        lines.append("  (no terminated rescale yet)")
        return "\n".join(lines)
    rows = [
        (
            r["terminal_state"],
            r["job_id"],
            r["rescale_uuid"],
            r["trigger_cause"],
            r["terminated_reason"],
            r["start_time"],
            r["end_time"],
            human_ms(r["duration_ms"]),
        )
        for r in latest_rows
    ]
    header = ("state", "job", "rescale", "trigger", "reason", "start", "end", "duration")
    lines += ["  " + line for line in table(header, rows).splitlines()[:-1]]
    return "\n".join(lines)


def format_summary(scope: str, stat_rows: Sequence[Mapping[str, Any]]) -> str:
    """The summary: duration statistics per terminal state."""
    lines = [f"Rescale durations of {scope} (terminated rescales)"]
    if not stat_rows:
        lines.append("  (no terminated rescale yet)")
        return "\n".join(lines)
    names = ["min", "avg", *(label(p) for p in STAT_PERCENTILES), "max"]
    rows = [
        (r["terminal_state"], r["count"], *(human_ms(r[name]) for name in names)) for r in stat_rows
    ]
    lines += ["  " + line for line in table(("state", "count", *names), rows).splitlines()[:-1]]
    return "\n".join(lines)
