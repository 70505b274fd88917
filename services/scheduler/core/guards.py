"""runIfState / runIfPhase: which of a job's timers can still run.

A timer carries the epoch of the state that set it (and of the phase, for a
transition manager's timer); it runs only while that state (and phase) is current.
Epochs only grow, so a timer that cannot run now never will.
"""

from __future__ import annotations

from collections.abc import Iterable

from services.scheduler.core.model import SchedulerState, Timer


def runs(state: SchedulerState, timer: Timer) -> bool:
    """Whether `timer` was set by `state` (and a phase timer by its current phase)."""
    if timer.state_epoch != state.epoch:
        return False
    if timer.phase_epoch is None:
        return True
    stm = state.stm
    return stm is not None and stm.epoch == timer.phase_epoch


def live(state: SchedulerState, timers: Iterable[Timer]) -> tuple[Timer, ...]:
    """The timers of `timers` that can still run under `state`, in their order."""
    return tuple([timer for timer in timers if runs(state, timer)])
