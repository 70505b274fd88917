"""Delta Lake writes of the history: the latest revision by MERGE, and table upkeep.

Each micro-batch of the history's query (ingest.TablesWriter) is appended to
the raw tables and its `rescales` rows upserted into `rescales_latest`, which
holds one row per rescale, its latest revision (the highest `revision`, then
the highest Kafka offset: views.LATEST_ORDER). The views read that table
instead of ranking every revision on each query.

A batch that Spark runs again after a crash (its offsets were not committed)
writes nothing twice: each append carries Delta's idempotent-write options
(`txnAppId`, `txnVersion` = the batch id), so Delta skips a version it has
committed already; the MERGE only replaces a row with a strictly later one, so
running it again changes nothing.

`Upkeep` compacts small files (`OPTIMIZE`) and deletes files older than the
retention that no version still needs (`VACUUM`) on a schedule. Compaction of
a table only appended to never conflicts with the appends (Delta's isolation
rules: a blind append reads nothing); `rescales_latest` is rewritten by MERGE,
which does conflict with a concurrent OPTIMIZE, so its compaction runs in its
own writer's batches, one after the other.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from services.history.sinklog import is_delta
from services.history.spark import STATS_COLUMNS
from services.history.tables import EXECUTING, LATEST_TABLE, PARTITION_COLUMN, span_length
from services.history.views import latest_revisions

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

log = logging.getLogger(__name__)

_LATER = (
    "s.revision > t.revision OR (s.revision = t.revision AND (s.kafka_offset > t.kafka_offset"
    " OR (s.kafka_offset = t.kafka_offset AND s.kafka_partition > t.kafka_partition)))"
)
"""The MERGE's "strictly later" (views.LATEST_ORDER); equal rows are left alone."""


def _quoted(path: Path) -> str:
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
        f"MERGE INTO {_quoted(path)} t USING {view} s ON {same} "
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


def retention_defaults(spark: SparkSession, hours: float) -> None:
    """Make tables created from now on keep their log and replaced files for `hours`.

    Delta's own defaults keep the log 30 days: with a commit every few seconds that is
    hundreds of thousands of log files per table. The log is cleaned up as Delta writes
    its checkpoints (every ten commits), the replaced data files by `VACUUM`."""
    for key, interval in _retention(hours).items():
        spark.conf.set(f"spark.databricks.delta.properties.defaults.{key}", interval)


def table_properties(hours: float) -> dict[str, str]:
    """The properties a new table is created with: `retention_defaults`' and the statistics
    columns (`spark.STATS_COLUMNS`), for a table delta-rs creates (`upsert_rows`)."""
    retention = {f"delta.{key}": value for key, value in _retention(hours).items()}
    return {**retention, "delta.dataSkippingNumIndexedCols": str(STATS_COLUMNS)}


def _retention(hours: float) -> dict[str, str]:
    """The table properties that keep the log and the replaced files for `hours`."""
    return {
        "logRetentionDuration": f"interval {max(60, round(hours * 3600))} seconds",
        "deletedFileRetentionDuration": f"interval {round(hours * 3600)} seconds",
    }


def keep_for(spark: SparkSession, path: Path, hours: float) -> None:
    """Give the table at `path` the retention of `hours` (`retention_defaults`) and the
    statistics columns of new tables (`spark.STATS_COLUMNS`), if it has others; VACUUM
    reads the retention there. A metadata commit, so the table's writers must not run.

    The retention goes by the table's property, not by `VACUUM ... RETAIN n HOURS`: Delta
    rounds that to whole hours (`math.round`), so a retention under half an hour became
    none, and VACUUM deleted the files of an append committing beside it."""
    from deltalake import DeltaTable

    wanted = table_properties(hours)
    have = DeltaTable(str(path)).metadata().configuration
    if all(have.get(key) == value for key, value in wanted.items()):
        return
    properties = ", ".join(f"'{key}' = '{value}'" for key, value in wanted.items())
    spark.sql(f"ALTER TABLE {_quoted(path)} SET TBLPROPERTIES ({properties})")


def convert_legacy(spark: SparkSession, path: Path) -> bool:
    """Turn a table written by an earlier scalefold (Spark's Parquet file sink) into a
    Delta table in place, its committed files as they are; True if it did.

    Delta's CONVERT lists the files of the file sink's `_spark_metadata` log, so files
    of a batch that crashed stay out; the streaming checkpoints carry on from there."""
    legacy = (path / "_spark_metadata").is_dir() or any(path.glob("*/*.parquet"))
    if is_delta(path) or not legacy:
        return False
    spark.sql(
        f"CONVERT TO DELTA {_quoted(path).replace('delta.', 'parquet.', 1)} "
        f"PARTITIONED BY ({PARTITION_COLUMN} DATE)"
    )
    return True


def backfill_downtime(spark: SparkSession, latest: Path, states: Path) -> bool:
    """Give a `rescales_latest` of an earlier scalefold its `downtime_ms` column; True if it did.

    The ingest derives each row's downtime as it arrives (tables.py); rows written
    before did not have it, so it is computed once from the raw spans of the same
    Kafka message (the same definition) and the table rewritten, before the query starts."""
    from pyspark.sql import functions as F

    if not is_delta(latest):
        return False
    rows = spark.read.format("delta").load(str(latest))
    if "downtime_ms" in rows.columns:
        return False
    message = ["rescale_uuid", "kafka_partition", "kafka_offset"]
    if is_delta(states):
        spans = spark.read.format("delta").load(str(states)).where(F.col("state") != EXECUTING)
        span = span_length(
            F.col("duration_ms"), F.col("enter_timestamp_ms"), F.col("leave_timestamp_ms")
        )
        per_message = spans.groupBy(*message).agg(F.sum(span).alias("downtime_ms"))
        rows = rows.join(per_message, on=message, how="left")
    else:
        rows = rows.withColumn("downtime_ms", F.lit(None).cast("long"))
    filled = rows.withColumn(
        "downtime_ms",
        F.when(F.col("terminal_state").isNotNull(), F.coalesce(F.col("downtime_ms"), F.lit(0))),
    )
    (
        filled.write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .partitionBy(PARTITION_COLUMN)
        .save(str(latest))
    )
    return True


@dataclass(frozen=True)
class UpkeepConfig:
    optimize_minutes: float = 10.0
    """Minutes between compactions of each table (0: never)."""
    retention_hours: float = 24.0
    """VACUUM deletes files that no version of the last this many hours needs."""


def optimize(spark: SparkSession, path: Path) -> None:
    """Compact the table's small files: one file per date partition, up to Delta's size."""
    spark.sql(f"OPTIMIZE {_quoted(path)}")


@dataclass
class Upkeep:
    """OPTIMIZE and VACUUM of tables, each at most every `optimize_minutes`."""

    spark: SparkSession
    config: UpkeepConfig
    clock: Callable[[], float] = time.monotonic
    _last: dict[Path, float] = field(default_factory=dict)

    def due(self, path: Path) -> bool:
        if self.config.optimize_minutes <= 0 or not is_delta(path):
            return False
        last = self._last.setdefault(path, self.clock())
        return self.clock() - last >= self.config.optimize_minutes * 60

    def run(self, path: Path) -> None:
        """Compact `path`'s small files, then vacuum what the retention lets go (the table's
        own retention property, which `keep_for` sets: see there why not RETAIN)."""
        self._last[path] = self.clock()
        keep_for(self.spark, path, self.config.retention_hours)  # set at start already
        optimize(self.spark, path)
        self.spark.sql(f"VACUUM {_quoted(path)}")

    def run_due(self, paths: list[Path]) -> None:
        """`run` every table that is due; a failure is logged and retried next time."""
        for path in paths:
            if not self.due(path):
                continue
            try:
                self.run(path)
            except Exception:  # compaction must never stop the ingest
                self._last[path] = self.clock()
                log.warning("could not compact %s; trying again later", path, exc_info=True)


def write_tables(frames: dict[str, DataFrame], tables: Callable[[str], Path]) -> None:
    """Batch-write the raw tables and `rescales_latest` (tests, the benchmark's synthetic data)."""
    for name, frame in frames.items():
        append(frame, tables(name))
    rescales = frames["rescales"]
    merge_latest(rescales.sparkSession, rescales, tables(LATEST_TABLE))
