"""The planner's imperative shell: a streaming query of its own over every source's topic.

The planner decides from the rescale records as they arrive on Kafka, not from the
committed tables: its query (queries.py) reads the `rescales` and `flink-rescales`
topics beside the writers' queries, not behind them, and `PlannerFeed`, its
foreachBatch, collects each micro-batch's messages, decodes them with the contracts'
codec into raw-table rows (pytables.py, as the latest writers do; a record the tables
query dead-letters is not folded either), takes the planner's columns of them
(`Source.planner`) and folds them into the `PlannerState` (planstate.py). Its batches
cost a Kafka read, no decoding job: the view stays fresh on a busy machine.
`Planner.tick`, called by the service's loop several times a second, decides
(planner.plan) when the state changed or a second passed, and sends what is new.

**How fresh is the view.** Each micro-batch reads everything on the topics up to the
offsets Spark fetched when it planned the batch, so once it is folded the state holds
every record written before that moment: the batch's trigger time in the query's
progress (`lastProgress`), which Spark also reports, every second, while no data comes
(`spark.sql.streaming.noDataProgressEventInterval`). That instant is `fresh_as_of`:
the planner decides nothing from a view older than `max_staleness_ms`, and every
command carries it in its basis (a paused or starved service resumes with an old
view: it waits for the batch that catches up, issue 46).

**After a restart** the state is rebuilt from the latest tables (what the latest
queries committed, within the lookback), and the planner's query, which keeps no
checkpoint of its own across starts, reads the topics from where the latest queries
committed (resume.committed_positions): an overlap is folded twice, harmlessly
(planstate.py), and nothing between the two is missed.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from services.contracts import Codec
from services.contracts.commands import ScalingCommand
from services.history.commands import CommandSender
from services.history.jobview import PlannerConfig, Rescale
from services.history.paths import Layout
from services.history.planner import plan
from services.history.planstate import PlannerState
from services.history.sinklog import is_delta
from services.history.sources import FLINK_RESCALES, PLANNED, Source
from services.history.tables import PARTITION_COLUMN
from services.history.writers import messages

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming.query import StreamingQuery

log = logging.getLogger(__name__)

CHECKPOINT = "planner"
"""`checkpoints/planner`: the planner query's, emptied at every start (module doc)."""
DECIDE_EVERY_S = 1.0
"""Time-driven rules (the grace periods) are looked at this often with no new record."""


class PlannerFeed:
    """foreachBatch of the planner's query: each source's valid records folded in."""

    def __init__(
        self,
        sources: Mapping[str, Source],
        codec: Codec,
        state: PlannerState,
        lock: threading.Lock,
    ) -> None:
        self._sources, self._codec = sources, codec  # topic -> its source
        self._state, self._lock = state, lock

    def __call__(self, batch: DataFrame, batch_id: int) -> None:
        by_topic = messages(batch, self._codec, {t: s.record for t, s in self._sources.items()})
        folded = [
            (source, [_planner(source)(source.row(m)) for m in by_topic.get(topic, [])])
            for topic, source in self._sources.items()
        ]
        with self._lock:
            for source, rescales in folded:
                self._state.fold(rescales, flink=source is FLINK_RESCALES)


def _planner(source: Source) -> Callable[[Mapping[str, Any]], Rescale]:
    """What the planner reads of `source`'s rows (one of `PLANNED`)."""
    assert source.planner is not None, source.name
    return source.planner


def fresh_as_of(query: StreamingQuery | None) -> int | None:
    """The trigger time of the planner query's last batch, idle or not, in epoch ms, if
    that batch read its sources to the offsets they had then (module doc)."""
    # The progress as Spark's JSON, in one call: pyspark's `lastProgress` builds its object
    # with a py4j call per field, several times a second a measurable share of a core.
    progress = query._jsq.lastProgress() if query is not None else None
    if progress is None:
        return None
    found = json.loads(progress.json())
    for source in found.get("sources", []):
        if source.get("latestOffset") not in (None, source.get("endOffset")):
            return None  # read only part of what was there (a rate limit): not caught up
    stamp = datetime.fromisoformat(found["timestamp"].replace("Z", "+00:00"))
    return int(stamp.timestamp() * 1000)


class Planner:
    """The planner's state, its decisions and its sender (module doc)."""

    def __init__(
        self,
        config: PlannerConfig,
        sender: CommandSender,
        lookback_ms: int,
        decide_every_s: float = DECIDE_EVERY_S,
    ) -> None:
        self.config, self.sender, self.decide_every_s = config, sender, decide_every_s
        self.state = PlannerState(config.flap_window_ms, lookback_ms)
        self.lock = threading.Lock()
        self._decided: tuple[int, float] = (-1, 0.0)  # state version, monotonic time

    def feed(self, codec: Codec, topic_of: Callable[[Source], str]) -> PlannerFeed:
        sources = {topic_of(source): source for source in PLANNED}
        return PlannerFeed(sources, codec, self.state, self.lock)

    def bootstrap(self, layout: Layout, now_ms: int) -> int:
        """Fold the latest tables in (their rows within the lookback, read with delta-rs);
        returns how many."""
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        since = _date(now_ms - self.state.lookback_ms)
        count = 0
        for source in PLANNED:
            path = layout.table(source.latest_table)
            if not is_delta(path):
                continue
            dataset = DeltaTable(str(path)).to_pyarrow_dataset()
            rows = dataset.to_table(filter=pc.field(PARTITION_COLUMN) >= since).to_pylist()
            with self.lock:
                self.state.fold(
                    [_planner(source)(row) for row in rows], flink=source is FLINK_RESCALES
                )
            count += len(rows)
        return count

    def tick(self, now_ms: int, fresh_ms: int | None) -> list[ScalingCommand]:
        """Decide, if the state changed or a second passed, and send what is new."""
        with self.lock:
            version = self.state.version
            waited = time.monotonic() - self._decided[1]
            if version == self._decided[0] and waited < self.decide_every_s:
                return []
            self._decided = (version, time.monotonic())
            self.state.forget_idle(now_ms)
            ours, flink = self.state.ours(), self.state.flink()
        if fresh_ms is None:
            return []
        commands = plan(ours, now_ms, self.config, fresh_ms, flink)
        sent = self.sender.send(commands)
        for command in sent:
            log.info(
                "sent %s %s amount=%d to job %s (view %.1f s old): %s",
                command.action,
                command.command_id,
                command.amount,
                command.job_id,
                (now_ms - fresh_ms) / 1000,
                command.reason,
            )
        return sent


def _date(ms: int) -> Any:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).date()


def fresh_checkpoint(layout: Layout) -> str:
    """The planner query's checkpoint, emptied: it starts from the latest queries' positions."""
    path = layout.checkpoint(CHECKPOINT)
    shutil.rmtree(path, ignore_errors=True)
    return str(path)
