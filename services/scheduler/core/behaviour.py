"""What every scheduler state can be asked, and the default answer: ignore it, and say so.

Flink routes events with `state.tryRun(Interface, ...)`: a state that does not
implement the interface ignores the event. Here every state is a `Behaviour`;
the base class ignores everything with an EVENT_IGNORED decision, and each
state overrides what it reacts to.
"""

from __future__ import annotations

from typing import ClassVar, Final

from mypy_extensions import mypyc_attr

from services.contracts.events import JobEventKind, JobLifecycle
from services.contracts.jobconfig import RuntimeMode
from services.scheduler.core.enums import DecisionKind, StateName
from services.scheduler.core.fold import Fold
from services.scheduler.core.model import InvariantError

REGISTRY: Final[dict[StateName, Behaviour]] = {}


def behaviour(name: StateName) -> Behaviour:
    return REGISTRY[name]


def register(*classes: type[Behaviour]) -> None:
    """Make one instance of each class the behaviour of the state it names."""
    for cls in classes:
        instance = cls()
        REGISTRY[instance.name] = instance


# Compiled by mypyc (services/scheduler/core/native.py), a class is a C type; the tests
# define their own states, so interpreted subclasses stay allowed.
@mypyc_attr(allow_interpreted_subclasses=True)
class Behaviour:
    """A scheduler state's reactions; state data lives in `fold.state`."""

    name: ClassVar[StateName]
    records_new_resources = False  # only Executing opens NEW_RESOURCE_AVAILABLE rescales

    def on_enter(self, fold: Fold) -> None:
        """The state's constructor: may schedule, request and record, never transition."""

    def on_leave(self, fold: Fold, target: StateName) -> None:
        """Called before the state is left; may not transition either."""

    def on_new_resources(self, fold: Fold) -> None:
        """ResourceListener.onNewResourcesAvailable; only WaitingForResources and Executing."""

    def on_new_requirements(self, fold: Fold) -> None:
        """ResourceListener.onNewResourceRequirements; only WaitingForResources and Executing."""

    def on_failure(self, fold: Fold, cause: str, recoverable: bool, is_global: bool) -> None:
        """A task or global failure (a lost TaskManager's slots in use count as a task failure)."""
        fold.decide(DecisionKind.EVENT_IGNORED, f"failure ignored in {self.name}: {cause}")

    def on_timer(self, fold: Fold, action: str) -> None:
        raise InvariantError(f"{self.name} has no timer action {action}")

    def on_lifecycle(self, fold: Fold, event: JobLifecycle) -> None:
        """Dispatch a job lifecycle event to the state's hooks."""
        kind = event.kind
        if kind in FAILURES:
            cause = event.exception or kind.value.lower().replace("_", " ")
            self.on_failure(fold, cause, event.recoverable, kind is JobEventKind.GLOBAL_FAILURE)
        elif kind is JobEventKind.CANCEL:
            self.cancel(fold)
        elif kind is JobEventKind.SUSPEND:
            self.suspend(fold)
        elif kind in GRAPH_REPORTS:
            if reports_on_graph(fold, event):
                self.on_graph_report(fold, event)
        else:
            self.on_report(fold, event)

    def cancel(self, fold: Fold) -> None:
        fold.decide(DecisionKind.EVENT_IGNORED, f"cancel ignored in {self.name}")

    def suspend(self, fold: Fold) -> None:
        fold.decide(DecisionKind.EVENT_IGNORED, f"suspend ignored in {self.name}")

    def on_report(self, fold: Fold, event: JobLifecycle) -> None:
        """Checkpoints, savepoints and the job finishing."""
        fold.decide(DecisionKind.EVENT_IGNORED, f"{event.kind} ignored in {self.name}")

    def on_graph_report(self, fold: Fold, event: JobLifecycle) -> None:
        """The external runtime's report about the current execution graph."""
        fold.decide(DecisionKind.EVENT_IGNORED, f"{event.kind} ignored in {self.name}")


FAILURES: Final = (JobEventKind.TASK_FAILURE, JobEventKind.GLOBAL_FAILURE)
GRAPH_REPORTS: Final = (
    JobEventKind.EXECUTION_GRAPH_CREATED,
    JobEventKind.EXECUTION_GRAPH_CANCELLED,
    JobEventKind.EXECUTION_GRAPH_FAILED,
)


def reports_on_graph(fold: Fold, event: JobLifecycle) -> bool:
    """Whether a runtime report applies: external runtime, and about the current graph."""
    if fold.config.runtime is RuntimeMode.SIMULATED:
        fold.decide(DecisionKind.EVENT_IGNORED, f"{event.kind} ignored: the runtime is simulated")
        return False
    graph = fold.state.graph
    reported = event.execution_graph_id
    if reported is not None and (graph is None or graph.id != reported):
        current = graph.id if graph else "none"
        fold.decide(
            DecisionKind.EVENT_IGNORED,
            f"{event.kind} is about {reported}, the current graph is {current}",
        )
        return False
    return True
