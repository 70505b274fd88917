"""The bridge's loop: poll every cluster when due, send what changed, back off when one is away.

A cluster that does not answer is said once ("does not answer ... retrying"), retried
with exponential backoff (tenacity's wait, from one poll interval up to `MAX_BACKOFF_S`)
and said once again when it answers; the other clusters go on meanwhile. Offsets are
kept in memory between polls and replaced only after Kafka committed them.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from tenacity import RetryCallState, wait_exponential

from services.bridge.offsets import JobOffset
from services.bridge.poll import ClusterPoll, ClusterPoller
from services.bridge.sink import Sink, TransactionAbortedError
from services.contracts.flinkrest import FlinkUnreachableError

log = logging.getLogger("scalefold.bridge")
MAX_BACKOFF_S = 30.0


@dataclass
class Schedule:
    """When a cluster is polled next, and how many polls in a row found it away."""

    due: float = 0.0
    listing_due: float = 0.0  # the next presence listing between polls
    failures: int = 0
    polls: int = 0
    jobs_polled: int = 0


@dataclass
class Bridge:
    pollers: Sequence[ClusterPoller]
    sink: Sink
    interval_s: float
    offsets: dict[str, JobOffset] = field(default_factory=dict)
    clock: Callable[[], float] = time.time
    schedules: dict[str, Schedule] = field(default_factory=dict)
    presence_interval_s: float = 0.0
    """How often /taskmanagers alone is read between polls (0: never): the resolution of
    a TaskManager's coming and going (poll.Presence)."""

    def __post_init__(self) -> None:
        self.backoff = wait_exponential(
            multiplier=self.interval_s, min=self.interval_s, max=MAX_BACKOFF_S
        )
        for poller in self.pollers:
            self.schedules.setdefault(poller.name, Schedule())

    def run(self, stop: Callable[[], bool]) -> None:
        while not stop():
            self.step(time.monotonic())
            due = min(s.due for s in self.schedules.values())
            while not stop() and time.monotonic() < due:
                self.list_presence(time.monotonic())
                wake = min([due, *self._listings_due()])
                time.sleep(min(0.2, max(0.0, wake - time.monotonic())))

    def list_presence(self, monotonic: float) -> None:
        """Between polls: each cluster's TaskManager listing when due (and it answers)."""
        if self.presence_interval_s <= 0:
            return
        for poller in self.pollers:
            schedule = self.schedules[poller.name]
            if schedule.failures or monotonic < schedule.listing_due:
                continue
            poller.list_presence()
            schedule.listing_due = monotonic + self.presence_interval_s

    def _listings_due(self) -> list[float]:
        if self.presence_interval_s <= 0:
            return []
        return [s.listing_due for s in self.schedules.values() if not s.failures]

    def step(self, monotonic: float) -> None:
        """Poll each cluster that is due, and send its output."""
        for poller in self.pollers:
            schedule = self.schedules[poller.name]
            if monotonic < schedule.due:
                continue
            polled = self._poll(poller, schedule)
            if polled is not None:
                self._send(polled)
            schedule.due = monotonic + self._delay(schedule)

    def _poll(self, poller: ClusterPoller, schedule: Schedule) -> ClusterPoll | None:
        try:
            polled = poller.poll(self.offsets, int(self.clock() * 1000))
        except FlinkUnreachableError as error:
            schedule.failures += 1
            if schedule.failures == 1:
                log.warning(
                    "Flink cluster %s does not answer (%s); retrying with backoff up to %g s",
                    poller.name,
                    error,
                    MAX_BACKOFF_S,
                )
            return None
        if schedule.failures:
            log.info(
                "Flink cluster %s answers again after %d tries", poller.name, schedule.failures
            )
        schedule.failures = 0
        schedule.polls += 1
        schedule.jobs_polled += len(polled.observed)
        return polled

    def _delay(self, schedule: Schedule) -> float:
        if not schedule.failures:
            return self.interval_s
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # no Retrying here
        state.attempt_number = schedule.failures
        return float(self.backoff(state))

    def _send(self, polled: ClusterPoll) -> None:
        try:
            self.sink.send(polled.observed, polled.letters, self.offsets, polled.signals)
        except TransactionAbortedError as error:
            log.warning("a poll's transaction was aborted (%s); the next poll redoes it", error)
            return
        for seen in polled.observed:
            self.offsets[seen.offset.key] = seen.offset
        for letter in polled.letters:
            log.warning(
                "%s: GET %s unusable (to dead-letters): %s", letter.key, letter.path, letter.reason
            )
