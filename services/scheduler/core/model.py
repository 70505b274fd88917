"""One job's scheduler state: everything the fold needs, immutable and serializable.

Every msgspec Struct and error class of the core that a job's state or a step holds is
defined here (the effects in effects.py, the enums in enums.py), and this module stays
interpreted when the core's logic is compiled: msgspec builds a Struct from its
annotations, which a class compiled by mypyc does not keep (native.py)."""

from __future__ import annotations

from functools import lru_cache
from itertools import chain

import msgspec

from services.contracts.events import Profile
from services.contracts.jobconfig import OBSERVED_CLUSTER
from services.scheduler.core.enums import (
    JobStatus,
    Phase,
    StateName,
    TerminatedReason,
    TriggerCause,
)


class InvariantError(AssertionError):
    """The scheduler broke one of its own rules: a bug, never bad input."""


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


# ---- the job graph: vertices and their bounds (rules in jobgraph.py) -----------------


class Vertex(msgspec.Struct, frozen=True, array_like=True, gc=False):
    id: str
    name: str
    ssg_id: str
    ssg_name: str
    max_parallelism: int


class Bounds(msgspec.Struct, frozen=True, array_like=True, gc=False):
    lower: int
    upper: int


class JobInformation(msgspec.Struct, frozen=True, array_like=True, gc=False, cache_hash=True):
    """The vertices (in topological order) and their current bounds, index-aligned.

    The key of the allocator's and the rescale rows' caches, looked up several times a
    step: its hash is computed once per object (`cache_hash`; not part of the encoding)."""

    vertices: tuple[Vertex, ...]
    bounds: tuple[Bounds, ...]

    def bounds_of(self, vertex_id: str) -> Bounds:
        return self.bounds[self.index(vertex_id)]

    def index(self, vertex_id: str) -> int:
        for i, vertex in enumerate(self.vertices):
            if vertex.id == vertex_id:
                return i
        raise KeyError(vertex_id)

    def with_bounds(self, bounds: tuple[Bounds, ...]) -> JobInformation:
        return shared(JobInformation(self.vertices, bounds))


@lru_cache(maxsize=4096)
def shared(info: JobInformation) -> JobInformation:
    """The first of the equal job informations seen: jobs of the same graph and bounds share
    one immutable object (and its cached hash), which stays warm in the CPU's caches."""
    return info


class InvalidJobGraphError(ValueError):
    """A submitted job graph the scheduler cannot run; the message says why."""


class RequirementsRejectedError(ValueError):
    """An update that JobResourceRequirements.validate or the scheduler refuses."""


# ---- slots and plans (SlotSharingSlotAllocator in allocator.py) ----------------------


class Slot(msgspec.Struct, frozen=True, array_like=True, gc=False):
    id: str
    task_manager_id: str
    index: int
    profile: Profile | None


class SsgMeta(msgspec.Struct, frozen=True, array_like=True, gc=False):
    id: str
    name: str
    max_lower: int
    max_upper: int

    @property
    def range(self) -> int:
        return self.max_upper - self.max_lower


class Plan(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """A vertex parallelism (index-aligned with the job's vertices) and SSG slot counts."""

    parallelism: tuple[int, ...]
    group_slots: tuple[tuple[str, int], ...]  # (ssg id, slots), sorted by id


class Assignment(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """Which slots each slot-sharing group got, in execution-group order."""

    groups: tuple[tuple[str, tuple[str, ...]], ...]  # (ssg id, slot ids)


# ---- restart backoff (strategies in restart.py) --------------------------------------


class RestartState(msgspec.Struct, frozen=True, array_like=True, gc=False):
    failures: int = 0
    attempts: int = 0  # since the last backoff reset (exponential delay)
    backoff_ms: int = 0
    last_failure_at: int | None = None
    recent_failures: tuple[int, ...] = ()  # failure-rate window


class RestartDecision(msgspec.Struct, frozen=True, array_like=True, gc=False):
    can_restart: bool
    backoff_ms: int
    explanation: str


# ---- the rescale timeline (FLIP-495; its operations in timeline.py) -------------------


class StateSpan(msgspec.Struct, frozen=True, array_like=True, gc=False):
    state: str
    enter: int
    leave: int | None
    exception: str | None = None


class PhaseSpan(msgspec.Struct, frozen=True, array_like=True, gc=False):
    phase: str
    state: str
    enter: int
    leave: int | None = None


class VertexRescale(msgspec.Struct, frozen=True, array_like=True, gc=False):
    vertex_id: str
    name: str
    ssg_id: str
    ssg_name: str
    desired: int | None = None
    sufficient: int | None = None
    pre: int | None = None
    post: int | None = None


class SlotRescale(msgspec.Struct, frozen=True, array_like=True, gc=False):
    ssg_id: str
    ssg_name: str
    desired: int | None = None
    minimal: int | None = None
    pre: int | None = None
    post: int | None = None
    acquired_profile: Profile | None = None


class Rescale(msgspec.Struct, frozen=True, array_like=True, gc=False):
    uuid: str
    requirements_uuid: str
    attempt: int
    vertices: tuple[VertexRescale, ...] = ()
    slots: tuple[SlotRescale, ...] = ()
    spans: tuple[StateSpan, ...] = ()
    phases: tuple[PhaseSpan, ...] = ()
    start: int | None = None
    end: int | None = None
    trigger: TriggerCause | None = None
    reason: TerminatedReason | None = None
    revision: int = 0
    status: str | None = None


class Completed(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """What a later rescale takes from the latest COMPLETED one: its post values."""

    vertex_post: tuple[tuple[str, int | None], ...]
    slot_post: tuple[tuple[str, int | None], ...]


class Timeline(msgspec.Struct, frozen=True, array_like=True, gc=False):
    size: int
    # The rescale in progress; a terminated one is not kept: its last record has left as an
    # effect, and only the counters and `latest_completed` are read after it.
    current: Rescale | None = None
    latest_completed: Completed | None = None
    requirements_uuid: str = ""
    requirements_epoch: int = 0
    attempt: int = 0  # "the id before the first rescale is attempt 0"
    created: int = 0
    completed: int = 0
    failed: int = 0
    ignored: int = 0


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


@lru_cache(maxsize=1 << 13)
def _slots_of(task_manager_id: str, count: int, profile: Profile | None) -> tuple[Slot, ...]:
    """A TaskManager's slots, built once: a job's every step lists all of them, and a
    large job has hundreds (the slots are immutable, so one tuple serves every job).
    8,192 TaskManagers (~4 MiB of 2-slot ones): 65,536 held 32 MiB, which TaskManagers
    that come and go fill in weeks, a worker's memory growing until they did."""
    return tuple(Slot(f"{task_manager_id}#{i}", task_manager_id, i, profile) for i in range(count))


@lru_cache(maxsize=1 << 12)
def all_slots(task_managers: tuple[TaskManager, ...]) -> tuple[Slot, ...]:
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

    def next_due(self) -> int | None:
        """When the earliest pending timer is due."""
        return self.timers[0].due if self.timers else None

    def wall_clock_due(self) -> int | None:
        """When the service's wall-clock tick should fire this job's earliest timer: never
        for a job observed on a real Flink, whose clock the bridge moves (TimerFired as far
        as its polls have seen), so that a deadline is met only once every input before it
        has arrived, however late a busy machine delivers them. A finished job's timer
        (its release) fires on the wall clock either way: no input changes it any more."""
        observed = any(key == OBSERVED_CLUSTER for key, _ in self.settings)
        finished = self.state.name is StateName.FINISHED
        return None if observed and not finished else self.next_due()
