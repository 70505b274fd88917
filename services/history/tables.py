"""Decoded rescale records into the history's table (Delta Lake, Parquet data files): pure DataFrame transforms.

The table has one row per *received revision*, plus the Kafka partition and offset
it came from: the sinks keep everything, the views of `views.py` choose the latest
revision. A record's arrays (vertices, slot-sharing groups, state spans, transition
phases) stay arrays of flat structs in its row, and the child views explode them
(`children`): one file a batch, where a table per child wrote five, most of them
a few KB (issue 49). Column names are Flink's field
names in snake_case, with `_ms` for epoch milliseconds (Flink's `...InMillis`)
and a derived SQL timestamp next to each (`start_time`, `enter_time`, ...).

All tables are partitioned by `start_date`, the UTC date of the rescale's start:
a rescale's revisions and children stay in one partition, and time-bounded
queries prune by date.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from services.contracts import rescalefields as fields
from services.history.decode import RECORD, WRITER_VERSION

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

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


def outcome() -> list[Column]:
    """What a rescale was and how it ended, with its duration and downtime: the columns
    both sources derive alike (this and flink_tables.flink_rescales; pytables._common)."""
    start, end = _r("startTimestampInMillis"), _r("endTimestampInMillis")
    return [
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
    ]


def shape() -> list[Column]:
    """Its vertices counted, its slots summed and its current state (the last span):
    derived alike by both sources, as `outcome`."""
    from pyspark.sql import functions as F

    last_span = F.try_element_at(_r("schedulerStates"), F.lit(-1))
    return [
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
    ]


def rescales(valid: DataFrame) -> DataFrame:
    """One row per received revision, Flink's fields flattened, slot totals and the
    downtime derived."""
    from pyspark.sql import functions as F

    start, end = _r("startTimestampInMillis"), _r("endTimestampInMillis")
    return nullable_nested(
        valid.select(
            *_identity(),
            *outcome(),
            _r("updatedAtMillis").alias("updated_at_ms"),
            _r("availableSlots").alias("available_slots"),
            _r("reactiveMode").alias("reactive_mode"),
            _r("schedulerSettings").alias("scheduler_settings"),
            F.try_element_at(_r("schedulerSettings"), F.lit(COOLDOWN_KEY))
            .try_cast("long")
            .alias("cooldown_ms"),
            _r("statusMessage").alias("status_message"),
            *shape(),
            *_nested(),
            _millis_to_time(start).alias("start_time"),
            _millis_to_time(end).alias("end_time"),
            _millis_to_time(_r("updatedAtMillis")).alias("updated_at"),
            F.col(WRITER_VERSION).alias("writer_version"),
            F.col("timestamp").alias("kafka_timestamp"),
            _start_date(),
        )
    )


SPAN_FIELDS = fields.SPAN
"""A scheduler-state span's fields (`schedulerStates`)."""
PHASE_FIELDS = {
    "phase": "phase",
    **{f: c for f, c in SPAN_FIELDS.items() if c != "stringified_exception"},
}
"""A transition phase's fields (`TransitionPhaseSpan`, rescale v2): its phase, then a span's
but the exception."""


Element = Callable[["Column"], "Column"]


def element(
    names: Mapping[str, str],
    profiles: Mapping[str, str] | None = None,
    profile: Mapping[str, str] | None = None,
) -> Element:
    """An array element's struct: its fields renamed to their columns; `profiles`: nested
    ResourceProfiles flattened into `<prefix>_<column>`, as the slots' are, their fields
    named by `profile` (the `rescale` record's by default; `fields.PROFILE`: Flink's).
    Spark is imported when the struct is built, not here: the tables are declared at
    import, and the commands that read them without Spark should not pay for it."""

    def build(e: Column) -> Column:
        from pyspark.sql import functions as F

        columns = [e[avro].alias(sql) for avro, sql in names.items()]
        for nested, prefix in (profiles or {}).items():
            named = (profile or fields.scalefold_profile()).items()
            columns += [e[nested][avro].alias(f"{prefix}_{sql}") for avro, sql in named]
        return F.struct(*columns)

    return build


NESTED: dict[str, tuple[str, Element]] = {
    "vertices": ("vertices", element(fields.VERTEX)),
    "slots": ("slots", element(fields.SLOTS, fields.PROFILES)),
    "scheduler_states": ("schedulerStates", element(SPAN_FIELDS)),
    "transition_phases": ("transitionPhases", element(PHASE_FIELDS)),
}
"""The record's arrays, kept in each row as arrays of flat structs (column -> its field
in the record, the element's struct); the child views explode them (`CHILDREN`)."""


def _nested() -> list[Column]:
    from pyspark.sql import functions as F

    return [F.transform(_r(field), make).alias(column) for column, (field, make) in NESTED.items()]


def nullable_nested(rows: DataFrame) -> DataFrame:
    """`rows` with every field of its arrays' structs nullable, as delta-rs writes them (the
    latest table's rows: writers.py) and as every Delta reader reads them: a view made
    when a table had one of them would refuse the other ("cannot up cast")."""
    from pyspark.sql import functions as F

    def column(name: str) -> Column:
        if name not in NESTED:
            return F.col(name)
        return F.col(name).cast(_nullable(rows.schema[name].dataType)).alias(name)

    return rows.select(*[column(name) for name in rows.columns])


def _nullable(kind: DataType) -> DataType:
    from pyspark.sql.types import ArrayType, StructField, StructType

    if isinstance(kind, ArrayType):
        return ArrayType(_nullable(kind.elementType), True)
    if isinstance(kind, StructType):
        return StructType([StructField(f.name, _nullable(f.dataType), True) for f in kind.fields])
    return kind


def _span_columns(e: Column) -> list[Column]:
    enter, leave = e["enter_timestamp_ms"], e["leave_timestamp_ms"]
    return [
        enter.alias("enter_timestamp_ms"),
        leave.alias("leave_timestamp_ms"),
        e["duration_ms"].alias("duration_ms"),
        leave.isNull().alias("is_open"),
        _millis_to_time(enter).alias("enter_time"),
        _millis_to_time(leave).alias("leave_time"),
    ]


def _flat(names: Mapping[str, str]) -> Callable[[Column], list[Column]]:
    return lambda e: [e[column].alias(column) for column in names.values()]


def _slot_columns(e: Column) -> list[Column]:
    profiles = [
        f"{prefix}_{column}"
        for prefix in fields.PROFILES.values()
        for column in fields.scalefold_profile().values()
    ]
    return [e[column].alias(column) for column in (*fields.SLOTS.values(), *profiles)]


CHILDREN: dict[str, tuple[str, str, Callable[[Column], list[Column]]]] = {
    "rescale_vertices": ("vertices", "vertex_index", _flat(fields.VERTEX)),
    "rescale_slots": ("slots", "slot_index", _slot_columns),
    "rescale_states": (
        "scheduler_states",
        "span_index",
        lambda e: [
            e["state"].alias("state"),
            *_span_columns(e),
            e["stringified_exception"].alias("stringified_exception"),
        ],
    ),
    "rescale_phases": (
        "transition_phases",
        "phase_index",
        lambda e: [e["phase"].alias("phase"), e["state"].alias("state"), *_span_columns(e)],
    ),
}
"""The child views, one row per element of an array of each row (`NESTED`): by name, the
array, its 0-based position's name and the element's columns (derived ones too). They
were tables of their own until 2026-12-04 (`LEGACY_TABLES`)."""
LEGACY_TABLES = tuple(CHILDREN)
"""The child tables an earlier scalefold wrote beside `rescales`, four small files a batch;
read back (views.py) for the rows written then, whose arrays are null."""


def children(rows: DataFrame, name: str) -> DataFrame:
    """The child view `name` of `rows` (`rescales` rows, raw or latest)."""
    from pyspark.sql import functions as F

    array, index, columns = CHILDREN[name]
    exploded = rows.select(*IDENTITY, PARTITION_COLUMN, F.posexplode(array).alias(index, "_e"))
    return exploded.select(*IDENTITY, index, *columns(F.col("_e")), PARTITION_COLUMN)


TABLES: dict[str, Callable[[DataFrame], DataFrame]] = {"rescales": rescales}
"""Every raw table of scalefold's rescales, by name: its children are arrays in each row."""
LATEST_TABLE = "rescales_latest"
"""The `rescales` rows of each rescale's latest revision, kept by MERGE (upsert.py)."""
