"""The history's one streaming query: each micro-batch decoded once, every table written.

`TablesWriter` is the query's foreachBatch callback. A batch of the rescales
topic arrives decoded (decode.py), is materialized once (`localCheckpoint`),
and from that one copy it appends each raw table (tables.TABLES), upserts
`rescales_latest` (upsert.merge_latest) and produces the rejected records to
the dead-letter topic (letters.DeadLetterWriter). Decoding the Avro records is
most of an ingest's work; until 2026-11 every table had its own query, so
every record was decoded seven times.

Exactly once per table: each append carries Delta's idempotent-write options,
`txnAppId` = `history-<table>-<query id>` and `txnVersion` = the batch id, so a
batch that Spark runs again after a crash (its offsets not yet committed)
skips the tables it committed already and writes the others; the MERGE only
replaces a row with a strictly later one. Dead letters stay at-least-once.

Carrying on from the per-table queries of an earlier scalefold: each of their
checkpoints (`checkpoints/<table>`, `checkpoints/dead_letters`) says up to
which Kafka offsets its table holds the topic. On the first start of the one
query (no `checkpoints/tables` yet) those positions are read once into
`checkpoints/tables.resume.json`; the query then reads the topic from its
beginning and each table skips the records it held already, so nothing is lost
or written twice. A later start, or a batch run again, reads the same file.
`rescales_latest` has its own position: the old `rescales` query MERGEd after
its append, so a batch whose append landed just before a crash is in `rescales`
but not yet in `rescales_latest`, and is MERGEd again.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from services.history.decode import RescaleSchemas, dead_letters, valid
from services.history.letters import DeadLetterWriter
from services.history.sinklog import is_delta
from services.history.tables import LATEST_TABLE, TABLES
from services.history.upsert import Upkeep, append, merge_latest, query_id, side_by_side
from services.history.views import Layout

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

log = logging.getLogger(__name__)

CHECKPOINT = "tables"
"""`checkpoints/tables`: the one query's checkpoint."""
DEAD_LETTERS = "dead_letters"
"""The dead letters' name among the sinks (and their old query's checkpoint)."""
SINKS = (*TABLES, LATEST_TABLE, DEAD_LETTERS)
Ends = dict[str, dict[int, int]]
"""Per sink, per Kafka partition: the first offset the sink does not hold yet."""


class TablesWriter:
    """foreachBatch of the history's query: decode once, write every table."""

    def __init__(
        self,
        layout: Layout,
        schemas: RescaleSchemas,
        letters: DeadLetterWriter,
        upkeep: Upkeep | None = None,
        resume: Ends | None = None,
    ) -> None:
        self._layout, self._schemas, self._letters = layout, schemas, letters
        self._upkeep = upkeep
        self._resume = resume or {}
        self._query_id: str | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self._query_id is None:  # written before the first batch runs
            self._query_id = query_id(self._layout.checkpoint(CHECKPOINT))
        batch = batch.localCheckpoint()  # decoded once, for every write below
        accepted = valid(batch)
        # `rescales` and `rescales_latest` first: what summary, timeline and the REST API
        # read. The other tables after them, side by side (upsert.side_by_side), so the
        # batch ends sooner and the next rescale waits less for its turn
        # (bench/reading_bench.py). Each append stays idempotent by its own txnAppId.
        rows = self._append(accepted, "rescales", batch_id)
        if self._resume.get(LATEST_TABLE) != self._resume.get("rescales"):
            rows = TABLES["rescales"](self._unseen(accepted, LATEST_TABLE))
        merge_latest(batch.sparkSession, rows, self._layout.table(LATEST_TABLE))
        letters = dead_letters(self._unseen(batch, DEAD_LETTERS), self._schemas)
        others = [t for t in TABLES if t != "rescales"]
        writes: list[Callable[[], object]] = [
            partial(self._append, accepted, table, batch_id) for table in others
        ]
        writes.append(partial(self._letters, letters, batch_id))
        side_by_side(batch.sparkSession, writes, "history-write")
        if self._upkeep is not None:  # MERGE and OPTIMIZE of one table, one after the other
            self._upkeep.run_due([self._layout.table(LATEST_TABLE)])

    def _append(self, accepted: DataFrame, table: str, batch_id: int) -> DataFrame:
        """Append the batch's rows of `table` once; returns those rows."""
        rows = TABLES[table](self._unseen(accepted, table))
        append(rows, self._layout.table(table), f"history-{table}-{self._query_id}", batch_id)
        return rows

    def _unseen(self, frame: DataFrame, sink: str) -> DataFrame:
        """`frame` without the records `sink` held before this query (see the module doc)."""
        ends = self._resume.get(sink)
        return frame.where(not_before(ends)) if ends else frame


def not_before(ends: dict[int, int]) -> Column:
    """Kafka source rows at or after `ends[partition]` (every row of another partition)."""
    from pyspark.sql import functions as F

    pairs = [F.lit(x) for partition, offset in sorted(ends.items()) for x in (partition, offset)]
    first = F.element_at(F.create_map(*pairs), F.col("partition"))
    return F.col("offset") >= F.coalesce(first, F.lit(0))


def resume_points(layout: Layout) -> Ends:
    """What each sink of the per-table queries held, read once and then kept (module doc)."""
    kept = layout.checkpoint(f"{CHECKPOINT}.resume.json")
    if kept.exists():
        saved = json.loads(kept.read_text(encoding="utf-8"))
        return {sink: {int(p): o for p, o in ends.items()} for sink, ends in saved.items()}
    if (layout.checkpoint(CHECKPOINT) / "metadata").exists():
        return {}  # started before, on a directory no per-table query wrote
    ends: Ends = {}
    for sink in SINKS:
        # The old `rescales` query MERGEd after its append: `rescales_latest` holds its
        # committed batches, not always the one its append landed in (then it crashed).
        old = "rescales" if sink == LATEST_TABLE else sink
        end = held(layout.checkpoint(old), _holds(layout, sink))
        if end is not None:
            ends[sink] = end
    if ends:
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(".tmp")
        partial.write_text(json.dumps(ends, sort_keys=True), encoding="utf-8")
        os.replace(partial, kept)
        log.info("carrying on from the per-table queries' checkpoints: %s", ends)
    return ends


def held(checkpoint: Path, holds: Callable[[int], bool]) -> dict[int, int] | None:
    """Up to which offsets an old query's sink holds the topic; None if it never ran.

    The last batch with a commit marker is in the sink; a batch planned after it
    (offsets written, no commit marker: the query stopped in it) is too when
    `holds(batch)`, the sink's own record of it, says so."""
    planned, committed = _batches(checkpoint / "offsets"), _batches(checkpoint / "commits")
    if not planned:
        return None
    last = max(planned)
    if last in committed or holds(last):
        return _offsets(checkpoint / "offsets" / str(last))
    done = [b for b in committed if b < last]
    return _offsets(checkpoint / "offsets" / str(max(done))) if done else {}


def _holds(layout: Layout, sink: str) -> Callable[[int], bool]:
    """Whether an old query's batch reached its sink: Delta's idempotent-write version of
    the query (its streaming sink uses the query id, the rescales writer its own id), or
    the Parquet file sink's log of an earlier scalefold still."""
    if sink in (DEAD_LETTERS, LATEST_TABLE):
        return lambda _: False  # sent again; MERGEd again (a MERGE is idempotent)
    table, checkpoint = layout.table(sink), layout.checkpoint(sink)

    def holds(batch: int) -> bool:
        sink_log = table / "_spark_metadata"
        if (sink_log / str(batch)).exists() or (sink_log / f"{batch}.compact").exists():
            return True
        if not is_delta(table) or not (checkpoint / "metadata").exists():
            return False
        from deltalake import DeltaTable

        delta, query = DeltaTable(str(table)), query_id(checkpoint)
        versions = (delta.transaction_version(a) for a in (query, f"history-{sink}-{query}"))
        return any(v is not None and v >= batch for v in versions)

    return holds


def _batches(directory: Path) -> set[int]:
    try:
        return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}
    except OSError:
        return set()


def _offsets(path: Path) -> dict[int, int]:
    """The Kafka source's end offsets in a checkpoint's offset log entry (its one source)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    sources = [json.loads(line) for line in lines[2:] if line.strip()]
    return {int(p): o for source in sources for topic in source.values() for p, o in topic.items()}
