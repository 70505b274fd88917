"""One job's scheduler state: everything the fold needs, immutable and serializable."""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache
from itertools import chain

import msgspec

from services.contracts.events import Profile
from services.scheduler.core.allocator import Assignment, Slot
from services.scheduler.core.jobgraph import JobInformation
from services.scheduler.core.restart import RestartState
from services.scheduler.core.timeline import Timeline


class InvariantError(AssertionError):
    """The scheduler broke one of its own rules: a bug, never bad input."""


class StateName(StrEnum):
    """Flink's scheduler states, by class name."""

    CREATED = "Created"
    WAITING_FOR_RESOURCES = "WaitingForResources"
    CREATING_EXECUTION_GRAPH = "CreatingExecutionGraph"
    EXECUTING = "Executing"
    RESTARTING = "Restarting"
    STOP_WITH_SAVEPOINT = "StopWithSavepoint"
    CANCELING = "Canceling"
    FAILING = "Failing"
    FINISHED = "Finished"


class Phase(StrEnum):
    """The phases of DefaultStateTransitionManager (FLIP-461)."""

    COOLDOWN = "Cooldown"
    IDLING = "Idling"
    STABILIZING = "Stabilizing"
    STABILIZED = "Stabilized"
    TRANSITIONING = "Transitioning"


class JobStatus(StrEnum):
    """Flink's JobStatus, in Flink's order; a job ends FINISHED, FAILED, CANCELED or SUSPENDED."""

    INITIALIZING = "INITIALIZING"
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    RESTARTING = "RESTARTING"
    SUSPENDED = "SUSPENDED"
    RECONCILING = "RECONCILING"

    @property
    def ends_the_job(self) -> bool:
        """Globally terminal (FINISHED, FAILED, CANCELED) or locally terminal (SUSPENDED)."""
        return self in _TERMINAL


_TERMINAL = frozenset(
    {JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED, JobStatus.SUSPENDED}
)

# State.getJobStatus() of every state but Finished, whose status is the job's final one.
STATE_JOB_STATUS = {
    StateName.CREATED: JobStatus.INITIALIZING,
    StateName.WAITING_FOR_RESOURCES: JobStatus.CREATED,
    StateName.CREATING_EXECUTION_GRAPH: JobStatus.CREATED,
    StateName.EXECUTING: JobStatus.RUNNING,
    StateName.RESTARTING: JobStatus.RESTARTING,
    StateName.STOP_WITH_SAVEPOINT: JobStatus.RUNNING,
    StateName.CANCELING: JobStatus.CANCELLING,
    StateName.FAILING: JobStatus.FAILING,
}


class TransitionManager(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A DefaultStateTransitionManager; `epoch` is the identity of its current phase."""

    epoch: int
    phase: Phase
    phase_entered_at: int
    last_rescale: int  # Cooldown's anchor: when the owning state was entered
    cooldown_ms: int
    stabilization_ms: int
    max_delay_ms: int
    first_change: int | None = None
    last_change: int | None = None
    evaluation_scheduled: bool = False


class ExecutionGraph(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The running (or planned) job: its parallelism, the slots it holds, and what its
    CheckpointCoordinator knows (each graph has its own, as in Flink)."""

    id: str
    parallelism: tuple[int, ...]
    assignment: Assignment
    last_checkpoint_at: int | None = None  # when a checkpoint of this graph last completed
    checkpoint_pending: bool = False  # a checkpoint this scheduler triggered has not ended


class SchedulerState(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """The current scheduler state; `epoch` is its identity for runIfState guards."""

    name: StateName
    epoch: int
    entered_at: int
    stm: TransitionManager | None = None
    graph: ExecutionGraph | None = None
    previous_graph: ExecutionGraph | None = None
    restart_with: tuple[int, ...] | None = None
    backoff_ms: int = 0
    graph_terminal: bool = False  # Restarting, Canceling, Failing: the graph stopped
    checkpoint_countdown: int | None = None
    savepoint_completed: bool = False
    resumed: bool = False  # Executing again after a failed stop-with-savepoint
    checkpoint_trigger_scheduled: bool = False  # Executing: one active-checkpoint retry pending
    awaiting_parallelism: tuple[int, ...] | None = None  # WaitingForResources, FLINK-40379
    job_status: JobStatus | None = None
    cause: str | None = None


class Timer(msgspec.Struct, frozen=True, array_like=True, gc=False, order=True):
    """A delayed action guarded by the identity of the state (and phase) that set it.

    Timers order by (due, seq): `seq` is unique within a job, so no later field is ever
    compared, and a job's timers sort without a key function."""

    due: int
    seq: int
    action: str
    state_epoch: int
    phase_epoch: int | None = None


class TaskManager(msgspec.Struct, frozen=True, array_like=True, gc=False):
    id: str
    slots: int
    profile: Profile | None

    def slot_list(self) -> tuple[Slot, ...]:
        return _slots_of(self.id, self.slots, self.profile)


@lru_cache(maxsize=1 << 16)
def _slots_of(task_manager_id: str, count: int, profile: Profile | None) -> tuple[Slot, ...]:
    """A TaskManager's slots, built once: a job's every step lists all of them, and a
    large job has hundreds (the slots are immutable, so one tuple serves every job)."""
    return tuple(Slot(f"{task_manager_id}#{i}", task_manager_id, i, profile) for i in range(count))


@lru_cache(maxsize=1 << 12)
def _all_slots(task_managers: tuple[TaskManager, ...]) -> tuple[Slot, ...]:
    """Every slot of these TaskManagers, in their order; cached like `_slots_of`."""
    return tuple(chain.from_iterable(tm.slot_list() for tm in task_managers))


class JobState(msgspec.Struct, frozen=True, array_like=True, gc=False):
    job_id: str
    job_name: str
    now: int
    settings: tuple[tuple[str, str], ...]
    checkpoint_interval_ms: int | None
    info: JobInformation
    state: SchedulerState
    timeline: Timeline
    task_managers: tuple[TaskManager, ...] = ()
    timers: tuple[Timer, ...] = ()
    epochs: int = 0
    timer_seq: int = 0
    graphs: int = 0
    restart: RestartState = msgspec.field(default_factory=RestartState)
    num_restarts: int = 0
    num_rescales: int = 0
    sequence: int = 0

    def slots(self) -> tuple[Slot, ...]:
        return _all_slots(self.task_managers)

    def slot_count(self) -> int:
        return sum([tm.slots for tm in self.task_managers])

    def next_due(self) -> int | None:
        """When the earliest pending timer is due, for the service's wall-clock tick."""
        return self.timers[0].due if self.timers else None
