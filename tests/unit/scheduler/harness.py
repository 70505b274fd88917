"""A scenario driver for the scheduler core, in the style of Flink's AdaptiveSchedulerTest.

A `Scenario` holds one job and a manual clock: `at(ms)` moves time (running the
timers due on the way, as the service's ticks would), events are folded at the
current time, and everything the fold emitted is kept for assertions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from services.contracts.events import (
    ConfigurationUpdated,
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    TimerFired,
    VertexSpec,
)
from services.scheduler.core import advance, handle
from services.scheduler.core.effects import (
    Decision,
    Effect,
    Rejected,
    RescaleUpdated,
    RuntimeRequest,
)
from services.scheduler.core.enums import DecisionKind, Phase, RequestKind, StateName
from services.scheduler.core.model import JobState
from services.scheduler.core.serde import dumps, loads

SECOND = 1000
JOB = "job"


def vertex(
    vid: str, parallelism: int = 4, ssg: str = "default", max_parallelism: int | None = None
) -> VertexSpec:
    return VertexSpec(vid, vid.title(), ssg, ssg, parallelism, max_parallelism)


class Scenario:
    """One job, a manual clock, and everything that happened."""

    def __init__(
        self,
        *vertices: VertexSpec,
        config: dict[str, str] | None = None,
        defaults: dict[str, str] | None = None,
        checkpoint_interval: int | None = None,
        start: int = 0,
        roundtrip: bool = False,
    ) -> None:
        self.now = start
        self.defaults = tuple(sorted((defaults or {}).items()))
        self.effects: list[Effect] = []
        self.roundtrip = roundtrip  # store and reload the state between steps, as the service does
        self.job: JobState | None = None
        specs = vertices or (vertex("source"), vertex("sink"))
        self.fold(
            JobSubmitted(
                JOB,
                start,
                "test",
                tuple(specs),
                checkpoint_interval,
                tuple(sorted((config or {}).items())),
            )
        )

    # -- driving -------------------------------------------------------------

    def fold(self, event: Event) -> Scenario:
        step = handle(self._load(), event, self.defaults)
        self._store(step.job)
        self.effects.extend(step.effects)
        return self

    def at(self, ms: int) -> Scenario:
        """Move the clock to `ms`, running the timers due by then."""
        assert ms >= self.now, "the manual clock only moves forward"
        self.now = ms
        if self.job is not None:
            step = advance(self._load(), ms, self.defaults)  # type: ignore[arg-type]
            self._store(step.job)
            self.effects.extend(step.effects)
        return self

    def after(self, ms: int) -> Scenario:
        return self.at(self.now + ms)

    def tick(self, ms: int) -> Scenario:
        """A TimerFired event, as the service writes it."""
        self.now = max(self.now, ms)
        return self.fold(TimerFired(JOB, ms))

    def tm(self, tm_id: str, slots: int = 1) -> Scenario:
        return self.fold(TaskManagerRegistered(JOB, self.now, tm_id, slots, None))

    def tms(self, *ids: str, slots: int = 1) -> Scenario:
        for tm_id in ids:
            self.tm(tm_id, slots)
        return self

    def lose(self, tm_id: str, reason: str = "killed") -> Scenario:
        return self.fold(TaskManagerLost(JOB, self.now, tm_id, reason))

    def lifecycle(self, kind: JobEventKind, **fields: Any) -> Scenario:
        return self.fold(JobLifecycle(JOB, self.now, kind, **fields))

    def checkpoint(self) -> Scenario:
        return self.lifecycle(JobEventKind.CHECKPOINT_COMPLETED)

    def checkpoint_failed(self) -> Scenario:
        return self.lifecycle(JobEventKind.CHECKPOINT_FAILED)

    def fail(self, recoverable: bool = True, exception: str = "boom") -> Scenario:
        return self.lifecycle(
            JobEventKind.TASK_FAILURE, recoverable=recoverable, exception=exception
        )

    def require(self, **bounds: tuple[int, int]) -> Scenario:
        requirements = tuple(Requirement(v, lo, hi) for v, (lo, hi) in bounds.items())
        return self.fold(RequirementsUpdated(JOB, self.now, requirements))

    def configure(self, **entries: str) -> Scenario:
        return self.fold(ConfigurationUpdated(JOB, self.now, tuple(sorted(entries.items()))))

    def _load(self) -> JobState | None:
        return self.job

    def _store(self, job: JobState | None) -> None:
        self.job = loads(dumps(job)) if (self.roundtrip and job is not None) else job

    # -- reading -------------------------------------------------------------

    @property
    def state(self) -> StateName:
        assert self.job is not None
        return self.job.state.name

    @property
    def phase(self) -> Phase | None:
        assert self.job is not None
        return self.job.state.stm.phase if self.job.state.stm else None

    @property
    def parallelism(self) -> dict[str, int]:
        assert self.job is not None and self.job.state.graph is not None
        graph = self.job.state.graph
        return {v.id: p for v, p in zip(self.job.info.vertices, graph.parallelism, strict=True)}

    def transitions(self) -> list[tuple[int, str, str]]:
        return [
            (e.at, dict(e.details)["source"], dict(e.details)["target"])
            for e in self.effects
            if isinstance(e, Decision)
            and e.kind is DecisionKind.STATE_TRANSITION
            and "source" in dict(e.details)
        ]

    def states_visited(self) -> list[str]:
        return [target for _, _, target in self.transitions()]

    def when_entered(self, state: StateName, occurrence: int = -1) -> int:
        times = [at for at, _, target in self.transitions() if target == state]
        return times[occurrence]

    def decisions(self, kind: DecisionKind | None = None) -> list[Decision]:
        return [
            e for e in self.effects if isinstance(e, Decision) and (kind is None or e.kind is kind)
        ]

    def requests(self, kind: RequestKind | None = None) -> list[RuntimeRequest]:
        return [
            e
            for e in self.effects
            if isinstance(e, RuntimeRequest) and (kind is None or e.kind is kind)
        ]

    def rejections(self) -> list[Rejected]:
        return [e for e in self.effects if isinstance(e, Rejected)]

    def records(self) -> list[dict[str, Any]]:
        """The latest revision of every rescale, in the order they were opened."""
        latest: dict[str, dict[str, Any]] = {}
        for effect in self.effects:
            if isinstance(effect, RescaleUpdated):
                latest[effect.rescale_uuid] = effect.record
        return list(latest.values())

    def record(self, index: int = -1) -> dict[str, Any]:
        return self.records()[index]

    def revisions(self) -> list[dict[str, Any]]:
        return [e.record for e in self.effects if isinstance(e, RescaleUpdated)]


def spans(record: dict[str, Any]) -> list[str]:
    return [span["state"] for span in record["schedulerStates"]]


def post(record: dict[str, Any]) -> dict[str, int | None]:
    return {v["jobVertexId"]: v["postRescaleParallelism"] for v in record["vertices"]}


def outcome(record: dict[str, Any]) -> tuple[str, str | None, str | None]:
    return record["triggerCause"], record["terminalState"], record["terminatedReason"]


def outcomes(records: Sequence[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
    return [outcome(record) for record in records]
