"""The history's two writers, one of each for every source (sources.py): foreachBatch callbacks.

`LatestWriter` (the source's latest query): a micro-batch's messages collected, decoded
with the contracts' codec and turned into raw-table rows in Python (pytables.py), their
latest revision per rescale MERGEd into the source's latest table with delta-rs
(upsert.upsert_rows). One Delta commit per batch, and no Spark job but the Kafka read:
what `history summary`, the REST API and the planner's restart read is a fraction of a
second of CPU behind the topic, not a decoding job, a Spark MERGE and five more commits.
A record the tables query dead-letters is not MERGEd either.

`TablesWriter` (the source's tables query): the batch decoded once and materialized
(`localCheckpoint`), then, side by side (upsert.side_by_side), the raw table appended
(a rescale's children are arrays in its row) and the rejected records produced to the
dead-letter topic.

Exactly once per table: each append carries Delta's idempotent-write options,
`txnAppId` = `history-<table>-<query id>` and `txnVersion` = the batch id, so a batch
that Spark runs again after a crash (its offsets not yet committed) skips the tables it
committed already and writes the others; the MERGE only replaces a row with a strictly
later one, so running it again changes nothing. Dead letters stay at-least-once. Where
an earlier scalefold's per-table queries left off is resume.py's.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from services.contracts import Codec
from services.history.decode import RescaleSchemas, dead_letters, decode, valid
from services.history.letters import DeadLetterWriter
from services.history.paths import Layout
from services.history.pytables import Message, Row, decoded
from services.history.resume import DEAD_LETTERS, Ends, not_before
from services.history.sources import Source
from services.history.upkeep import Upkeep
from services.history.upsert import append, query_id, side_by_side, upsert_rows
from services.history.views import LATEST_ORDER

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame


class LatestWriter:
    """foreachBatch of a source's latest query: MERGE each rescale's latest revision."""

    def __init__(
        self,
        source: Source,
        codec: Codec,
        layout: Layout,
        *,
        schema: pa.Schema,
        upkeep: Upkeep | None,
        properties: Mapping[str, str],
    ) -> None:
        """`schema`: the latest table's (its raw table's, catalog.arrow_schema); `properties`:
        those it is created with (upsert.table_properties)."""
        self._source, self._codec, self._schema = source, codec, schema
        self._upkeep, self._properties = upkeep, properties
        self._path = layout.table(source.latest_table)

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        import pyarrow as pa

        found = messages(batch, self._codec, {"": self._source.record}).get("", [])
        rows = [self._source.row(m) for m in found]
        if rows:
            newest = latest(rows, self._source.keys)
            table = pa.Table.from_pylist(newest, schema=self._schema)
            upsert_rows(self._path, table, self._source.keys, self._properties)
        if self._upkeep is not None:  # MERGE and OPTIMIZE of one table, one after the other
            self._upkeep.run_due([self._path])


def messages(
    batch: DataFrame, codec: Codec, records: Mapping[str, str]
) -> dict[str, list[Message]]:
    """The batch's Kafka messages, collected once and decoded, by topic; `records`: each
    topic's record (the key "": every topic's). Those the tables query dead-letters are
    left out (pytables.decoded)."""
    found: dict[str, list[Message]] = {}
    columns = ("topic", "key", "value", "partition", "offset", "timestamp")
    for m in batch.select(*columns).collect():
        topic = m["topic"] if m["topic"] in records else ""
        key = None if m["key"] is None else bytes(m["key"])
        value = None if m["value"] is None else bytes(m["value"])
        where = (m["partition"], m["offset"], m["timestamp"])
        message = decoded(codec, records[topic], key, value, where)
        if message is not None:
            found.setdefault(topic, []).append(message)
    return found


def latest(rows: list[Row], keys: Sequence[str]) -> list[Row]:
    """One row per rescale (`keys`): its latest revision (views.LATEST_ORDER)."""
    chosen: dict[tuple[Any, ...], Row] = {}
    for row in rows:
        key = tuple(row[k] for k in keys)
        kept = chosen.get(key)
        if kept is None or _order(row) > _order(kept):
            chosen[key] = row
    return list(chosen.values())


def _order(row: Row) -> tuple[int, int, int]:
    return tuple(row[c] or 0 for c in LATEST_ORDER)  # type: ignore[return-value]


class TablesWriter:
    """foreachBatch of a source's tables query: decode once, append every table once,
    dead-letter the rejected records."""

    def __init__(
        self,
        source: Source,
        schemas: RescaleSchemas,
        layout: Layout,
        letters: DeadLetterWriter,
        resume: Ends | None = None,
    ) -> None:
        self._source, self._schemas, self._layout = source, schemas, layout
        self._letters = letters
        self._resume = resume or {}
        self._query_id: str | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self._query_id is None:  # written before the first batch runs
            self._query_id = query_id(self._layout.checkpoint(self._source.tables_checkpoint))
        decoded = decode(batch, self._schemas).localCheckpoint()  # once, for every write below
        accepted = valid(decoded)
        writes: list[Callable[[], object]] = [
            partial(self._append, accepted, table, batch_id) for table in self._source.appended
        ]
        letters = dead_letters(self._unseen(decoded, DEAD_LETTERS), self._schemas)
        writes.append(partial(self._letters, letters, batch_id))
        side_by_side(batch.sparkSession, writes, f"history-{self._source.name}")

    def _append(self, accepted: DataFrame, table: str, batch_id: int) -> None:
        """Append the batch's rows of `table` once."""
        rows = self._source.transform(self._unseen(accepted, table))
        append(rows, self._layout.table(table), f"history-{table}-{self._query_id}", batch_id)

    def _unseen(self, frame: DataFrame, sink: str) -> DataFrame:
        """`frame` without the records `sink` held before this query (resume.py)."""
        ends = self._resume.get(sink)
        return frame.where(not_before(ends)) if ends else frame
