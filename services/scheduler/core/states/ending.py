"""The states that end a job: Canceling, Failing, Finished."""

from __future__ import annotations

from typing import ClassVar

from services.contracts.events import JobEventKind, JobLifecycle
from services.contracts.jobconfig import RuntimeMode
from services.scheduler.core.behaviour import Behaviour, register
from services.scheduler.core.enums import DecisionKind, JobStatus, RequestKind, StateName
from services.scheduler.core.fold import Fold
from services.scheduler.core.states.running import graph_of
from services.scheduler.core.transitions import go_to_canceling, go_to_finished


class StoppingGraph(Behaviour):
    """Cancels the execution graph and finishes once it is terminal."""

    DONE = "stopping.graph-terminal"
    status: ClassVar[JobStatus]

    def on_enter(self, fold: Fold) -> None:
        if fold.state.graph_terminal:  # e.g. cancelled while Restarting had stopped it
            fold.run_if_state(self.DONE, 0)
            return
        fold.request(RequestKind.CANCEL_EXECUTION_GRAPH, graph_of(fold).id, reason=str(self.name))
        if fold.config.runtime is RuntimeMode.SIMULATED:
            fold.run_if_state(self.DONE, fold.config.simulated_cancel_ms)

    def on_graph_report(self, fold: Fold, event: JobLifecycle) -> None:
        if event.kind is JobEventKind.EXECUTION_GRAPH_CREATED:
            super().on_graph_report(fold, event)
        else:
            go_to_finished(fold, self.status, fold.state.cause)

    def on_report(self, fold: Fold, event: JobLifecycle) -> None:
        if event.kind is JobEventKind.FINISHED:
            go_to_finished(fold, self.status, fold.state.cause)
        else:
            super().on_report(fold, event)

    def on_timer(self, fold: Fold, action: str) -> None:
        if action == self.DONE:
            go_to_finished(fold, self.status, fold.state.cause)
        else:
            super().on_timer(fold, action)

    def suspend(self, fold: Fold) -> None:
        go_to_finished(fold, JobStatus.SUSPENDED)


class Canceling(StoppingGraph):
    name = StateName.CANCELING
    status = JobStatus.CANCELED


class Failing(StoppingGraph):
    name = StateName.FAILING
    status = JobStatus.FAILED

    def cancel(self, fold: Fold) -> None:
        go_to_canceling(fold, graph_of(fold), fold.state.graph_terminal)


class Finished(Behaviour):
    """The job has ended; `jobstore.expiration-time` after, its state is released (as
    Flink's JobManager purges a completed job from its store): the step's job is None,
    and the service deletes the job's state. A later input for it finds no job."""

    name = StateName.FINISHED
    RELEASE = "finished.release"

    def on_enter(self, fold: Fold) -> None:
        fold.run_if_state(self.RELEASE, fold.config.job_expiration_ms)

    def on_timer(self, fold: Fold, action: str) -> None:
        if action != self.RELEASE:
            super().on_timer(fold, action)
            return
        seconds = fold.config.job_expiration_ms // 1000
        fold.decide(
            DecisionKind.JOB_RELEASED,
            f"the job's state is released {seconds} s after it finished "
            "(jobstore.expiration-time); its rescales stay in the history",
        )
        fold.released = True

    def on_lifecycle(self, fold: Fold, event: JobLifecycle) -> None:
        fold.decide(DecisionKind.EVENT_IGNORED, f"{event.kind} ignored: the job has finished")


register(Canceling, Failing, Finished)
