"""The history's tables kept in shape: before the queries start, and while they run.

`prepare`, once before the queries write: files a crashed batch left are deleted (no
commit names them), tables of an earlier scalefold are brought up to date (plain Parquet
converted to Delta, `rescales_latest` built from them, its downtime column filled in),
and every table gets the configured retention (`keep_for`).

`Upkeep` compacts small files (`OPTIMIZE`) and deletes files older than the retention
that no version still needs (`VACUUM`) on a schedule. Compaction of a table only
appended to never conflicts with the appends (Delta's isolation rules: a blind append
reads nothing), so the appended tables are compacted from a thread of their own
(job.py); a latest table is rewritten by MERGE, which does conflict with a concurrent
OPTIMIZE, so its compaction runs in its own writer's batches, one after the other.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from services.history.catalog import read_table
from services.history.diagnosis import diagnosis
from services.history.paths import Layout
from services.history.sinklog import (
    is_delta,
    last_compacted,
    orphan_checksums,
    remove_uncommitted,
    unreferenced_files,
)
from services.history.sources import SOURCES
from services.history.spark import STATS_COLUMNS
from services.history.tables import (
    EXECUTING,
    LATEST_TABLE,
    LEGACY_TABLES,
    PARTITION_COLUMN,
    TABLES,
    span_length,
)
from services.history.upsert import merge_latest, quoted

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

log = logging.getLogger(__name__)


def prepare(
    spark: SparkSession,
    layout: Layout,
    found: Mapping[str, StructType],
    retention_hours: float,
    progress: Callable[[str], None],
) -> None:
    """Before the queries write (module doc); `found`: the tables' schemas (catalog.py)."""
    retention_defaults(spark, retention_hours)
    every = [
        layout.table(name) for source in SOURCES for name in (*source.all_tables, *source.legacy)
    ]
    for path in every:
        removed = remove_uncommitted(path)
        if removed:
            log.warning("removed %d uncommitted files of %s (a crashed batch)", len(removed), path)
    converted = [t for t in (*TABLES, *LEGACY_TABLES) if convert_legacy(spark, layout.table(t))]
    if converted:
        progress(f"converted {len(converted)} Parquet tables to Delta: {', '.join(converted)}")
    if "rescales" in converted:
        raw = read_table(spark, layout.table("rescales"), found["rescales"])
        merge_latest(spark, raw, layout.table(LATEST_TABLE))
    if backfill_downtime(spark, layout.table(LATEST_TABLE), layout.table("rescale_states")):
        progress("added each rescale's downtime to rescales_latest (once, after an upgrade)")
    for path in every:
        if is_delta(path):
            keep_for(spark, path, retention_hours)


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
    spark.sql(f"ALTER TABLE {quoted(path)} SET TBLPROPERTIES ({properties})")


def convert_legacy(spark: SparkSession, path: Path) -> bool:
    """Turn a table written by an earlier scalefold (Spark's Parquet file sink) into a
    Delta table in place, its committed files as they are; True if it did.

    Delta's CONVERT lists the files of the file sink's `_spark_metadata` log, so files
    of a batch that crashed stay out; the streaming checkpoints carry on from there."""
    legacy = (path / "_spark_metadata").is_dir() or any(path.glob("*/*.parquet"))
    if is_delta(path) or not legacy:
        return False
    spark.sql(
        f"CONVERT TO DELTA {quoted(path).replace('delta.', 'parquet.', 1)} "
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


def expire_log(path: Path) -> None:
    """Delete the table's commits that are older than its log retention (`keep_for`) and
    that its newest checkpoint stands for (delta-rs's `cleanup_metadata`, which keeps
    every commit after that checkpoint). Spark cleans its tables' logs itself only as it
    writes a checkpoint, and only of commits before the start of the day the retention
    reaches back to (it truncates that cutoff to the day): up to a day more than the
    retention, and in a month run in compressed time, every commit."""
    from deltalake import DeltaTable

    DeltaTable(str(path)).cleanup_metadata()


def optimize(spark: SparkSession, path: Path) -> None:
    """Compact the table's small files: one file per date partition, up to Delta's size."""
    spark.sql(f"OPTIMIZE {quoted(path)}")


def _wall_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Upkeep:
    """OPTIMIZE and VACUUM of tables, each every `optimize_minutes`, by the table's own
    Delta history: a table is first due `optimize_minutes` after its last compaction
    (`sinklog.last_compacted`), so a history restarted more often than that still
    compacts; then by `clock` (monotonic s; `wall`: wall ms, to age the table's commits)."""

    spark: SparkSession
    config: UpkeepConfig
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], int] = _wall_ms
    _last: dict[Path, float] = field(default_factory=dict)

    def due(self, path: Path) -> bool:
        if self.config.optimize_minutes <= 0 or not is_delta(path):
            return False
        every = self.config.optimize_minutes * 60
        if path not in self._last:
            compacted = last_compacted(path)
            age = every if compacted is None else max(0.0, (self.wall() - compacted) / 1000)
            self._last[path] = self.clock() - age
        return self.clock() - self._last[path] >= every

    def run(self, path: Path) -> None:
        """Compact `path`'s small files, then vacuum what the retention lets go (the table's
        own retention property, which `keep_for` sets: see there why not RETAIN).

        A table holding no file its newest version does not is not vacuumed: VACUUM would
        delete nothing and still commit twice (its START and END), which was all the
        log of the Flink tables of a history without Flink (251 commits in a month)."""
        self._last[path] = self.clock()
        keep_for(self.spark, path, self.config.retention_hours)  # set at start already
        optimize(self.spark, path)
        if unreferenced_files(path):
            self.spark.sql(f"VACUUM {quoted(path)}")
        expire_log(path)
        for orphan in orphan_checksums(path):  # what the log's own cleanup left
            orphan.unlink(missing_ok=True)

    def run_due(self, paths: list[Path]) -> None:
        """`run` every table that is due; a failure is logged and retried next time."""
        for path in paths:
            if not self.due(path):
                continue
            try:
                self.run(path)
            except Exception as error:  # compaction must never stop the ingest
                self._last[path] = self.clock()
                known = diagnosis(error, path)
                if known is None:
                    log.warning("could not compact %s; trying again later", path, exc_info=True)
                else:
                    log.error("could not compact %s; trying again later: %s", path, known)
