"""Decoded `FlinkRescale` records (a real Flink's rescales, from the bridge) into a table. Pure.

One row per received revision, in the columns of the `rescales` table wherever
they mean the same (tables.py: the same names, the same derivations: slot
totals, downtime, the current state), plus `cluster`, `job_key` (the id under
which scalefold predicts the job: `flink_job_key(cluster, job_id)`) and the
columns only Flink's record has (`job_name`, `observed_at_ms`,
`unknown_fields`). `job_id` is Flink's own job id. What Flink's REST API does
not show (`available_slots`, `reactive_mode`, `scheduler_settings`,
`status_message`, the transition phases) has no column.

The record's arrays are kept as arrays of structs, their fields in snake_case
(`vertices`, `slots`, `scheduler_states`): the child views (flink_views.py)
explode them from the latest revision, and nothing has to be joined back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from services.contracts import rescalefields as fields
from services.history.decode import RECORD, WRITER_VERSION
from services.history.tables import PARTITION_COLUMN, element, outcome, shape

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

RAW_TABLE = "flink_rescales"
"""Every received revision."""
LATEST_TABLE = "flink_rescales_latest"
"""The latest revision per (cluster, job_id, rescale_uuid), kept by MERGE (upsert.py)."""
TABLES = (RAW_TABLE, LATEST_TABLE)
KEYS = ("cluster", "job_id", "rescale_uuid")
"""What identifies one rescale of a real Flink: its uuid within its job and cluster."""


def _r(field: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"{RECORD}.{field}")


def _renamed(array: str, names: Mapping[str, str], extra: Mapping[str, str]) -> Column:
    """`array`'s structs with their fields in snake_case (tables.element; Flink names a
    profile's fields as `fields.PROFILE` does)."""
    from pyspark.sql import functions as F

    return F.transform(_r(array), element(names, extra, fields.PROFILE))


def flink_rescales(valid: DataFrame) -> DataFrame:
    """One row per received revision of a real Flink's rescale."""
    from pyspark.sql import functions as F

    start, end = _r("startTimestampInMillis"), _r("endTimestampInMillis")
    return valid.select(
        _r("cluster").alias("cluster"),
        _r("jobId").alias("job_id"),
        F.concat_ws(".", _r("cluster"), _r("jobId")).alias("job_key"),
        _r("rescaleUuid").alias("rescale_uuid"),
        _r("revision").alias("revision"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        _r("jobName").alias("job_name"),
        *outcome(),
        _r("observedAtMillis").alias("observed_at_ms"),
        *shape(),
        _renamed("vertices", fields.VERTEX, {}).alias("vertices"),
        _renamed("slots", fields.SLOTS, fields.PROFILES).alias("slots"),
        _renamed("schedulerStates", fields.SPAN, {}).alias("scheduler_states"),
        _r("unknownFields").alias("unknown_fields"),
        F.timestamp_millis(start).alias("start_time"),
        F.timestamp_millis(end).alias("end_time"),
        F.timestamp_millis(_r("observedAtMillis")).alias("observed_at"),
        F.col(WRITER_VERSION).alias("writer_version"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.to_date(F.timestamp_millis(start)).alias(PARTITION_COLUMN),
    )
