"""A history table whose data file someone deleted, mended from Kafka before the queries start.

A Delta table's log names every Parquet file of its
current version; one deleted by hand (or lost with a disk) fails every reader of the
table, the latest table's MERGE and the compaction. `Mender.mend` finds such files by the
log (each `add` action also says how many rows the file held), drops them from the table
(delta-rs `repair`, Delta's FSCK: a commit of `remove` actions) and reads their rows
again from the topic, which is the source of truth (in Spark: a whole topic is read):
- an appended (raw) table gets the rows of the topic, up to what the table
  holds by its query's checkpoint (`resume.held`), that it lacks, found by their Kafka
  partition and offset;
- the latest table has every record of the topic MERGEd again (upsert.merge_latest), up
  to where its query committed, which only inserts what is missing (a MERGE replaces a
  row only by a later revision); its query redoes anything after.
What the topic no longer holds (its retention) cannot come back: the line says how many
rows were lost, by the files' own counts.

While the service runs, a deleted file or a full disk fails a query or a compaction,
which is retried; diagnosis.py says what the failure means.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import unquote

from services.contracts import SchemaRegistry, Settings
from services.history.catalog import read_table
from services.history.decode import decode, valid
from services.history.paths import Layout
from services.history.queries import kafka_options
from services.history.resume import committed_positions, held, not_before
from services.history.sinklog import is_delta, wrote_batch
from services.history.sources import SOURCES, Source
from services.history.upsert import append, merge_latest, query_id

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import StructType

ROW_KEY = ("kafka_partition", "kafka_offset")
"""What names a raw row: its Kafka message."""


@dataclass(frozen=True)
class Missing:
    """The data files of a table's current version that are not on disk."""

    table: str
    files: tuple[Path, ...]
    rows: int
    """The rows they held, by their `add` actions' statistics."""


def missing(table: str, table_dir: Path) -> Missing | None:
    """The files `table`'s log names that are gone; None if there are none."""
    if not is_delta(table_dir):
        return None
    import pyarrow as pa
    from deltalake import DeltaTable

    actions = pa.table(DeltaTable(str(table_dir)).get_add_actions(flatten=True))
    gone = [
        (table_dir / unquote(path), records or 0)
        for path, records in zip(
            actions.column("path").to_pylist(),
            actions.column("num_records").to_pylist(),
            strict=True,
        )
        if not (table_dir / unquote(path)).exists()
    ]
    if not gone:
        return None
    return Missing(table, tuple(p for p, _ in gone), sum(n for _, n in gone))


@dataclass(frozen=True)
class Mender:
    """What mending needs: the session, the broker, the schemas and the tables'."""

    spark: SparkSession
    settings: Settings
    registry: SchemaRegistry
    layout: Layout
    found: Mapping[str, StructType]
    """Every table's schema (catalog.table_schemas)."""
    secrets: Path | None = None

    def mend(self, progress: Callable[[str], None]) -> list[str]:
        """Mend every table with missing files (module doc), before the queries start;
        one line per table mended, each also given to `progress`."""
        from deltalake import DeltaTable

        said: list[str] = []
        for source in SOURCES:
            tables = source.all_tables
            damaged = [m for t in tables if (m := missing(t, self.layout.table(t)))]
            if not damaged:
                continue
            messages = _topic(
                self.spark, self.settings, source.topic(self.settings.topics), self.secrets
            )
            for damage in damaged:
                progress(
                    f"table {damage.table}: {len(damage.files)} data file(s) its Delta log "
                    f"names are gone; reading their rows again from {source.topic(self.settings.topics)}"
                )
                path = self.layout.table(damage.table)
                DeltaTable(str(path)).repair()
                kept = _count(self.spark, path)
                if damage.table == source.latest_table:
                    self._merge_again(source, messages)
                else:
                    self._append_again(source, damage.table, messages)
                line = _said(damage, _count(self.spark, path) - kept, path)
                progress(line)
                said.append(line)
        return said

    def _append_again(self, source: Source, table: str, messages: DataFrame) -> None:
        """Append the rows of `table` the topic has, up to what the table holds, and it lacks."""
        path = self.layout.table(table)
        checkpoint = self.layout.checkpoint(source.tables_checkpoint)
        app_id = f"history-{table}-{query_id(checkpoint)}"
        ends = held(checkpoint, lambda batch: wrote_batch(path, batch, app_id))
        if not ends:
            return
        decoded = decode(messages.where(_before(ends)), source.schemas(self.registry))
        rows = source.transform(valid(decoded))
        have = read_table(self.spark, path, self.found[table]).select(*ROW_KEY)
        append(rows.join(have, list(ROW_KEY), "left_anti"), path)

    def _merge_again(self, source: Source, messages: DataFrame) -> None:
        """MERGE the topic's records again into the latest table, up to where its query
        committed: what it lacks is inserted, nothing else changes (a row is replaced only
        by a later revision). In Spark, as an upgrade's first MERGE: the latest query's
        writer collects its batch to the driver, which a whole topic would not fit."""
        positions = committed_positions(self.layout.checkpoint(source.latest_checkpoint))
        ends = {p: o for offsets in positions.values() for p, o in offsets.items()}
        if not ends:
            return
        decoded = decode(messages.where(_before(ends)), source.schemas(self.registry))
        rows = source.transform(valid(decoded))
        merge_latest(self.spark, rows, self.layout.table(source.latest_table), source.keys)


def _topic(spark: SparkSession, settings: Settings, topic: str, secrets: Path | None) -> DataFrame:
    """Everything the topic holds now, read as the history's queries read it."""
    options = {
        **kafka_options(settings, (topic,), secrets),
        "startingOffsets": "earliest",
        "endingOffsets": "latest",
    }
    return spark.read.format("kafka").options(**options).load()


def _before(ends: dict[int, int]) -> Column:
    """Kafka rows below `ends[partition]`; none of a partition `ends` does not name (the
    complement of resume.not_before, which keeps every row of such a partition)."""
    return ~not_before(ends)


def _count(spark: SparkSession, path: Path) -> int:
    return spark.read.format("delta").load(str(path)).count() if is_delta(path) else 0


def _said(damage: Missing, restored: int, path: Path) -> str:
    """One line: which files were gone, and how many of their rows came back."""
    files = len(damage.files)
    named = f"{damage.files[0]}" + (f" and {files - 1} more" if files > 1 else "")
    head = (
        f"table {damage.table}: {files} data file(s) its Delta log names were gone ({named}); "
        f"removed them from the table ({path})"
    )
    restored = max(0, min(restored, damage.rows))
    if restored == damage.rows:
        return f"{head} and read all {damage.rows} of their rows again from Kafka"
    return (
        f"{head}; {restored} of their {damage.rows} rows read again from Kafka, "
        f"{damage.rows - restored} lost: the topic no longer holds them (its retention)"
    )
