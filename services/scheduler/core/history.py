"""Where rescales are recorded: Flink's call sites of the rescale timeline (reference §5).

Each function is one call site, named after what happens to the job; the
comments give Flink's place. The order of the calls at each site is Flink's,
because it decides what is written: `Rescale.addSchedulerState` ignores a span
once the rescale is terminated, so where Flink sets the terminated reason
first (Idling in Executing, a failed graph creation) the record gets no span
for that state, and with it no exception.

Which spans carry an exception (Flink's `stringifiedException`): only the span
of the state the job failed from (`goToFailing`), with the JobException Flink
fails the job with. A failover, a failed graph creation and a job finishing
FAILED write none.
"""

from __future__ import annotations

from collections.abc import Callable

from services.scheduler.core import timeline as tl
from services.scheduler.core.enums import TerminatedReason, TriggerCause
from services.scheduler.core.fold import Fold
from services.scheduler.core.model import Assignment, PhaseSpan, Plan, Rescale, StateSpan
from services.scheduler.core.structs import replace


def _opened(
    fold: Fold, trigger: TriggerCause, start: int, with_pre: bool
) -> Callable[[Rescale], Rescale]:
    """The fields a newly opened rescale gets: cause, start, desired/minimal, pre values."""
    info = fold.job.info
    latest = fold.timeline.latest_completed

    def fill(rescale: Rescale) -> Rescale:
        rescale = tl.set_requirements(replace(rescale, trigger=trigger, start=start), info)
        return tl.set_pre_rescale(rescale, info, latest) if with_pre else rescale

    return fill


def current_span(fold: Fold, exception: str | None = None) -> StateSpan:
    """A span for the current state, left now (Durable with leave = now)."""
    return StateSpan(str(fold.state.name), fold.state.entered_at, fold.now, exception)


def open_initial(fold: Fold) -> None:
    """Created.startScheduling: INITIAL_SCHEDULE, starting when Created was entered."""
    fold.open_rescale(
        True, _opened(fold, TriggerCause.INITIAL_SCHEDULE, fold.state.entered_at, False)
    )


def open_new_resource_rescale(fold: Fold) -> None:
    """STM in Executing, first sufficient new-resource change: NEW_RESOURCE_AVAILABLE."""
    if fold.open_rescale(False, _opened(fold, TriggerCause.NEW_RESOURCE_AVAILABLE, fold.now, True)):
        track_phase(fold)


def end_without_change(fold: Fold) -> None:
    """Idling entered in Executing: NO_RESOURCES_OR_PARALLELISMS_CHANGE.

    Flink (Idling's constructor) terminates before it adds the Executing span, which
    the terminated rescale then ignores: the record ends without an Executing span.
    """
    fold.update_rescale(
        lambda r: tl.add_state_span(
            tl.terminate(r, TerminatedReason.NO_RESOURCES_OR_PARALLELISMS_CHANGE, fold.now),
            current_span(fold),
        )
    )


def requirements_changed(fold: Fold) -> None:
    """updateJobResourceRequirements (a real change): end the current rescale, open a new one."""
    fold.update_rescale(
        lambda r: tl.terminate(
            tl.add_state_span(r, current_span(fold)),
            TerminatedReason.RESOURCE_REQUIREMENTS_UPDATED,
            fold.now,
        )
    )
    if fold.open_rescale(True, _opened(fold, TriggerCause.UPDATE_REQUIREMENT, fold.now, True)):
        track_phase(fold)


def restarting_to_rescale(fold: Fold) -> None:
    """goToRestarting with a parallelism: refresh the desired and minimal values."""
    fold.update_rescale(lambda r: tl.set_requirements(r, fold.job.info))


def restarting_for_failover(fold: Fold) -> None:
    """goToRestarting for a failure: merge into the rescale in progress, or open one.

    Flink records no exception for a failover (recordRescaleForJobRestarting): the
    failure shows in the decisions and the statusMessage, not in a span.
    """
    if fold.timeline.current is not None:
        fold.update_rescale(lambda r: replace(r, spans=(), phases=()))
    else:
        fold.open_rescale(False, lambda r: r)
    fold.update_rescale(_opened(fold, TriggerCause.RECOVERABLE_FAILOVER, fold.now, True))


def graph_created(fold: Fold, plan: Plan, assignment: Assignment) -> None:
    """CreatingExecutionGraph succeeded: post-rescale parallelism and slots."""
    pool = {slot.id: slot for slot in fold.slots}
    fold.update_rescale(lambda r: tl.set_post_rescale(r, fold.job.info, plan, assignment, pool))


def creation_failed(fold: Fold, exception: str) -> None:
    """CreatingExecutionGraph failed: EXCEPTION_OCCURRED (recordRescaleForException).

    Flink terminates before it adds the CreatingExecutionGraph span with the exception,
    so neither reaches the record; the exception ends the job (its final decision).
    """
    fold.update_rescale(
        lambda r: tl.add_state_span(
            tl.terminate(r, TerminatedReason.EXCEPTION_OCCURRED, fold.now),
            current_span(fold, exception),
        )
    )


def executing_entered(fold: Fold) -> None:
    """Executing's constructor: the Executing span, and SUCCEEDED."""
    fold.update_rescale(
        lambda r: tl.terminate(
            tl.add_state_span(r, current_span(fold)), TerminatedReason.SUCCEEDED, fold.now
        )
    )


def job_ending(fold: Fold, reason: TerminatedReason, exception: str | None = None) -> None:
    """goToFailing (JOB_FAILED, with the exception), goToCanceling (JOB_CANCELED),
    goToFinished (JOB_FINISHED): the current state's span, then the reason."""
    fold.update_rescale(
        lambda r: tl.terminate(
            tl.add_state_span(r, current_span(fold, exception)), reason, fold.now
        )
    )


def state_changed(fold: Fold, left: StateSpan, status: str) -> None:
    """transitionToState: the left state's span, after its open transition phase ends, and
    (scalefold) the statusMessage, the latest explanation; one update of the rescale."""
    fold.update_rescale(
        lambda r: replace(tl.add_state_span(tl.close_phases(r, fold.now), left), status=status)
    )


def track_phase(fold: Fold) -> None:
    """Keep the in-progress rescale's transitionPhases in step with the current phase."""
    stm = fold.state.stm
    if stm is None:
        return
    state = str(fold.state.name)

    def follow(rescale: Rescale) -> Rescale:
        last = rescale.phases[-1] if rescale.phases else None
        if (
            last is not None
            and last.leave is None
            and last.phase == stm.phase
            and last.state == state
        ):
            return rescale
        closed = tl.close_phases(rescale, fold.now)
        return replace(closed, phases=(*closed.phases, PhaseSpan(str(stm.phase), state, fold.now)))

    fold.update_rescale(follow)
