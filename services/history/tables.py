"""Decoded rescale records into the flat tables (Delta Lake, Parquet data files): pure DataFrame transforms.

Every table has one row per *received revision* (or per element of one), plus
the Kafka partition and offset it came from: the sinks keep everything, the
views of `views.py` choose the latest revision. Column names are Flink's field
names in snake_case, with `_ms` for epoch milliseconds (Flink's `...InMillis`)
and a derived SQL timestamp next to each (`start_time`, `enter_time`, ...).

All tables are partitioned by `start_date`, the UTC date of the rescale's start:
a rescale's revisions and children stay in one partition, and time-bounded
queries prune by date.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from services.contracts import rescalefields as fields
from services.history.decode import RECORD, WRITER_VERSION

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

PARTITION_COLUMN = "start_date"
EXECUTING = "Executing"
"""The one scheduler state in which the job processes records."""
COOLDOWN_KEY = "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling"
"""FLIP-322's cooldown; `schedulerSettings` holds it in milliseconds."""

IDENTITY = ("job_id", "rescale_uuid", "revision", "kafka_partition", "kafka_offset")
"""The columns every table starts with; the last two name the Kafka message."""


def _r(field: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"{RECORD}.{field}")


def _millis_to_time(column: Column) -> Column:
    from pyspark.sql import functions as F

    return F.timestamp_millis(column)


def _identity() -> list[Column]:
    from pyspark.sql import functions as F

    return [
        _r("jobId").alias("job_id"),
        _r("rescaleUuid").alias("rescale_uuid"),
        _r("revision").alias("revision"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
    ]


def _start_date() -> Column:
    from pyspark.sql import functions as F

    return F.to_date(_millis_to_time(_r("startTimestampInMillis"))).alias(PARTITION_COLUMN)


def slot_total(field: str) -> Column:
    """Σ `field` over the slot-sharing groups; null when no group has a value."""
    from pyspark.sql import functions as F

    values = F.filter(F.transform(_r("slots"), lambda s: s[field]), lambda v: v.isNotNull())
    return F.when(F.size(values) > 0, F.aggregate(values, F.lit(0), lambda acc, v: acc + v))


def span_length(duration: Column, enter: Column, leave: Column) -> Column:
    """A span's milliseconds: its `durationInMillis`, else leave - enter (null while open)."""
    from pyspark.sql import functions as F

    return F.coalesce(duration, leave - enter)


def downtime() -> Column:
    """A terminated rescale's downtime: the summed durations of its closed spans in a state
    other than `Executing` (0 when there are none); null while it is in progress.

    Kept with each row as it arrives, so the summaries read one table and join nothing."""
    from pyspark.sql import functions as F

    def length(span: Column) -> Column:
        return span_length(
            span["durationInMillis"], span["enterTimestampInMillis"], span["leaveTimestampInMillis"]
        )

    down = F.filter(_r("schedulerStates"), lambda span: span["state"] != F.lit(EXECUTING))
    closed = F.filter(F.transform(down, length), lambda ms: ms.isNotNull())
    total = F.aggregate(closed, F.lit(0).cast("long"), lambda acc, ms: acc + ms)
    return F.when(_r("terminalState").isNotNull(), total)


def rescales(valid: DataFrame) -> DataFrame:
    """One row per received revision, Flink's fields flattened, slot totals and the
    downtime derived."""
    from pyspark.sql import functions as F

    last_span = F.try_element_at(_r("schedulerStates"), F.lit(-1))
    start, end = _r("startTimestampInMillis"), _r("endTimestampInMillis")
    return valid.select(
        *_identity(),
        _r("resourceRequirementsUuid").alias("resource_requirements_uuid"),
        _r("rescaleAttemptId").alias("rescale_attempt_id"),
        _r("triggerCause").alias("trigger_cause"),
        _r("terminalState").alias("terminal_state"),
        _r("terminatedReason").alias("terminated_reason"),
        _r("terminalState").isNull().alias("in_progress"),
        start.alias("start_timestamp_ms"),
        end.alias("end_timestamp_ms"),
        (end - start).alias("duration_ms"),
        downtime().alias("downtime_ms"),
        _r("updatedAtMillis").alias("updated_at_ms"),
        _r("availableSlots").alias("available_slots"),
        _r("reactiveMode").alias("reactive_mode"),
        _r("schedulerSettings").alias("scheduler_settings"),
        F.try_element_at(_r("schedulerSettings"), F.lit(COOLDOWN_KEY))
        .try_cast("long")
        .alias("cooldown_ms"),
        _r("statusMessage").alias("status_message"),
        F.size(_r("vertices")).alias("vertex_count"),
        slot_total("desiredSlots").alias("total_desired_slots"),
        slot_total("minimalRequiredSlots").alias("total_minimal_required_slots"),
        slot_total("preRescaleSlots").alias("total_pre_rescale_slots"),
        slot_total("postRescaleSlots").alias("total_post_rescale_slots"),
        last_span["state"].alias("current_state"),
        last_span["enterTimestampInMillis"].alias("current_state_enter_ms"),
        (last_span.isNotNull() & last_span["leaveTimestampInMillis"].isNull()).alias(
            "current_state_open"
        ),
        _millis_to_time(start).alias("start_time"),
        _millis_to_time(end).alias("end_time"),
        _millis_to_time(_r("updatedAtMillis")).alias("updated_at"),
        F.col(WRITER_VERSION).alias("writer_version"),
        F.col("timestamp").alias("kafka_timestamp"),
        _start_date(),
    )


def _exploded(valid: DataFrame, array_field: str, index_name: str) -> DataFrame:
    """One row per element of `array_field`, as `_e`, with its 0-based position."""
    from pyspark.sql import functions as F

    return valid.select(
        *_identity(),
        _start_date(),
        F.posexplode(_r(array_field)).alias(index_name, "_e"),
    )


def _e(field: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"_e.{field}")


def rescale_vertices(valid: DataFrame) -> DataFrame:
    """One row per job vertex of each received revision."""
    return _exploded(valid, "vertices", "vertex_index").select(
        *IDENTITY,
        "vertex_index",
        *[_e(field).alias(column) for field, column in fields.VERTEX.items()],
        PARTITION_COLUMN,
    )


def _profile(prefix: str, field: str) -> list[Column]:
    """A ResourceProfile flattened into `<prefix>_...` columns (all null for UNKNOWN)."""
    names = fields.scalefold_profile()
    return [_e(f"{field}.{avro}").alias(f"{prefix}_{sql}") for avro, sql in names.items()]


def rescale_slots(valid: DataFrame) -> DataFrame:
    """One row per slot-sharing group of each received revision."""
    return _exploded(valid, "slots", "slot_index").select(
        *IDENTITY,
        "slot_index",
        *[_e(field).alias(column) for field, column in fields.SLOTS.items()],
        *[c for field, prefix in fields.PROFILES.items() for c in _profile(prefix, field)],
        PARTITION_COLUMN,
    )


def _span_columns() -> list[Column]:
    enter, leave = _e("enterTimestampInMillis"), _e("leaveTimestampInMillis")
    return [
        enter.alias("enter_timestamp_ms"),
        leave.alias("leave_timestamp_ms"),
        _e("durationInMillis").alias("duration_ms"),
        leave.isNull().alias("is_open"),
        _millis_to_time(enter).alias("enter_time"),
        _millis_to_time(leave).alias("leave_time"),
    ]


def rescale_states(valid: DataFrame) -> DataFrame:
    """One row per scheduler-state span of each received revision, oldest first."""
    return _exploded(valid, "schedulerStates", "span_index").select(
        *IDENTITY,
        "span_index",
        _e("state").alias("state"),
        *_span_columns(),
        _e("stringifiedException").alias("stringified_exception"),
        PARTITION_COLUMN,
    )


def rescale_phases(valid: DataFrame) -> DataFrame:
    """One row per state-transition-manager phase of each received revision (v2 only)."""
    return _exploded(valid, "transitionPhases", "phase_index").select(
        *IDENTITY,
        "phase_index",
        _e("phase").alias("phase"),
        _e("state").alias("state"),
        *_span_columns(),
        PARTITION_COLUMN,
    )


TABLES: dict[str, Callable[[DataFrame], DataFrame]] = {
    "rescales": rescales,
    "rescale_vertices": rescale_vertices,
    "rescale_slots": rescale_slots,
    "rescale_states": rescale_states,
    "rescale_phases": rescale_phases,
}
"""Every raw table of scalefold's rescales, by name: `rescales` and its children."""

CHILDREN = {name: transform for name, transform in TABLES.items() if name != "rescales"}
"""The child tables: written beside `rescales`, by the same query (sources.py)."""
CHILD_TABLES = tuple(CHILDREN)
LATEST_TABLE = "rescales_latest"
"""The `rescales` rows of each rescale's latest revision, kept by MERGE (upsert.py)."""
