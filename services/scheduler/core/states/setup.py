"""The states before a job runs: Created, WaitingForResources, CreatingExecutionGraph.

All three are StateWithoutExecutionGraph: cancel and suspend finish the job at
once (and the rescale in progress ends JOB_FINISHED, not JOB_CANCELED, as in
Flink), a global failure fails it, and task failures have nothing to fail.
"""

from __future__ import annotations

from typing import Final

from services.contracts.events import JobEventKind, JobLifecycle
from services.contracts.jobconfig import RESCALE_STABILIZATION, RuntimeMode
from services.contracts.ordering import natural_key
from services.scheduler.core import history, stm
from services.scheduler.core.allocator import assign, plan_for, slot_ids
from services.scheduler.core.behaviour import Behaviour, register
from services.scheduler.core.enums import DecisionKind, JobStatus, RequestKind, StateName
from services.scheduler.core.fold import Fold
from services.scheduler.core.model import ExecutionGraph
from services.scheduler.core.resources import (
    awaiting_assessment,
    candidate,
    describe,
    waiting_assessment,
)
from services.scheduler.core.stm import Assessment
from services.scheduler.core.transitions import (
    go_to_creating_execution_graph,
    go_to_executing,
    go_to_finished,
    go_to_waiting_for_resources,
)

NO_RESOURCES: Final = (
    "org.apache.flink.runtime.jobmanager.scheduler.NoResourceAvailableException: "
    "Not enough resources available for scheduling."
)


class WithoutGraph(Behaviour):
    def cancel(self, fold: Fold) -> None:
        go_to_finished(fold, JobStatus.CANCELED)

    def suspend(self, fold: Fold) -> None:
        go_to_finished(fold, JobStatus.SUSPENDED)

    def on_failure(self, fold: Fold, cause: str, recoverable: bool, is_global: bool) -> None:
        if is_global:
            go_to_finished(fold, JobStatus.FAILED, cause)
        else:
            super().on_failure(fold, cause, recoverable, is_global)


class Created(WithoutGraph):
    name = StateName.CREATED


class WaitingForResources(WithoutGraph):
    name = StateName.WAITING_FOR_RESOURCES
    RESOURCE_TIMEOUT = "waiting.resource-timeout"
    RESCALE_TIMEOUT = "waiting.rescale-timeout"
    CHECK = "waiting.check"

    def on_enter(self, fold: Fold) -> None:
        config = fold.config
        # The STM of WaitingForResources: no cooldown, no max trigger delay.
        stm.create(fold, 0, config.submission_stabilization_ms, 0)
        if config.wait_timeout_ms >= 0:
            fold.run_if_state(self.RESOURCE_TIMEOUT, config.wait_timeout_ms)
        if fold.state.awaiting_parallelism is not None:
            fold.run_if_state(self.RESCALE_TIMEOUT, config.rescale_stabilization_ms or 0)
        fold.run_if_state(self.CHECK, 0)

    def on_new_resources(self, fold: Fold) -> None:
        self._check(fold)

    def on_new_requirements(self, fold: Fold) -> None:
        self._check(fold)

    def _check(self, fold: Fold) -> None:
        stm.on_change(fold, self, False)
        stm.on_trigger(fold, self)

    def on_timer(self, fold: Fold, action: str) -> None:
        if action == self.RESOURCE_TIMEOUT:
            # Regardless of sufficiency: CreatingExecutionGraph fails the job if it must.
            go_to_creating_execution_graph(
                fold, fold.state.previous_graph, "resource wait timeout, using what is available"
            )
        elif action == self.CHECK:
            self._check(fold)
        elif action == self.RESCALE_TIMEOUT:
            awaited = describe(fold.job.info, fold.state.awaiting_parallelism or ())
            fold.set_state(awaiting_parallelism=None)
            fold.decide(
                DecisionKind.TIMEOUT,
                f"{RESCALE_STABILIZATION} passed without {awaited}: going on with what suffices",
            )
            self._check(fold)
        else:
            stm.on_timer(fold, self, action)

    def assess(self, fold: Fold) -> Assessment:
        awaited = fold.state.awaiting_parallelism
        if awaited is None:
            return waiting_assessment(fold)
        return awaiting_assessment(fold, awaited)

    def transition_to_subsequent_state(self, fold: Fold) -> None:
        go_to_creating_execution_graph(fold, fold.state.previous_graph, "resources are ready")

    def request_active_checkpoint(self, fold: Fold) -> None:
        """Nothing runs, so there is nothing to checkpoint."""


class CreatingExecutionGraph(WithoutGraph):
    name = StateName.CREATING_EXECUTION_GRAPH
    CREATED = "creating.created"
    FAILED = "creating.failed"

    def on_enter(self, fold: Fold) -> None:
        previous = fold.state.previous_graph
        target = candidate(fold, previous.parallelism if previous else None)
        if target is None:
            fold.run_if_state(self.FAILED, 0)  # creation completes exceptionally
            return
        plan = plan_for(fold.job.info, target)
        assignment = assign(plan, fold.slots, fold.config.prefer_minimal_taskmanagers)
        assert assignment is not None  # the plan came from the same slots
        first = fold.job.graphs == 0
        graph = ExecutionGraph(f"eg-{fold.job.graphs + 1}", target, assignment)
        fold.set(graphs=fold.job.graphs + 1)
        fold.set_state(graph=graph)
        fold.request(
            RequestKind.CREATE_EXECUTION_GRAPH,
            graph.id,
            parallelism=describe(fold.job.info, target),
            slots=" ".join(sorted(slot_ids(assignment), key=natural_key)),
        )
        if fold.config.runtime is RuntimeMode.SIMULATED:
            config = fold.config
            delay = config.simulated_first_create_ms if first else config.simulated_create_ms
            fold.run_if_state(self.CREATED, delay)

    def on_timer(self, fold: Fold, action: str) -> None:
        if action == self.CREATED:
            self._created(fold)
        elif action == self.FAILED:
            self._failed(fold, NO_RESOURCES)
        else:
            super().on_timer(fold, action)

    def on_graph_report(self, fold: Fold, event: JobLifecycle) -> None:
        if event.kind is JobEventKind.EXECUTION_GRAPH_CREATED:
            self._created(fold)
        elif event.kind is JobEventKind.EXECUTION_GRAPH_FAILED:
            self._failed(fold, event.exception or "execution graph creation failed")
        else:
            super().on_graph_report(fold, event)

    def _created(self, fold: Fold) -> None:
        graph = fold.state.graph
        if graph is None:
            self._failed(fold, NO_RESOURCES)
            return
        pool = {slot.id for slot in fold.slots}
        if not slot_ids(graph.assignment) <= pool:  # tryReserveResources failed
            go_to_waiting_for_resources(
                fold,
                fold.state.previous_graph,
                "slots were lost while creating the execution graph",
            )
            return
        history.graph_created(fold, plan_for(fold.job.info, graph.parallelism), graph.assignment)
        go_to_executing(fold, graph, f"running with {describe(fold.job.info, graph.parallelism)}")

    def _failed(self, fold: Fold, exception: str) -> None:
        history.creation_failed(fold, exception)
        go_to_finished(fold, JobStatus.FAILED, exception)


register(Created, WaitingForResources, CreatingExecutionGraph)
