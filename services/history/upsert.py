"""Delta Lake writes of the history: appends, and each rescale's latest revision by MERGE.

The tables queries (writers.TablesWriter) append the raw tables; the latest
writers upsert each rescale's latest revision (the highest `revision`, then the highest
Kafka offset: views.LATEST_ORDER) into the source's latest table, with delta-rs
(`upsert_rows`); `merge_latest` does the same with Spark, for an upgrade and for tests.
The views read that table instead of ranking every revision on each query.

A batch that Spark runs again after a crash (its offsets were not committed)
writes nothing twice: each append carries Delta's idempotent-write options
(`txnAppId`, `txnVersion` = the batch id), so Delta skips a version it has
committed already; the MERGE only replaces a row with a strictly later one, so
running it again changes nothing. The tables' upkeep is upkeep.py's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from services.history.sinklog import is_delta
from services.history.tables import LATEST_TABLE, PARTITION_COLUMN
from services.history.views import latest_revisions

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

_LATER = (
    "s.revision > t.revision OR (s.revision = t.revision AND (s.kafka_offset > t.kafka_offset"
    " OR (s.kafka_offset = t.kafka_offset AND s.kafka_partition > t.kafka_partition)))"
)
"""The MERGE's "strictly later" (views.LATEST_ORDER); equal rows are left alone."""


def quoted(path: Path) -> str:
    """`delta.`path`` for Spark SQL; Delta takes only an absolute path as a table's name
    (a relative one fails as "Unsupported data source type for direct query on files")."""
    return "delta.`" + str(path.resolve()).replace("`", "``") + "`"


def merge_latest(
    spark: SparkSession, batch: DataFrame, path: Path, keys: tuple[str, ...] = ("rescale_uuid",)
) -> None:
    """Upsert the latest revision per rescale of `batch` (raw `rescales` rows) into `path`;
    `keys` identify a rescale (a real Flink's: cluster, job and uuid)."""
    newest = latest_revisions(batch, keys)  # a MERGE takes at most one source row per target row
    if not is_delta(path):
        # The first batch creates the table. A crash before the commit leaves no version,
        # so the batch run again comes here once more.
        newest.write.format("delta").partitionBy(PARTITION_COLUMN).mode("append").save(str(path))
        return
    view = f"_history_latest_batch_{abs(hash(str(path)))}"
    newest.createOrReplaceTempView(view)
    same = " AND ".join(f"t.{key} = s.{key}" for key in (*keys, PARTITION_COLUMN))
    spark.sql(
        f"MERGE INTO {quoted(path)} t USING {view} s ON {same} "
        f"WHEN MATCHED AND ({_LATER}) THEN UPDATE SET * "
        "WHEN NOT MATCHED THEN INSERT *"
    )


def upsert_rows(
    path: Path, rows: pa.Table, keys: Sequence[str], create: Mapping[str, str] | None = None
) -> None:
    """`merge_latest` with delta-rs, for a latest writer's small batches (writers.py): the
    rows (each rescale's latest revision of the batch, at most one per key) replace a row
    only when strictly later; the first batch creates the table, with the `create`
    table properties. Tens of milliseconds where Spark's MERGE takes seconds of CPU
    (docs/benchmarks.md); the table stays one any Delta reader reads, Spark included."""
    from deltalake import DeltaTable, write_deltalake

    if not is_delta(path):
        write_deltalake(
            str(path), rows, partition_by=[PARTITION_COLUMN], mode="append", configuration=create
        )
        return
    same = " AND ".join(f"t.{key} = s.{key}" for key in (*keys, PARTITION_COLUMN))
    (
        DeltaTable(str(path))
        .merge(rows, same, source_alias="s", target_alias="t", merge_schema=True)
        .when_matched_update_all(predicate=_LATER)
        .when_not_matched_insert_all()
        .execute()
    )


def append(batch: DataFrame, path: Path, app_id: str | None = None, version: int = 0) -> None:
    """Append `batch` to the table at `path`; with `app_id`, once per (app_id, version)."""
    writer = (
        batch.write.format("delta")
        .partitionBy(PARTITION_COLUMN)
        .mode("append")
        .option("mergeSchema", "true")
    )
    if app_id is not None:
        writer = writer.option("txnAppId", app_id).option("txnVersion", version)
    writer.save(str(path))


def side_by_side(spark: SparkSession, writes: Sequence[Callable[[], object]], name: str) -> None:
    """Run a batch's `writes` in threads of their own and wait for every one; the first
    failure raises, which fails the batch (Spark runs it again; each write is idempotent
    or at-least-once). Each write is mostly the driver's Delta commit (log, listing, one
    small file), so on two cores the batch ends seconds sooner than one after the other.
    The threads inherit the batch's local properties and tags (its job group): stopping
    the query cancels their jobs as it cancels the batch's own."""
    from pyspark.util import inheritable_thread_target

    inherit = inheritable_thread_target(spark)
    with ThreadPoolExecutor(len(writes), thread_name_prefix=name) as pool:
        for started in [pool.submit(inherit(write)) for write in writes]:
            started.result()


def query_id(checkpoint: Path) -> str:
    """The streaming query's id, kept in its checkpoint's `metadata` across restarts."""
    return str(json.loads((checkpoint / "metadata").read_text(encoding="utf-8"))["id"])


def write_tables(frames: dict[str, DataFrame], tables: Callable[[str], Path]) -> None:
    """Batch-write the raw tables and `rescales_latest` (tests, the benchmark's synthetic data)."""
    for name, frame in frames.items():
        append(frame, tables(name))
    rescales = frames["rescales"]
    merge_latest(rescales.sparkSession, rescales, tables(LATEST_TABLE))
