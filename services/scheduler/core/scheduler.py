"""The fold: `handle(job, event) -> Step(job', effects)`, one job at a time.

Time is the event's timestamp. Before an event is applied, the job's timers due
at or before its time run in due order; after it, the timers it set for "now"
(Flink's zero-delay runIfState calls) run too. An event older than the job's
clock is applied at the clock's time, with a CLOCK_CLAMPED decision: the job's
clock never goes backwards. `advance` runs timers up to a time without an event
(the service's TimerFired ticks, and the end of a replay).
"""

from __future__ import annotations

from typing import Final

from msgspec.structs import replace

from services.contracts.events import (
    ConfigurationUpdated,
    Event,
    JobLifecycle,
    JobSubmitted,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    TimerFired,
)
from services.contracts.jobconfig import SCHEDULER_MODE
from services.contracts.ordering import natural_key
from services.scheduler.core import history
from services.scheduler.core.allocator import desired_slots, slot_ids
from services.scheduler.core.config import ConfigError
from services.scheduler.core.effects import Rejected, Step
from services.scheduler.core.enums import (
    DecisionKind,
    JobStatus,
    RejectionKind,
    RequestKind,
    StateName,
)
from services.scheduler.core.fold import Defaults, Fold, config_of
from services.scheduler.core.jobgraph import job_information
from services.scheduler.core.jobgraph import validate_requirements as validate
from services.scheduler.core.model import (
    Assignment,
    ExecutionGraph,
    InvalidJobGraphError,
    JobState,
    RequirementsRejectedError,
    SchedulerState,
    Slot,
    TaskManager,
    Timeline,
)
from services.scheduler.core.states import behaviour
from services.scheduler.core.transitions import go_to_waiting_for_resources

RUNNING_GRAPH: Final = (StateName.EXECUTING, StateName.STOP_WITH_SAVEPOINT)


def handle(job: JobState | None, event: Event, defaults: Defaults = ()) -> Step:
    """Fold one event into one job's scheduler state."""
    if isinstance(event, JobSubmitted):
        if job is not None:
            return _rejected(
                job, event, RejectionKind.INVALID_EVENT, "the job was already submitted"
            )
        return _submit(event, defaults)
    if job is None:
        return Step(
            None,
            (
                Rejected(
                    event.job_id,
                    event.timestamp,
                    0,
                    RejectionKind.UNKNOWN_JOB,
                    f"no job {event.job_id} is known: never submitted, or finished and "
                    "released (jobstore.expiration-time)",
                ),
            ),
        )
    fold = Fold(job, defaults)
    at = event.timestamp
    if at < job.now:
        fold.decide(
            DecisionKind.CLOCK_CLAMPED,
            f"event time {at} is before the job's clock; applied at {job.now}",
        )
        at = job.now
    fold.advance_to(at, _run_timer)
    fold.flush_rescales()  # what the timers changed is recorded as of before the event
    _apply(fold, event)
    fold.advance_to(at, _run_timer)
    return _finish(fold)


def advance(job: JobState, until: int, defaults: Defaults = ()) -> Step:
    """Run the job's timers due at or before `until` (no event)."""
    fold = Fold(job, defaults)
    fold.advance_to(max(until, job.now), _run_timer)
    return _finish(fold)


def _finish(fold: Fold) -> Step:
    job = fold.finish()
    return Step(None if fold.released else job, tuple(fold.effects))


def _run_timer(fold: Fold, action: str) -> None:
    behaviour(fold.state.name).on_timer(fold, action)


def _rejected(job: JobState, event: Event, kind: RejectionKind, message: str) -> Step:
    return Step(job, (Rejected(job.job_id, event.timestamp, job.sequence, kind, message),))


def _submit(event: JobSubmitted, defaults: Defaults) -> Step:
    """Created, then Created.startScheduling: the INITIAL_SCHEDULE rescale, WaitingForResources."""
    interval = event.checkpoint_interval_ms if (event.checkpoint_interval_ms or 0) > 0 else None
    try:
        config = config_of(defaults, event.configuration, interval is not None)
        info = job_information(event.vertices, config.reactive)
    except (ConfigError, InvalidJobGraphError) as error:
        rejection = Rejected(
            event.job_id, event.timestamp, 0, RejectionKind.INVALID_EVENT, str(error)
        )
        return Step(None, (rejection,))
    job = JobState(
        job_id=event.job_id,
        job_name=event.job_name,
        now=event.timestamp,
        settings=event.configuration,
        checkpoint_interval_ms=interval,
        info=info,
        state=SchedulerState(StateName.CREATED, 1, event.timestamp),
        timeline=Timeline(config.history_size),
        epochs=1,
    )
    fold = Fold(job, defaults)
    mode = "reactive mode" if config.reactive else "adaptive scheduler"
    fold.decide(
        DecisionKind.STATE_TRANSITION,
        f"job submitted ({len(info.vertices)} vertices, {mode})",
        job_status=JobStatus.INITIALIZING,
        target="Created",
        checkpointIntervalMs=interval or 0,
    )
    history.open_initial(fold)
    fold.request(RequestKind.DECLARE_RESOURCES, None, desired_slots=desired_slots(info))
    go_to_waiting_for_resources(fold, None, "scheduling started")
    fold.advance_to(event.timestamp, _run_timer)
    return _finish(fold)


def _apply(fold: Fold, event: Event) -> None:
    if isinstance(event, TimerFired):
        return
    if fold.state.name is StateName.FINISHED and not isinstance(event, JobLifecycle):
        fold.decide(
            DecisionKind.EVENT_IGNORED, f"{type(event).__name__} ignored: the job has finished"
        )
        return
    if isinstance(event, TaskManagerRegistered):
        _register(fold, event)
    elif isinstance(event, TaskManagerLost):
        _lose(fold, event)
    elif isinstance(event, JobLifecycle):
        behaviour(fold.state.name).on_lifecycle(fold, event)
    elif isinstance(event, RequirementsUpdated):
        _update_requirements(fold, event)
    elif isinstance(event, ConfigurationUpdated):
        _configure(fold, event)


def _register(fold: Fold, event: TaskManagerRegistered) -> None:
    if event.slots < 1:
        fold.reject(
            RejectionKind.INVALID_EVENT,
            f"TaskManager {event.task_manager_id} offers {event.slots} slots",
        )
        return
    if any(tm.id == event.task_manager_id for tm in fold.job.task_managers):
        fold.decide(
            DecisionKind.EVENT_IGNORED, f"TaskManager {event.task_manager_id} is already registered"
        )
        return
    added = TaskManager(event.task_manager_id, event.slots, event.profile)
    ordered = sorted((*fold.job.task_managers, added), key=lambda tm: natural_key(tm.id))
    fold.set(task_managers=tuple(ordered))
    fold.decide(
        DecisionKind.RESOURCES_CHANGED,
        f"+{event.slots} slots from {event.task_manager_id}: {fold.slot_count} slots",
        slots=fold.slot_count,
        change="registered",
        taskManager=event.task_manager_id,
        taskManagerSlots=event.slots,
    )
    behaviour(fold.state.name).on_new_resources(fold)


def _lose(fold: Fold, event: TaskManagerLost) -> None:
    lost = next((tm for tm in fold.job.task_managers if tm.id == event.task_manager_id), None)
    if lost is None:
        fold.decide(
            DecisionKind.EVENT_IGNORED, f"TaskManager {event.task_manager_id} is not registered"
        )
        return
    fold.set(task_managers=tuple([tm for tm in fold.job.task_managers if tm.id != lost.id]))
    fold.decide(
        DecisionKind.RESOURCES_CHANGED,
        f"-{lost.slots} slots with {lost.id}: {fold.slot_count} slots",
        slots=fold.slot_count,
        change="lost",
        taskManager=lost.id,
        taskManagerSlots=lost.slots,
    )
    graph = fold.state.graph
    if fold.state.name not in RUNNING_GRAPH or graph is None:
        return
    assigned = _uses(graph, lost)
    hosted = assigned if event.hosted_tasks is None else event.hosted_tasks
    if hosted:
        cause = f"TaskManager {lost.id} lost" + (f": {event.reason}" if event.reason else "")
        behaviour(fold.state.name).on_failure(fold, cause, True, False)
    elif assigned:  # observed idle: the cluster ran those tasks on slots this fold left free
        fold.set_state(graph=_placed_elsewhere(graph, lost, fold.slots))


def _uses(graph: ExecutionGraph, task_manager: TaskManager) -> bool:
    """Whether the graph holds any of the TaskManager's slots."""
    used = slot_ids(graph.assignment)
    return any(slot.id in used for slot in task_manager.slot_list())


def _placed_elsewhere(
    graph: ExecutionGraph, lost: TaskManager, pool: tuple[Slot, ...]
) -> ExecutionGraph:
    """The graph with the lost TaskManager's slots swapped for free ones of the pool (in
    its order), as the cluster had placed them; unchanged if too few are free."""
    used = slot_ids(graph.assignment)
    gone = {slot.id for slot in lost.slot_list()}
    free = iter([slot.id for slot in pool if slot.id not in used])
    swapped = {slot: next(free, None) for slot in sorted(gone & used, key=natural_key)}
    if None in swapped.values():
        return graph
    groups = tuple(
        (group, tuple(swapped.get(slot) or slot for slot in slots))
        for group, slots in graph.assignment.groups
    )
    return replace(graph, assignment=Assignment(groups))


def _update_requirements(fold: Fold, event: RequirementsUpdated) -> None:
    """updateJobResourceRequirements: validate, then record and notify a real change."""
    if fold.config.reactive:
        fold.reject(
            RejectionKind.INVALID_EVENT, "resource requirements cannot be updated in reactive mode"
        )
        return
    try:
        bounds = validate(fold.job.info, event.requirements)
    except RequirementsRejectedError as error:
        fold.reject(RejectionKind.INVALID_EVENT, f"requirements rejected: {error}")
        return
    if bounds == fold.job.info.bounds:
        fold.decide(DecisionKind.REQUIREMENTS_UNCHANGED, "no bound changed: nothing to do")
        return
    fold.set(info=fold.job.info.with_bounds(bounds))
    history.requirements_changed(fold)
    fold.request(RequestKind.DECLARE_RESOURCES, None, desired_slots=desired_slots(fold.job.info))
    described = ", ".join(
        f"{v.id}={b.lower}..{b.upper}" for v, b in zip(fold.job.info.vertices, bounds, strict=True)
    )
    fold.decide(DecisionKind.REQUIREMENTS_UPDATED, f"requirements now {described}")
    behaviour(fold.state.name).on_new_requirements(fold)


def _configure(fold: Fold, event: ConfigurationUpdated) -> None:
    """scalefold's runtime configuration update; applies from the next state that reads it."""
    entries = dict(event.entries)
    if SCHEDULER_MODE in entries and entries[SCHEDULER_MODE] != dict(fold.job.settings).get(
        SCHEDULER_MODE, ""
    ):
        fold.reject(
            RejectionKind.INVALID_EVENT, f"{SCHEDULER_MODE} cannot change while the job runs"
        )
        return
    merged = tuple(sorted({**dict(fold.job.settings), **entries}.items()))
    try:
        config_of(fold.defaults, merged, fold.job.checkpoint_interval_ms is not None)
    except ConfigError as error:
        fold.reject(RejectionKind.INVALID_EVENT, f"configuration rejected: {error}")
        return
    fold.set(settings=merged)
    by = f" (command {event.command_id})" if event.command_id else ""
    fold.decide(DecisionKind.CONFIGURATION_UPDATED, f"updated {', '.join(sorted(entries))}{by}")
