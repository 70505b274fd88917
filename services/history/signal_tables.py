"""The workload samples of real Flink jobs (`FlinkWorkloadSignal`, from the bridge) as tables and views. Pure.

One row per received sample: `cluster`, Flink's `job_id`, `job_key` (the id scalefold
predicts the job under, as in `flink_rescales`), the job's state, when the bridge
received the answer (`observed_at_ms`) and the JobManager's own instant of it
(`job_manager_ms`), the summed `pending_records` of its sources, and `vertices`: the
record's array with its fields in snake_case, one struct per vertex (Flink's counters
and gauges as given: NaN and negative values kept; the decision judges them). Partitioned
by the sample's date (the tables' `start_date` column).

A sample has no revisions: `revision` is 0 for every row, so the latest table
(`flink_signals_latest`, each job's newest sample per date, MERGEd by `KEYS`) keeps the
message written last (views.LATEST_ORDER), which the bridge wrote after the one before:
a step of its wall clock cannot make an older sample the latest.

The views: `raw_flink_signals` every received message; `flink_signals` each sample once
(the bridge sends at least once: a repeat has the same `observed_at_ms`);
`flink_vertex_signals` one row per vertex of each sample.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from services.history.decode import RECORD, WRITER_VERSION
from services.history.tables import PARTITION_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

RAW_TABLE = "flink_signals"
LATEST_TABLE = "flink_signals_latest"
KEYS = ("cluster", "job_id")
"""The latest table's: one row per job (and date)."""
SAMPLE = ("cluster", "job_id", "observed_at_ms")
"""What identifies one sample (the bridge may send it again)."""

VERTEX = {
    "jobVertexId": "job_vertex_id",
    "jobVertexName": "job_vertex_name",
    "parallelism": "parallelism",
    "maxParallelism": "max_parallelism",
    "inputs": "inputs",
    "keyedInput": "keyed_input",
    "readRecords": "read_records",
    "writeRecords": "write_records",
    "countersComplete": "counters_complete",
    "accumulatedBusyTimeMs": "accumulated_busy_time_ms",
    "accumulatedBackPressuredTimeMs": "accumulated_back_pressured_time_ms",
    "accumulatedIdleTimeMs": "accumulated_idle_time_ms",
    "busyTimeMsPerSecondAvg": "busy_time_ms_per_second_avg",
    "busyTimeMsPerSecondMax": "busy_time_ms_per_second_max",
    "backPressuredTimeMsPerSecondAvg": "back_pressured_time_ms_per_second_avg",
    "backPressuredTimeMsPerSecondMax": "back_pressured_time_ms_per_second_max",
    "idleTimeMsPerSecondAvg": "idle_time_ms_per_second_avg",
    "numRecordsInPerSecond": "num_records_in_per_second",
    "numRecordsOutPerSecond": "num_records_out_per_second",
    "pendingRecords": "pending_records",
    "sourcePartitions": "source_partitions",
    "sourceBacklog": "source_backlog",
    "sourceEndOffsets": "source_end_offsets",
}
"""`FlinkVertexSignal`'s fields and their columns."""

VIEWS = ("raw_flink_signals", "flink_signals", "flink_vertex_signals")


def _r(field: str) -> Column:
    from pyspark.sql import functions as F

    return F.col(f"{RECORD}.{field}")


def flink_signals(valid: DataFrame) -> DataFrame:
    """One row per received sample."""
    from pyspark.sql import functions as F

    def element(e: Column) -> Column:
        return F.struct(*[e[avro].alias(sql) for avro, sql in VERTEX.items()])

    pending = F.filter(
        F.transform(_r("vertices"), lambda v: v["pendingRecords"]), lambda p: p.isNotNull()
    )
    observed = _r("observedAtMillis")
    return valid.select(
        _r("cluster").alias("cluster"),
        _r("jobId").alias("job_id"),
        F.concat_ws(".", _r("cluster"), _r("jobId")).alias("job_key"),
        F.lit(0).cast("long").alias("revision"),
        F.col("partition").alias("kafka_partition"),
        F.col("offset").alias("kafka_offset"),
        _r("jobName").alias("job_name"),
        _r("jobState").alias("job_state"),
        observed.alias("observed_at_ms"),
        _r("jobManagerMillis").alias("job_manager_ms"),
        F.size(_r("vertices")).alias("vertex_count"),
        F.when(F.size(pending) > 0, F.aggregate(pending, F.lit(0.0), lambda acc, p: acc + p)).alias(
            "pending_records"
        ),
        F.transform(_r("vertices"), element).alias("vertices"),
        _r("unknownFields").alias("unknown_fields"),
        F.timestamp_millis(observed).alias("observed_at"),
        F.col(WRITER_VERSION).alias("writer_version"),
        F.col("timestamp").alias("kafka_timestamp"),
        F.to_date(F.timestamp_millis(observed)).alias(PARTITION_COLUMN),
    )


def samples(raw: DataFrame) -> DataFrame:
    """Each sample once: of repeats, the message written last."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    same = Window.partitionBy(*SAMPLE).orderBy(
        F.col("kafka_offset").desc(), F.col("kafka_partition").desc()
    )
    ranked = raw.withColumn("_rank", F.row_number().over(same))
    return ranked.where(F.col("_rank") == 1).drop("_rank")


def vertex_signals(sampled: DataFrame) -> DataFrame:
    """One row per vertex of each sample, its position as `vertex_index`."""
    from pyspark.sql import functions as F

    identity = ("cluster", "job_id", "job_key", "job_state", "observed_at_ms", "observed_at")
    exploded = sampled.select(
        *identity, PARTITION_COLUMN, F.posexplode("vertices").alias("vertex_index", "_e")
    )
    return exploded.select(
        *identity,
        "vertex_index",
        *[F.col(f"_e.{column}").alias(column) for column in VERTEX.values()],
        PARTITION_COLUMN,
    )


def signal_views(
    tables: Mapping[str, DataFrame], _before: Mapping[str, DataFrame], _schemas: object = None
) -> dict[str, DataFrame]:
    """Every view of the samples by name (module doc)."""
    raw = tables[RAW_TABLE]
    sampled = samples(raw)
    return {
        "raw_flink_signals": raw,
        "flink_signals": sampled,
        "flink_vertex_signals": vertex_signals(sampled),
    }
