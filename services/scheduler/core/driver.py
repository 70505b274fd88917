"""Folding a whole event log: many jobs, one clock that advances with the log.

Before an event at time t is applied, every job's timers due at or before t
run (earliest first, ties by job id), exactly as the scheduler service's
TimerFired ticks would run them. At the end of the log the remaining timers are
drained up to `until` (default: until none is left). Pure: same log, same
defaults, same output.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from services.contracts.events import Event
from services.scheduler.core.effects import Effect
from services.scheduler.core.fold import Defaults
from services.scheduler.core.model import JobState
from services.scheduler.core.scheduler import advance, handle

MAX_DRAIN_STEPS = 1_000_000


@dataclass
class Replay:
    """The jobs of a log and the effects folding it produced."""

    defaults: Defaults = ()
    jobs: dict[str, JobState | None] = field(default_factory=dict)
    released: dict[str, JobState] = field(default_factory=dict)
    """The last state of each job whose state was released (`jobstore.expiration-time`
    after it finished): `jobs` has None for it, as the service's table has nothing."""
    _due: list[tuple[int, str]] = field(default_factory=list)

    def feed(self, event: Event) -> Iterator[Effect]:
        """Fire what is due up to the event's time, then fold the event."""
        yield from self.run_timers(event.timestamp)
        step = handle(self.jobs.get(event.job_id), event, self.defaults)
        self._store(event.job_id, step.job)
        yield from step.effects

    def resume(self, job: JobState) -> None:
        """Carry on from a job's stored state (a snapshot) instead of its first input."""
        self._store(job.job_id, job)

    def run_timers(self, until: int) -> Iterator[Effect]:
        """Run every job's timers due at or before `until`, earliest first."""
        for _ in range(MAX_DRAIN_STEPS):
            if not self._due or self._due[0][0] > until:
                return
            due, job_id = heapq.heappop(self._due)
            job = self.jobs.get(job_id)
            if job is None or job.next_due() != due:
                continue  # superseded entry
            step = advance(job, due, self.defaults)
            self._store(job_id, step.job)
            yield from step.effects
        raise RuntimeError(
            f"more than {MAX_DRAIN_STEPS} timer steps; is a timer rescheduling itself?"
        )

    def drain(self, until: int | None = None) -> Iterator[Effect]:
        """Run the remaining timers, all of them or those due by `until`."""
        yield from self.run_timers(until if until is not None else 2**63 - 1)

    def last_states(self) -> dict[str, JobState]:
        """Each job's last state, a released job's included (what a summary reports)."""
        found = {job_id: job or self.released.get(job_id) for job_id, job in self.jobs.items()}
        return {job_id: job for job_id, job in found.items() if job is not None}

    def _store(self, job_id: str, job: JobState | None) -> None:
        before = self.jobs.get(job_id)
        if job is None and before is not None:
            self.released[job_id] = before
        self.jobs[job_id] = job
        if job is not None and (due := job.next_due()) is not None:
            heapq.heappush(self._due, (due, job_id))


def replay(
    events: Iterable[Event],
    defaults: Defaults = (),
    until: int | None = None,
    drain: bool = True,
    start: JobState | None = None,
) -> tuple[Replay, list[Effect]]:
    """Fold `events` (from `start`, a job's stored state, if given) and return the final
    jobs and every effect, in order."""
    run = Replay(defaults)
    if start is not None:
        run.resume(start)
    effects: list[Effect] = []
    for event in events:
        effects.extend(run.feed(event))
    if drain:
        effects.extend(run.drain(until))
    return run, effects
