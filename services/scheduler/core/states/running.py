"""The states with a running execution graph: Executing, StopWithSavepoint, Restarting."""

from __future__ import annotations

from services.contracts.events import JobEventKind, JobLifecycle
from services.contracts.jobconfig import RuntimeMode, StabilizationPlacement
from services.scheduler.core import history, stm
from services.scheduler.core.allocator import desired_slots
from services.scheduler.core.behaviour import Behaviour, register
from services.scheduler.core.effects import DecisionKind, RequestKind
from services.scheduler.core.fold import Fold, InvariantError
from services.scheduler.core.model import ExecutionGraph, JobStatus, StateName
from services.scheduler.core.resources import candidate, describe, executing_assessment
from services.scheduler.core.stm import Assessment
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
from services.scheduler.core.values import evolve


def graph_of(fold: Fold) -> ExecutionGraph:
    graph = fold.state.graph
    if graph is None:
        raise InvariantError(f"{fold.state.name} has no execution graph")
    return graph


class WithGraph(Behaviour):
    """StateWithExecutionGraph: suspend finishes the job; cancel cancels the graph."""

    def on_graph_report(self, fold: Fold, event: JobLifecycle) -> None:
        if event.kind is JobEventKind.EXECUTION_GRAPH_FAILED:  # the graph failed globally
            cause = event.exception or "execution graph failed"
            self.on_failure(fold, cause, event.recoverable, True)
        else:
            super().on_graph_report(fold, event)

    def cancel(self, fold: Fold) -> None:
        go_to_canceling(fold, graph_of(fold), fold.state.graph_terminal)

    def suspend(self, fold: Fold) -> None:
        go_to_finished(fold, JobStatus.SUSPENDED)


@register
class Executing(WithGraph):
    name = StateName.EXECUTING
    records_new_resources = True
    CHECK = "executing.check"

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
        else:
            stm.on_timer(fold, self, action)

    def on_report(self, fold: Fold, event: JobLifecycle) -> None:
        kind = event.kind
        if kind is JobEventKind.CHECKPOINT_COMPLETED:
            self._checkpoint_done(fold)
            fold.set_state(checkpoint_countdown=None)
            stm.on_trigger(fold, self)
        elif kind is JobEventKind.CHECKPOINT_FAILED:
            self._checkpoint_done(fold)
            self._checkpoint_failed(fold)
        elif kind is JobEventKind.SAVEPOINT_REQUESTED:
            go_to_stop_with_savepoint(fold, graph_of(fold))
        elif kind is JobEventKind.FINISHED:
            go_to_finished(fold, JobStatus.FINISHED)
        else:
            super().on_report(fold, event)

    def _checkpoint_done(self, fold: Fold) -> None:
        stm_ = fold.state.stm
        if stm_ is not None and stm_.checkpoint_requested:
            fold.set_state(stm=evolve(stm_, checkpoint_requested=False))

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
        """FLINK-36753: ask for a checkpoint now rather than waiting for the next one."""
        stm_ = fold.state.stm
        config = fold.config
        if not config.active_checkpoint or not fold.job.checkpoint_interval_ms or stm_ is None:
            return
        if stm_.checkpoint_requested:
            return
        fold.set_state(stm=evolve(stm_, checkpoint_requested=True))
        fold.request(RequestKind.TRIGGER_CHECKPOINT, graph_of(fold).id, reason="rescale evaluation")


@register
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


@register
class Restarting(WithGraph):
    name = StateName.RESTARTING
    CANCELLED = "restarting.cancelled"
    GO = "restarting.go"

    def on_enter(self, fold: Fold) -> None:
        fold.request(RequestKind.CANCEL_EXECUTION_GRAPH, graph_of(fold).id, reason="restart")
        if fold.config.runtime is RuntimeMode.SIMULATED:
            fold.run_if_state(self.CANCELLED, fold.config.simulated_cancel_ms)

    def on_graph_report(self, fold: Fold, event: JobLifecycle) -> None:
        if event.kind is JobEventKind.EXECUTION_GRAPH_CREATED:
            super().on_graph_report(fold, event)
        else:  # cancelled, or failed while cancelling: either way the graph stopped
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
        if ready or fold.job.slot_count() >= desired_slots(fold.job.info):
            go_to_creating_execution_graph(fold, graph, "restarted with the resources it needs")
        else:
            go_to_waiting_for_resources(fold, graph, "restarted; waiting for resources")
