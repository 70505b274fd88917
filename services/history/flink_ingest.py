"""The history's second streaming query: the rescales real Flink clusters recorded.

The Flink bridge (services/bridge) sends every revision of every rescale a
Flink JobManager shows over REST to the `flink-rescales` topic, as Avro
`FlinkRescale` records keyed by `flink_job_key(cluster, jobId)`. This query
keeps them with the discipline of the `rescales` query (ingest.py): each
micro-batch is decoded once (decode.py, with the FlinkRescale schemas and that
key), appended to the raw table `flink_rescales` exactly once (Delta's
idempotent writes: `txnAppId` = `history-flink_rescales-<query id>`,
`txnVersion` = the batch id), its latest revision per (cluster, job, rescale
uuid) upserted into `flink_rescales_latest` by a MERGE that only replaces a row
with a strictly later one, and its undecodable records produced to the
dead-letter topic (at-least-once), the query going on.

A query of its own, with its own checkpoint (`checkpoints/flink_tables`), rather
than a second topic for the `rescales` query: the two topics' positions stay
independent, an existing checkpoint is read unchanged, and a poison record on
one topic never holds up the other.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.history.decode import RescaleSchemas, dead_letters, decode, valid
from services.history.flink_tables import KEYS, LATEST_TABLE, RAW_TABLE, flink_rescales
from services.history.letters import DeadLetterWriter
from services.history.upsert import Upkeep, append, merge_latest, query_id, side_by_side
from services.history.views import Layout

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery
    from pyspark.sql.streaming.readwriter import DataStreamWriter

QUERY_NAME = "history_flink_tables"
CHECKPOINT = "flink_tables"
"""`checkpoints/flink_tables`: the Flink query's checkpoint."""


class FlinkTablesWriter:
    """foreachBatch of the Flink query: decode once, append, MERGE the latest, dead letters."""

    def __init__(
        self,
        layout: Layout,
        schemas: RescaleSchemas,
        letters: DeadLetterWriter,
        upkeep: Upkeep | None = None,
    ) -> None:
        self._layout, self._schemas, self._letters = layout, schemas, letters
        self._upkeep = upkeep
        self._query_id: str | None = None

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        if self._query_id is None:  # written before the first batch runs
            self._query_id = query_id(self._layout.checkpoint(CHECKPOINT))
        batch = batch.localCheckpoint()  # decoded once, for every write below
        rows = flink_rescales(valid(batch))
        # The MERGE first: `flink_rescales` reads `flink_rescales_latest`, so a rescale is
        # queryable as soon as it commits (issue 37's freshness); the raw append and the
        # dead letters after it, side by side. Either order is safe on a batch run again:
        # the MERGE replaces only with a strictly later revision, the append is once per
        # (txnAppId, batch id), dead letters are at-least-once.
        merge_latest(batch.sparkSession, rows, self._layout.table(LATEST_TABLE), KEYS)
        app_id = f"history-{RAW_TABLE}-{self._query_id}"
        writes: list[Callable[[], object]] = [
            partial(append, rows, self._layout.table(RAW_TABLE), app_id, batch_id),
            partial(self._letters, dead_letters(batch, self._schemas), batch_id),
        ]
        side_by_side(batch.sparkSession, writes, "history-flink-write")
        if self._upkeep is not None:  # MERGE and OPTIMIZE of one table, one after the other
            self._upkeep.run_due([self._layout.table(LATEST_TABLE)])


def flink_query(
    source: DataFrame,
    layout: Layout,
    schemas: RescaleSchemas,
    letters: DeadLetterWriter,
    *,
    upkeep: Upkeep | None,
    trigger: dict[str, Any],
) -> Callable[[], StreamingQuery]:
    """What starts (again, from its checkpoint) the query over `source`, the Kafka
    source of the flink-rescales topic; `schemas`: the FlinkRescale versions."""
    writer = FlinkTablesWriter(layout, schemas, letters, upkeep)
    stream: DataStreamWriter = (
        decode(source, schemas)
        .writeStream.foreachBatch(writer)
        .option("checkpointLocation", str(layout.checkpoint(CHECKPOINT)))
        .queryName(QUERY_NAME)
        .trigger(**trigger)
    )
    return stream.start


def tables(layout: Layout) -> list[Path]:
    """The Flink query's tables, for the upkeep and the clean-up at start."""
    return [layout.table(name) for name in (RAW_TABLE, LATEST_TABLE)]
