"""The states with a running execution graph: Executing, StopWithSavepoint, Restarting."""

from __future__ import annotations

from typing import Final

from services.contracts.events import JobEventKind, JobLifecycle
from services.contracts.jobconfig import MIN_PAUSE, RuntimeMode, StabilizationPlacement
from services.scheduler.core import history, stm
from services.scheduler.core.allocator import desired_slots
from services.scheduler.core.behaviour import Behaviour, register
from services.scheduler.core.enums import DecisionKind, JobStatus, RequestKind, StateName
from services.scheduler.core.fold import Fold
from services.scheduler.core.model import ExecutionGraph, InvariantError
from services.scheduler.core.resources import candidate, describe, executing_assessment
from services.scheduler.core.stm import Assessment
from services.scheduler.core.structs import replace
from services.scheduler.core.transitions import (
    go_to_canceling,
    go_to_creating_execution_graph,
    go_to_finished,
    go_to_restarting,
    go_to_stop_with_savepoint,
    go_to_waiting_for_resources,
    restart_or_fail,
    transition_to,
)

SAVEPOINT_NOT_FINISHED: Final = (
    "org.apache.flink.util.FlinkException: "
    "Job did not reach the FINISHED state while performing stop-with-savepoint."
)


def graph_of(fold: Fold) -> ExecutionGraph:
    graph = fold.state.graph
    if graph is None:
        raise InvariantError(f"{fold.state.name} has no execution graph")
    return graph


class WithGraph(Behaviour):
    """StateWithExecutionGraph: suspend finishes the job; cancel cancels the graph."""

    def on_graph_report(self, fold: Fold, event: JobLifecycle) -> None:
        if event.kind is JobEventKind.EXECUTION_GRAPH_CREATED:
            super().on_graph_report(fold, event)
        else:  # the graph reached a globally terminal state by itself
            self.on_globally_terminal(fold, event)

    def on_globally_terminal(self, fold: Fold, event: JobLifecycle) -> None:
        """StateWithExecutionGraph.onGloballyTerminalState (FAILED or CANCELED reported)."""
        raise NotImplementedError

    def cancel(self, fold: Fold) -> None:
        go_to_canceling(fold, graph_of(fold), fold.state.graph_terminal)

    def suspend(self, fold: Fold) -> None:
        go_to_finished(fold, JobStatus.SUSPENDED)


class Executing(WithGraph):
    name = StateName.EXECUTING
    records_new_resources = True
    CHECK = "executing.check"
    ACTIVE_CHECKPOINT = "executing.active-checkpoint"

    def on_enter(self, fold: Fold) -> None:
        graph = graph_of(fold)
        fold.request(
            RequestKind.DEPLOY, graph.id, parallelism=describe(fold.job.info, graph.parallelism)
        )
        if not fold.state.resumed:
            history.executing_entered(fold)
        config = fold.config
        stabilization = (
            config.executing_stabilization_ms
            if config.stabilization is StabilizationPlacement.EXECUTING
            else 0
        )
        max_delay = config.max_trigger_delay(fold.job.checkpoint_interval_ms)
        stm.create(fold, config.cooldown_ms, stabilization, max_delay)
        fold.run_if_state(self.CHECK, 0)

    def on_new_resources(self, fold: Fold) -> None:
        stm.on_change(fold, self, True)
        self._arm_countdown(fold)

    def on_new_requirements(self, fold: Fold) -> None:
        stm.on_change(fold, self, False)
        self._arm_countdown(fold)

    def _arm_countdown(self, fold: Fold) -> None:
        if fold.state.name is self.name and fold.state.checkpoint_countdown is None:
            fold.set_state(checkpoint_countdown=fold.config.max_checkpoint_failures)

    def on_timer(self, fold: Fold, action: str) -> None:
        if action == self.CHECK:
            stm.on_change(fold, self, True)
            stm.on_trigger(fold, self)
        elif action == self.ACTIVE_CHECKPOINT:
            self._fire_active_checkpoint(fold)
        else:
            stm.on_timer(fold, self, action)

    def on_report(self, fold: Fold, event: JobLifecycle) -> None:
        kind = event.kind
        if kind is JobEventKind.CHECKPOINT_COMPLETED:
            checkpoint_ended(fold, completed=True, checkpoint_countdown=None)
            stm.on_trigger(fold, self)
        elif kind is JobEventKind.CHECKPOINT_FAILED:
            checkpoint_ended(fold, completed=False)
            self._checkpoint_failed(fold)
        elif kind is JobEventKind.SAVEPOINT_REQUESTED:
            go_to_stop_with_savepoint(fold, graph_of(fold))
        elif kind is JobEventKind.FINISHED:
            go_to_finished(fold, JobStatus.FINISHED)
        else:
            super().on_report(fold, event)

    def on_globally_terminal(self, fold: Fold, event: JobLifecycle) -> None:
        """Executing.onGloballyTerminalState: Finished with the graph's status, no restart."""
        if event.kind is JobEventKind.EXECUTION_GRAPH_FAILED:
            go_to_finished(fold, JobStatus.FAILED, event.exception or "execution graph failed")
        else:
            go_to_finished(fold, JobStatus.CANCELED, "execution graph cancelled")

    def _checkpoint_failed(self, fold: Fold) -> None:
        countdown = fold.state.checkpoint_countdown
        if countdown is None:
            fold.decide(
                DecisionKind.TRIGGER_IGNORED, "failed checkpoint before any change: ignored"
            )
            return
        if countdown - 1 > 0:
            fold.set_state(checkpoint_countdown=countdown - 1)
            fold.decide(
                DecisionKind.TRIGGER_IGNORED, f"failed checkpoint; {countdown - 1} more trigger"
            )
            return
        fold.set_state(checkpoint_countdown=None)
        stm.on_trigger(fold, self)

    def on_failure(self, fold: Fold, cause: str, recoverable: bool, is_global: bool) -> None:
        restart_or_fail(fold, graph_of(fold), cause, recoverable)

    def assess(self, fold: Fold) -> Assessment:
        return executing_assessment(fold, graph_of(fold).parallelism)

    def transition_to_subsequent_state(self, fold: Fold) -> None:
        graph = graph_of(fold)
        target = candidate(fold, graph.parallelism)
        if target is None:
            raise InvariantError("Resources must be available when rescaling.")
        go_to_restarting(fold, graph, 0, target, None)

    def request_active_checkpoint(self, fold: Fold) -> None:
        """Executing.requestActiveCheckpointTrigger (FLINK-36753): rather than wait for the
        next periodic checkpoint, schedule one trigger after what is left of the min pause.

        Skipped when disabled, without periodic checkpointing, or while a checkpoint is
        pending; requests while one trigger is scheduled are de-duplicated. Whether the
        parallelism still changes is judged when the trigger fires, not here.
        """
        if not fold.config.active_checkpoint or fold.job.checkpoint_interval_ms is None:
            return
        graph = graph_of(fold)
        if graph.checkpoint_pending:
            fold.decide(
                DecisionKind.ACTIVE_CHECKPOINT, "not requested: a triggered checkpoint is pending"
            )
            return
        if fold.state.checkpoint_trigger_scheduled:
            fold.decide(DecisionKind.ACTIVE_CHECKPOINT, "already scheduled: not requested again")
            return
        fold.set_state(checkpoint_trigger_scheduled=True)
        delay = _min_pause_left(fold, graph)
        if delay > 0:
            fold.decide(
                DecisionKind.ACTIVE_CHECKPOINT,
                f"deferred until {fold.now + delay}: {MIN_PAUSE} of {fold.config.min_pause_ms} ms "
                f"since the checkpoint completed at {graph.last_checkpoint_at}",
            )
        fold.run_if_state(self.ACTIVE_CHECKPOINT, delay)

    def _fire_active_checkpoint(self, fold: Fold) -> None:
        """Executing.tryFireActiveCheckpointAfterRetry: fire only if it can still rescale."""
        fold.set_state(checkpoint_trigger_scheduled=False)
        graph = graph_of(fold)
        target = candidate(fold, graph.parallelism)
        if target is None or target == graph.parallelism:
            running = describe(fold.job.info, graph.parallelism)
            fold.decide(
                DecisionKind.ACTIVE_CHECKPOINT,
                f"dropped: the parallelism no longer changes from {running}",
            )
            return
        # Nothing but this trigger marks a checkpoint pending, and it was de-duplicated, so
        # only a checkpoint completed meanwhile (a new min pause) can stop it now.
        if _min_pause_left(fold, graph) > 0:
            fold.decide(
                DecisionKind.ACTIVE_CHECKPOINT,
                f"dropped: a checkpoint completed at {graph.last_checkpoint_at} while it waited",
            )
            return
        fold.set_state(graph=replace(graph, checkpoint_pending=True))
        fold.request(RequestKind.TRIGGER_CHECKPOINT, graph.id, reason="rescale evaluation")


def checkpoint_ended(fold: Fold, completed: bool, **state_changes: object) -> None:
    """What the graph's CheckpointCoordinator learns, whatever the state: nothing is pending
    any more (it runs one checkpoint at a time), and a completion starts the min pause.
    `state_changes` go into the same copy of the state (one copy per checkpoint event)."""
    graph = graph_of(fold)
    last = fold.now if completed else graph.last_checkpoint_at
    graph = replace(graph, checkpoint_pending=False, last_checkpoint_at=last)
    fold.set_state(graph=graph, **state_changes)


def _min_pause_left(fold: Fold, graph: ExecutionGraph) -> int:
    """CheckpointCoordinator.getActiveCheckpointTriggerDelay, for a graph with nothing pending."""
    if graph.last_checkpoint_at is None:
        return 0
    return max(0, fold.config.min_pause_ms - (fold.now - graph.last_checkpoint_at))


class StopWithSavepoint(WithGraph):
    name = StateName.STOP_WITH_SAVEPOINT
    GRAPH_FINISHED = "savepoint.graph-finished"

    def on_enter(self, fold: Fold) -> None:
        fold.request(RequestKind.STOP_WITH_SAVEPOINT, graph_of(fold).id)

    def on_report(self, fold: Fold, event: JobLifecycle) -> None:
        kind = event.kind
        if kind is JobEventKind.SAVEPOINT_COMPLETED:
            fold.set_state(savepoint_completed=True)
            fold.decide(
                DecisionKind.EVENT_IGNORED, f"savepoint completed at {event.savepoint_path}"
            )
            if fold.config.runtime is RuntimeMode.SIMULATED:
                fold.run_if_state(self.GRAPH_FINISHED, 0)
        elif kind is JobEventKind.FINISHED:
            go_to_finished(fold, JobStatus.FINISHED)
        elif kind in (JobEventKind.CHECKPOINT_COMPLETED, JobEventKind.CHECKPOINT_FAILED):
            checkpoint_ended(fold, kind is JobEventKind.CHECKPOINT_COMPLETED)
            super().on_report(fold, event)  # no rescale trigger outside Executing
        elif kind is JobEventKind.SAVEPOINT_FAILED:
            # A new Executing: the cooldown starts again; no rescale is recorded.
            transition_to(
                fold,
                StateName.EXECUTING,
                f"stop-with-savepoint failed: {event.exception or 'savepoint failed'}",
                graph=graph_of(fold),
                resumed=True,
            )
        else:
            super().on_report(fold, event)

    def on_timer(self, fold: Fold, action: str) -> None:
        if action == self.GRAPH_FINISHED:
            go_to_finished(fold, JobStatus.FINISHED)
        else:
            super().on_timer(fold, action)

    def on_failure(self, fold: Fold, cause: str, recoverable: bool, is_global: bool) -> None:
        # Flink waits for the savepoint's outcome first; here the failure wins at once.
        restart_or_fail(fold, graph_of(fold), cause, recoverable)

    def on_globally_terminal(self, fold: Fold, event: JobLifecycle) -> None:
        """StopWithSavepoint.onGloballyTerminalState, not FINISHED: a global failure."""
        self.on_failure(fold, SAVEPOINT_NOT_FINISHED, True, True)


class Restarting(WithGraph):
    name = StateName.RESTARTING
    CANCELLED = "restarting.cancelled"
    GO = "restarting.go"

    def on_enter(self, fold: Fold) -> None:
        fold.request(RequestKind.CANCEL_EXECUTION_GRAPH, graph_of(fold).id, reason="restart")
        if fold.config.runtime is RuntimeMode.SIMULATED:
            fold.run_if_state(self.CANCELLED, fold.config.simulated_cancel_ms)

    def on_globally_terminal(self, fold: Fold, event: JobLifecycle) -> None:
        # Cancelled, or failed while cancelling: either way the graph stopped.
        self._graph_cancelled(fold)

    def on_timer(self, fold: Fold, action: str) -> None:
        if action == self.CANCELLED:
            self._graph_cancelled(fold)
        elif action == self.GO:
            self._go(fold)
        else:
            super().on_timer(fold, action)

    def _graph_cancelled(self, fold: Fold) -> None:
        fold.set_state(graph_terminal=True)
        fold.run_if_state(self.GO, fold.state.backoff_ms)

    def _go(self, fold: Fold) -> None:
        graph = graph_of(fold)
        if fold.config.stabilization is StabilizationPlacement.WAITING_FOR_RESOURCES:
            go_to_waiting_for_resources(
                fold, graph, "restarted; stabilizing in WaitingForResources"
            )
            return
        restart_with = fold.state.restart_with
        ready = restart_with is not None and candidate(fold, graph.parallelism) == restart_with
        if ready or fold.slot_count >= desired_slots(fold.job.info):
            go_to_creating_execution_graph(fold, graph, "restarted with the resources it needs")
        elif restart_with is not None and fold.config.rescale_stabilization_ms is not None:
            # FLINK-40379 (open upstream), behind its proposed key: wait for the parallelism
            # the rescale was for, rather than run on less and rescale again.
            go_to_waiting_for_resources(
                fold,
                graph,
                f"restarted; waiting for {describe(fold.job.info, restart_with)} to be available",
                awaiting=restart_with,
            )
        else:
            go_to_waiting_for_resources(fold, graph, "restarted; waiting for resources")


register(Executing, StopWithSavepoint, Restarting)
