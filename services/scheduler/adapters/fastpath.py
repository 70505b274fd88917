"""A cheaper hand-over of each fetched message from Faust's consumer to its streams.

Faust's fetch loop (`faust.transport.consumer.Consumer._drain_messages`, 0.15.x)
hands every message to the conductor with

    await self.wait_first(callback(message), self.suspend_flow.wait())

and mode's `Service.wait_first` wraps each argument, and the consumer's own
stopped and crashed events, in a task, then `asyncio.wait`s for the first and
cancels the other three: four tasks and an `asyncio.wait` per message. In a
profile of a bare agent that does nothing this race is the largest single
cost of Faust's per-message path (see docs/scheduler-service.md).

`FastHandoverConsumer.wait_first` recognises exactly that call and first
runs the hand-over itself, in place: almost always it completes without
waiting for anything (the flow is active and the stream's buffer has room), so
no task is made at all. Only if it has to wait (a full stream buffer, the flow
paused) is the rest of it handed to mode's `wait_first` with the suspend
event, exactly as Faust does, so a rebalance still cancels a waiting hand-over.
Every other call goes to mode's `wait_first` unchanged. An upstream fix would
do the same in `_drain_messages` (or hand over a whole `getmany` batch per race).

And a prompter fetch. Faust builds its aiokafka consumer with
`fetch_max_wait_ms=1500`, fixed in its driver. aiokafka leaves a partition
whose fetched records are still buffered out of its next fetch request, so that
request can name only partitions with nothing new yet, and the broker holds it
for the whole wait: the agent then gets no events for up to 1.5 s (measured
with events arriving all the while; the latency bench's p99 at 1,000 events/s
was 2.2-2.4 s, 0.8 s with a 100 ms wait). `PromptFetchThread` sets the wait to
`FETCH_MAX_WAIT_MS` before the consumer starts (aiokafka's `start()` builds its
fetcher from it). The broker still answers as soon as there is data; an idle
worker sends a fetch every 100 ms instead of every 1.5 s.

And no message lost at the end of a recovery. Faust's
`Recovery.on_recovery_completed` (0.15.x) resumes the stream partitions, then
awaits the seek to the committed offsets, and only then resumes its flow
control, which empties every stream's queue (`clear_on_resume`). But the
consumer's flow is already running then (recovery resumed it to read the
changelogs), so while the seek is awaited the fetcher hands the first fetched
messages of the just-resumed partitions to the stream queue, and the resume
throws them away. Nothing fetches them again: the consumer's read offset has
passed them, so they are never delivered and never acknowledged (Faust's commit
stays behind them for good). A partition whose last messages were dropped so
gives the worker no later message to notice the gap by: they are lost.
`SeekFirstRecovery` stops the consumer's flow before that sequence runs, so no
message is fetched or handed over until the seek is done and the queues are
cleared; Faust's own `resume_flow()` at its end starts it again, from the
committed offsets; if it returns early because another rebalance began, the
next recovery resumes it. (Seen as `Faust skipped offsets` after many
rebalances and as revisions lost in compose runs; the upstream fix is the same
line at the top of `on_recovery_completed`.)

And no message lost where nothing was committed yet. Faust drops the messages of
a fetch it is iterating when a rebalance stops its flow (or when the generation
changes), and the rest of a fetch it gets while its flow is stopped; it relies on
seeking every partition back to its committed offset afterwards (`perform_seek`,
at the end of every recovery). aiokafka's `seek_to_committed` seeks only
partitions committed beyond offset 0 (the offset-0 half is aio-libs/aiokafka#1003)
and leaves the others where its fetcher is: past the dropped messages, which are
then never delivered. That is the case of a partition no worker has committed yet
(a new topic, or one taken over from a worker killed before its first commit). Seen in compose on 2026-11-27: the
survivor of a takeover had fetched the taken-over partitions to their end and
delivered none of them (Faust's read offset `None`, aiokafka's position at the
high watermark), and folded nothing more; the test lost 80 revisions.
`PromptFetchThread.seek_to_committed` also seeks those partitions: to offset 0
where 0 is committed, else to where the reset policy says (`earliest` here),
exactly where a consumer with nothing committed starts. The changelog partitions
are left to the recovery, which seeks them itself.

And a worker whose recovery is stuck leaves. Faust only warns, every few seconds and
for ever, when a recovery reads nothing (`No event received for active tp ...`); the
worker then never gets to work and its partitions are folded by no one.
`RecoveryWatch` says when a recovery has made no progress (the changelog records
it still has to read unchanged, the same recovery) for `timeout_s`; if the broker
answers, the app then exits (`EXIT_RECOVERY_STALLED`), so compose or Kubernetes
starts it again, which rejoins the group and recovers afresh. Nothing is lost by
it: a worker may stop at any moment (the kill -9 tests). If the broker does not
answer, the worker waits for it, as it does for a broker away at any other time.

And a warning where Faust would pass over offsets silently: when a fetched offset
jumps past the last one handed over, Faust's consumer counts the offsets between
as done (`_add_gap`), so its commit can go past messages it never delivered. On
the job-events topic that is not expected; the worker's own check of the offsets
it folded reads such a range from Kafka, and the warning says where it began.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, cast

import faust
from faust.tables.manager import TableManager as FaustTableManager
from faust.tables.recovery import Recovery
from faust.transport.drivers import aiokafka as faust_aiokafka
from faust.types import TP
from mode import Service
from mode.services import WaitResults

log = logging.getLogger("scalefold.scheduler")


def _is_suspend_wait(coro: Any, suspend_flow: Any) -> bool:
    frame = getattr(coro, "cr_frame", None)
    return frame is not None and frame.f_locals.get("self") is suspend_flow


async def _resumed(coro: Any, waiting_on: Any) -> Any:
    """Drive a coroutine that has already run to its first wait, as its task would have."""
    try:
        while True:
            if waiting_on is None:  # a bare yield (asyncio.sleep(0))
                await asyncio.sleep(0)
            else:
                waiting_on._asyncio_future_blocking = False
                await asyncio.wait((waiting_on,))
            try:
                waiting_on = coro.send(None)
            except StopIteration as done:
                return done.value
    except BaseException:
        coro.close()
        raise


FETCH_MAX_WAIT_MS = 100
"""The longest the broker holds a fetch with no new data (librdkafka's default is 500)."""


class PromptFetchThread(faust_aiokafka.AIOKafkaConsumerThread):
    def _create_worker_consumer(self, transport: Any) -> Any:
        consumer = super()._create_worker_consumer(transport)
        consumer._fetch_max_wait_ms = FETCH_MAX_WAIT_MS  # read when start() builds the fetcher
        return consumer

    async def seek_to_committed(self) -> Mapping[TP, int]:
        return cast(Mapping[TP, int], await self.call_thread(self._seek_to_committed_or_reset))

    async def _seek_to_committed_or_reset(self) -> Mapping[TP, int]:
        # aiokafka's seek_to_committed seeks only partitions committed beyond offset 0;
        # the others stay where the fetcher is, past whatever Faust fetched and dropped
        # (see the module's docstring). Those take the reset policy's position, as a
        # consumer with nothing committed starts, or offset 0 where 0 is committed.
        consumer = self._ensure_consumer()
        committed: Mapping[TP, int | None] = await consumer.seek_to_committed()
        never = []
        for tp, offset in committed.items():
            if self.consumer._is_changelog_tp(tp):
                continue  # a recovery seeks these itself
            if offset == 0:
                consumer.seek(tp, 0)
            elif offset is None:
                never.append(tp)
        if never:
            if self.app.conf.consumer_auto_offset_reset == "latest":
                await consumer.seek_to_end(*never)
            else:
                await consumer.seek_to_beginning(*never)
        return cast(Mapping[TP, int], committed)


class FastHandoverConsumer(faust_aiokafka.Consumer):
    def _new_consumer_thread(self) -> faust_aiokafka.AIOKafkaConsumerThread:
        return PromptFetchThread(self, loop=self.loop, beacon=self.beacon)

    async def wait_first(self, *coros: Any, timeout: Any = None) -> WaitResults:
        if (
            len(coros) != 2
            or timeout is not None
            or not asyncio.iscoroutine(coros[0])
            or not _is_suspend_wait(coros[1], self.suspend_flow)
        ):
            return await super().wait_first(*coros, timeout=timeout)
        handover, suspended = coros
        try:
            waiting_on = handover.send(None)
        except StopIteration as done:
            suspended.close()
            return WaitResults([handover], [done.value], False)
        except BaseException:
            suspended.close()
            raise
        return await super().wait_first(_resumed(handover, waiting_on), suspended)

    async def _add_gap(self, tp: Any, offset_from: int, offset_to: int) -> None:
        # When a fetched offset jumps past the last one handed over, Faust counts the
        # offsets between as done, so its commit may pass over them. Not expected on
        # the job-events topic (no compaction, no transactions): say so, so that a
        # "Faust skipped offsets" of a later start can be traced to its cause.
        log.warning(
            "Faust's fetch of %s[%d] jumped to offset %d: it counts %d..%d as done",
            tp.topic,
            tp.partition,
            offset_to,
            offset_from,
            offset_to - 1,
        )
        await super()._add_gap(tp, offset_from, offset_to)


class FastHandoverTransport(faust_aiokafka.Transport):
    Consumer = FastHandoverConsumer


class SeekFirstRecovery(Recovery):
    async def on_recovery_completed(self, generation_id: int = 0) -> None:
        self.app.consumer.stop_flow()  # resumed by Faust once seeked and cleared
        await super().on_recovery_completed(generation_id)

    @Service.timer(1.0)
    async def _watch_progress(self) -> None:
        # A timer of the recovery's own: Faust starts the app's timers only once the
        # first recovery has completed.
        app = cast(App, self.app)
        if app.recovery_watch is None:
            return
        started_at, remaining = recovery_progress(self)
        stalled = app.recovery_watch.stalled_for(time.monotonic(), started_at, remaining)
        if stalled is not None and app.on_recovery_stalled is not None:
            await app.on_recovery_stalled(stalled, remaining)


@dataclass
class RecoveryWatch:
    """When a Faust recovery has made no progress for `timeout_s`; time enters as `now`."""

    timeout_s: float
    _seen: tuple[float, int] | None = None  # (the recovery's start, records still to read)
    _since: float = 0.0

    def stalled_for(self, now: float, started_at: float | None, remaining: int) -> float | None:
        """Seconds without progress once they reach the timeout, else None.

        `started_at`: when the recovery under way started (None: none is); `remaining`:
        the changelog records it has still to read. A new recovery, or fewer records left,
        is progress."""
        if started_at is None or remaining <= 0:
            self._seen = None
            return None
        seen = (started_at, remaining)
        if seen != self._seen:
            self._seen, self._since = seen, now
            return None
        stalled = now - self._since
        return stalled if stalled >= self.timeout_s else None

    def restart(self) -> None:
        """Count from the next observation again (the broker is away: waited for)."""
        self._seen = None


def recovery_progress(recovery: Recovery) -> tuple[float | None, int]:
    """What `RecoveryWatch` looks at: the recovery's start (None: not recovering) and
    the records it has still to read."""
    if not recovery.in_recovery:
        return None, 0
    return recovery._recovery_started_at, recovery.active_remaining_total()


class TableManager(FaustTableManager):
    @property
    def recovery(self) -> Recovery:
        if self._recovery is None:
            self._recovery = SeekFirstRecovery(self.app, self, beacon=self.beacon, loop=self.loop)
        return self._recovery


class App(faust.App):
    """faust.App with the cheaper per-message hand-over for `kafka://` brokers
    and a recovery that loses no message (both above).

    `recovery_watch`: when its recovery counts as stalled; `on_recovery_stalled`
    (seconds stalled, records still to read) is awaited then, every second until it
    exits or restarts the watch."""

    def __init__(
        self,
        *args: Any,
        recovery_watch: RecoveryWatch | None = None,
        on_recovery_stalled: Callable[[float, int], Awaitable[None]] | None = None,
        **kwargs: Any,
    ) -> None:
        self.recovery_watch = recovery_watch
        self.on_recovery_stalled = on_recovery_stalled
        kwargs.setdefault("TableManager", TableManager)
        super().__init__(*args, **kwargs)

    def _new_transport(self) -> Any:
        return FastHandoverTransport(self.conf.broker_consumer, self)
