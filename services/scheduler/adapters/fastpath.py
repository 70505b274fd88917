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
"""

from __future__ import annotations

import asyncio
from typing import Any

import faust
from faust.transport.drivers import aiokafka as faust_aiokafka
from mode.services import WaitResults


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


class FastHandoverTransport(faust_aiokafka.Transport):
    Consumer = FastHandoverConsumer


class App(faust.App):
    """faust.App with the cheaper per-message hand-over for `kafka://` brokers."""

    def _new_transport(self) -> Any:
        return FastHandoverTransport(self.conf.broker_consumer, self)
