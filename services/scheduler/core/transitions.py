"""AdaptiveScheduler's state transitions (StateTransitions.To*), through one guarded door.

`transition_to` is Flink's `transitionToState`: it refuses transitions from a
constructor or `on_leave` and self-transitions, calls the old state's
`on_leave`, appends the old state's span to the rescale in progress, and
constructs the new state (`on_enter`). The `go_to_*` functions add what Flink's
goTo methods record in the rescale history on the way.
"""

from __future__ import annotations

from services.scheduler.core import history
from services.scheduler.core.behaviour import behaviour
from services.scheduler.core.enums import DecisionKind, JobStatus, StateName, TerminatedReason
from services.scheduler.core.fold import Fold
from services.scheduler.core.model import (
    STATE_JOB_STATUS,
    ExecutionGraph,
    SchedulerState,
    StateSpan,
)
from services.scheduler.core.restart import on_failure, strategy_string


def transition_to(fold: Fold, target: StateName, reason: str, **fields: object) -> None:
    fold.check_may_transition(target)
    old = fold.state
    fold.begin_construction()
    behaviour(old.name).on_leave(fold, target)
    fold.end_construction()
    fold.state = SchedulerState(target, fold.next_epoch(), fold.now, **fields)  # type: ignore[arg-type]
    fold.decide(
        DecisionKind.STATE_TRANSITION,
        f"{old.name} -> {target}: {reason}",
        job_status=fold.state.job_status or STATE_JOB_STATUS[target],
        source=old.name,
        target=target,
    )
    history.state_changed(
        fold, StateSpan(str(old.name), old.entered_at, fold.now), f"{target}: {reason}"
    )
    fold.begin_construction()
    behaviour(target).on_enter(fold)
    fold.end_construction()


def go_to_waiting_for_resources(
    fold: Fold,
    previous: ExecutionGraph | None,
    reason: str,
    awaiting: tuple[int, ...] | None = None,
) -> None:
    transition_to(
        fold,
        StateName.WAITING_FOR_RESOURCES,
        reason,
        previous_graph=previous,
        awaiting_parallelism=awaiting,
    )


def go_to_creating_execution_graph(
    fold: Fold, previous: ExecutionGraph | None, reason: str
) -> None:
    transition_to(fold, StateName.CREATING_EXECUTION_GRAPH, reason, previous_graph=previous)


def go_to_executing(fold: Fold, graph: ExecutionGraph, reason: str) -> None:
    transition_to(fold, StateName.EXECUTING, reason, graph=graph)


def go_to_stop_with_savepoint(fold: Fold, graph: ExecutionGraph) -> None:
    transition_to(fold, StateName.STOP_WITH_SAVEPOINT, "stop-with-savepoint requested", graph=graph)


def go_to_restarting(
    fold: Fold,
    graph: ExecutionGraph,
    backoff_ms: int,
    restart_with: tuple[int, ...] | None,
    cause: str | None,
) -> None:
    """goToRestarting: a rescale (with a parallelism) or a failover (without)."""
    if restart_with is not None:
        history.restarting_to_rescale(fold)
        reason = f"rescaling to {_describe(fold, restart_with)}"
    else:
        history.restarting_for_failover(fold)
        reason = f"failover after {cause}, backoff {backoff_ms} ms"
    fold.set(
        num_restarts=fold.job.num_restarts + 1,
        num_rescales=fold.job.num_rescales + (1 if cause is None else 0),
    )
    transition_to(
        fold,
        StateName.RESTARTING,
        reason,
        graph=graph,
        backoff_ms=backoff_ms,
        restart_with=restart_with,
        cause=cause,
    )


def go_to_canceling(fold: Fold, graph: ExecutionGraph, graph_terminal: bool = False) -> None:
    history.job_ending(fold, TerminatedReason.JOB_CANCELED)
    transition_to(
        fold, StateName.CANCELING, "cancel requested", graph=graph, graph_terminal=graph_terminal
    )


def go_to_failing(fold: Fold, graph: ExecutionGraph, cause: str, failure: str) -> None:
    """goToFailing: the current state's span carries the failure, stringified as Flink does."""
    history.job_ending(fold, TerminatedReason.JOB_FAILED, failure)
    transition_to(fold, StateName.FAILING, f"failing: {cause}", graph=graph, cause=cause)


def go_to_finished(fold: Fold, status: JobStatus, cause: str | None = None) -> None:
    """goToFinished: JOB_FINISHED, whatever the status; Flink's span carries no exception."""
    history.job_ending(fold, TerminatedReason.JOB_FINISHED)
    reason = f"job {status}" + (f": {cause}" if cause else "")
    transition_to(fold, StateName.FINISHED, reason, job_status=status, cause=cause)


def restart_or_fail(fold: Fold, graph: ExecutionGraph, cause: str, recoverable: bool) -> None:
    """FailureResultUtil.restartOrFail with the job's restart strategy."""
    if not recoverable:
        fold.decide(DecisionKind.RESTART_DECIDED, f"unrecoverable failure, failing: {cause}")
        go_to_failing(fold, graph, cause, job_exception("The failure is not recoverable", cause))
        return
    config = fold.config.restart
    restart, decision = on_failure(config, fold.job.restart, fold.now, fold.job.job_id)
    fold.set(restart=restart)
    if decision.can_restart:
        fold.decide(
            DecisionKind.RESTART_DECIDED, f"restarting: {decision.explanation}", cause=cause
        )
        go_to_restarting(fold, graph, decision.backoff_ms, None, cause)
    else:
        fold.decide(
            DecisionKind.RESTART_DECIDED, f"not restarting: {decision.explanation}", cause=cause
        )
        suppressed = f"Recovery is suppressed by {strategy_string(config, restart)}"
        go_to_failing(
            fold,
            graph,
            f"{cause} (no restart: {decision.explanation})",
            job_exception(suppressed, cause),
        )


def job_exception(message: str, cause: str) -> str:
    """ExceptionUtils.stringifyException of the JobException AdaptiveScheduler fails a job
    with (howToHandleFailure), without stack frames: its line, then the cause's."""
    return f"org.apache.flink.runtime.JobException: {message}\nCaused by: {cause}"


def _describe(fold: Fold, parallelism: tuple[int, ...]) -> str:
    return ", ".join(
        f"{v.id}={p}" for v, p in zip(fold.job.info.vertices, parallelism, strict=True)
    )
