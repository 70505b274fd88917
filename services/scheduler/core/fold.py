"""The fold context: what Flink's AdaptiveScheduler gives its states, for one step.

A `Fold` lives for one `handle` call. It starts from an immutable `JobState`,
lets the state behaviours change a working copy through a few guarded
operations, and ends with the new state and the effects. Nothing outside it is
touched, and time is the event's time, so the step is a pure function.

The guards are Flink's:
- `transition_to` refuses a transition from a state's constructor (`on_enter`)
  or `on_leave`, and a transition into the current state's own kind;
- timers carry the identity (epoch) of the state, and for transition-manager
  timers of the phase, that set them; they are dropped when their state or
  phase is left, and never run (runIfState / runIfPhase).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from functools import lru_cache
from typing import Any, Final

from services.scheduler.core import timeline as tl
from services.scheduler.core.config import SchedulerConfig, resolve
from services.scheduler.core.effects import (
    Decision,
    Effect,
    Rejected,
    RescaleUpdated,
    RuntimeRequest,
)
from services.scheduler.core.enums import (
    DecisionKind,
    JobStatus,
    RejectionKind,
    RequestKind,
    StateName,
)
from services.scheduler.core.guards import live, runs
from services.scheduler.core.model import InvariantError, JobState, Rescale, Slot, Timer, all_slots
from services.scheduler.core.recording import build_record
from services.scheduler.core.structs import replace

MAX_TIMERS_PER_STEP: Final = 10_000

Defaults = tuple[tuple[str, str], ...]


def _details(details: dict[str, object]) -> tuple[tuple[str, str], ...]:
    """An effect's details as (key, text) pairs, in the order given."""
    return tuple([(key, str(value)) for key, value in details.items()])


@lru_cache(maxsize=4096)
def config_of(
    defaults: Defaults, settings: tuple[tuple[str, str], ...], checkpointing: bool
) -> SchedulerConfig:
    """The effective configuration: service defaults overridden by the job's settings."""
    return resolve({**dict(defaults), **dict(settings)}, checkpointing=checkpointing)


class Fold:
    """One step of one job's scheduler.

    What a step changes most (the clock, the scheduler state, the rescale timeline,
    the timers and the counters) lives on the Fold as working values and goes back
    into the job once, in `finish`; `job` holds everything else and is changed with
    `set`. Read the clock, the state and the timeline from the Fold, never from `job`.
    """

    __slots__ = (
        "_config",
        "_constructing",
        "_slot_count",
        "_slots",
        "_touched",
        "defaults",
        "effects",
        "epochs",
        "job",
        "now",
        "released",
        "sequence",
        "state",
        "timeline",
        "timer_seq",
        "timers",
    )

    def __init__(self, job: JobState, defaults: Defaults) -> None:
        self.job = job
        self.defaults = defaults
        self.now = job.now
        self.state = job.state
        self.timeline = job.timeline
        self.timers = list(job.timers)  # in (due, seq) order
        self.sequence = job.sequence
        self.epochs = job.epochs
        self.timer_seq = job.timer_seq
        self.effects: list[Effect] = []
        self.released = False
        """Set when a finished job's state is let go: the step's job is then None."""
        self._touched: dict[str, Rescale] = {}
        self._constructing = False
        self._config: SchedulerConfig | None = None
        self._slots: tuple[Slot, ...] | None = None
        self._slot_count: int | None = None

    # -- reading -----------------------------------------------------------

    @property
    def config(self) -> SchedulerConfig:
        """The job's configuration, resolved once per step (and again if its settings change)."""
        if self._config is None:
            self._config = config_of(
                self.defaults, self.job.settings, self.job.checkpoint_interval_ms is not None
            )
        return self._config

    @property
    def slots(self) -> tuple[Slot, ...]:
        """Every slot of the registered TaskManagers, in their order, built once per step."""
        if self._slots is None:
            self._slots = all_slots(self.job.task_managers)
        return self._slots

    @property
    def slot_count(self) -> int:
        """How many slots the registered TaskManagers offer, counted once per step."""
        if self._slot_count is None:
            self._slot_count = sum([tm.slots for tm in self.job.task_managers])
        return self._slot_count

    # -- writing -----------------------------------------------------------

    def set(self, **changes: Any) -> None:
        """Change fields of `job` other than the working values."""
        self.job = replace(self.job, **changes)
        if "settings" in changes:
            self._config = None
        if "task_managers" in changes:
            self._slots = self._slot_count = None

    def set_state(self, **changes: Any) -> None:
        self.state = replace(self.state, **changes)

    def next_epoch(self) -> int:
        self.epochs += 1
        return self.epochs

    def finish(self) -> JobState:
        """The job after this step, with the step's working values written back.

        A step that left a state or a phase (it issued an epoch) drops the timers
        those set: epochs only grow, so such a timer could never run again. Kept,
        it would be stored with the job until due, and the service would write a
        TimerFired for it that changes nothing."""
        self.flush_rescales()
        timers = live(self.state, self.timers) if self.epochs != self.job.epochs else self.timers
        self.job = replace(
            self.job,
            now=self.now,
            state=self.state,
            timeline=self.timeline,
            timers=tuple(timers),
            sequence=self.sequence,
            epochs=self.epochs,
            timer_seq=self.timer_seq,
        )
        return self.job

    # -- timers (runIfState / runIfPhase) -----------------------------------

    def run_if_state(self, action: str, delay_ms: int) -> None:
        """Run `action` after `delay_ms` if this state is still current then."""
        self._schedule(action, delay_ms, None)

    def run_if_phase(self, action: str, delay_ms: int) -> None:
        """Run `action` after `delay_ms` if this state and its STM phase are still current."""
        stm = self.state.stm
        if stm is None:
            raise InvariantError(f"{self.state.name} has no state transition manager")
        self._schedule(action, delay_ms, stm.epoch)

    def _schedule(self, action: str, delay_ms: int, phase_epoch: int | None) -> None:
        self.timer_seq += 1
        timer = Timer(
            self.now + max(0, delay_ms), self.timer_seq, action, self.state.epoch, phase_epoch
        )
        bisect.insort(self.timers, timer)

    def advance_to(self, until: int, run: Callable[[Fold, str], None]) -> None:
        """Run the timers due at or before `until` in due order, then set the clock to it."""
        timers = self.timers
        if until <= self.now and (not timers or timers[0].due > until):
            return  # most steps: nothing due, and the clock already there
        for _ in range(MAX_TIMERS_PER_STEP):
            if not timers or timers[0].due > until:
                break
            timer = timers.pop(0)
            if timer.due > self.now:
                self.flush_rescales()  # records carry the time they changed at
                self.now = timer.due
            if runs(self.state, timer):
                run(self, timer.action)
        else:
            raise InvariantError(f"more than {MAX_TIMERS_PER_STEP} timers in one step")
        if until > self.now:
            self.flush_rescales()
            self.now = until

    # -- transitions -------------------------------------------------------

    def begin_construction(self) -> None:
        self._constructing = True

    def end_construction(self) -> None:
        self._constructing = False

    def check_may_transition(self, target: StateName) -> None:
        if self._constructing:
            raise InvariantError(f"transition to {target} from a constructor or on_leave")
        if target == self.state.name:
            raise InvariantError(f"self-transition into {target}")

    # -- effects -----------------------------------------------------------

    def _sequence(self) -> int:
        self.sequence += 1
        return self.sequence

    def decide(
        self,
        kind: DecisionKind,
        message: str,
        *,
        job_status: JobStatus | None = None,
        **details: object,
    ) -> None:
        stm = self.state.stm
        self.effects.append(
            Decision(
                self.job.job_id,
                self.now,
                self._sequence(),
                kind,
                str(self.state.name),
                str(stm.phase) if stm is not None else None,
                message,
                _details(details) if details else (),
                job_status,
            )
        )

    def request(self, kind: RequestKind, graph_id: str | None, **details: object) -> None:
        """A request to the runtime; `runtime` says whether an external runtime must answer."""
        details = {**details, "runtime": self.config.runtime}
        self.effects.append(
            RuntimeRequest(
                self.job.job_id,
                self.now,
                self._sequence(),
                kind,
                str(self.state.name),
                graph_id,
                _details(details),
            )
        )

    def reject(self, kind: RejectionKind, message: str) -> None:
        self.effects.append(Rejected(self.job.job_id, self.now, self._sequence(), kind, message))

    # -- the rescale timeline ------------------------------------------------

    def update_rescale(self, change: Callable[[Rescale], Rescale]) -> None:
        """Change the rescale in progress, if any (RescaleTimeline.updateRescale)."""
        before = self.timeline.current
        if before is None:
            return
        after = change(before)
        if after != before:
            self.timeline = tl.with_current(self.timeline, after)
            self._touched[after.uuid] = after

    def open_rescale(self, new_epoch: bool, change: Callable[[Rescale], Rescale]) -> bool:
        """newRescale + updateRescale; False (nothing opened) unless the timeline is idling."""
        if not tl.is_idling(self.timeline):
            return False
        self.timeline = tl.new_rescale(self.timeline, self.job.job_id, new_epoch)
        current = self.timeline.current
        assert current is not None
        self._touched[current.uuid] = current
        self.update_rescale(change)
        return True

    def flush_rescales(self) -> None:
        """Emit one new revision of every rescale changed since the last flush."""
        if not self._touched:
            return
        for rescale in self._touched.values():
            revised = replace(rescale, revision=rescale.revision + 1)
            current = self.timeline.current
            if current is not None and current.uuid == rescale.uuid:
                # `current` is the rescale as last touched, so `revised` is it, revised
                kept = (
                    revised if current is rescale else replace(current, revision=revised.revision)
                )
                self.timeline = replace(self.timeline, current=kept)
            self.effects.append(
                RescaleUpdated(
                    self.job.job_id,
                    self.now,
                    self._sequence(),
                    revised.uuid,
                    revised.revision,
                    build_record(
                        self.job,
                        revised,
                        self.config,
                        state=self.state,
                        now=self.now,
                        slot_count=self.slot_count,
                    ),
                )
            )
        self._touched.clear()
