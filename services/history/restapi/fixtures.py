"""Rescale records written into history tables with Spark, as the streaming job writes them.

For the REST API's tests and its benchmark: records go through the job's own Avro
decode and table transforms (`decode`, `TABLES`) and `write_tables`, so the tables
are the ones the service would have written; no broker needed.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.contracts import Codec
from services.contracts import records as r
from services.history.decode import RescaleSchemas, decode, valid
from services.history.paths import Layout
from services.history.tables import TABLES
from services.history.upsert import write_tables
from services.history.views import KAFKA_SOURCE_SCHEMA

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

WHEN = datetime(2026, 1, 1, tzinfo=UTC)
"""Kafka's timestamp column; nothing reads it here."""


def write_records(
    spark: SparkSession,
    codec: Codec,
    records: Sequence[dict[str, Any]],
    layout: Layout,
    first_offset: int = 0,
) -> None:
    """Append `records` (Avro datums of the rescale schema) to the history tables at `layout`,
    as Kafka messages of partition 0 at consecutive offsets from `first_offset`."""
    rows = [
        (rec["jobId"].encode(), codec.encode(r.RESCALE, rec), "rescales", 0, offset, WHEN, 0)
        for offset, rec in enumerate(records, start=first_offset)
    ]
    raw = spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA)
    decoded = valid(decode(raw, RescaleSchemas.of(codec.registry))).localCheckpoint()
    write_tables({name: transform(decoded) for name, transform in TABLES.items()}, layout.table)


def write_batches(
    spark: SparkSession, codec: Codec, records: Iterable[dict[str, Any]], data_dir: Path, size: int
) -> int:
    """`write_records` in batches of `size` (a large history); returns how many were written."""
    layout, batch, written = Layout(data_dir), list[dict[str, Any]](), 0
    for record in records:
        batch.append(record)
        if len(batch) == size:
            write_records(spark, codec, batch, layout, written)
            written += len(batch)
            batch = []
    if batch:
        write_records(spark, codec, batch, layout, written)
        written += len(batch)
    return written


def write_flink_records(
    spark: SparkSession,
    codec: Codec,
    records: Sequence[dict[str, Any]],
    layout: Layout,
    first_offset: int = 0,
) -> None:
    """Append FlinkRescale records (the bridge's) to `flink_rescales` and MERGE them into
    `flink_rescales_latest`, as the history's Flink query does (flink_ingest.py)."""
    from services.contracts.topics import flink_job_key
    from services.history import flink_tables
    from services.history.upsert import append, merge_latest

    rows = [
        (
            flink_job_key(rec["cluster"], rec["jobId"]).encode(),
            codec.encode(r.FLINK_RESCALE, rec),
            "flink-rescales",
            0,
            offset,
            WHEN,
            0,
        )
        for offset, rec in enumerate(records, start=first_offset)
    ]
    raw = spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA)
    schemas = RescaleSchemas.of(codec.registry, r.FLINK_RESCALE)
    table = flink_tables.flink_rescales(valid(decode(raw, schemas))).localCheckpoint()
    append(table, layout.table(flink_tables.RAW_TABLE))
    merge_latest(spark, table, layout.table(flink_tables.LATEST_TABLE), flink_tables.KEYS)
