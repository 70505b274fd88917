"""The scheduler's inputs as typed, frozen values, converted from the Avro records.

`from_record` is the only place that knows the Avro field names of the inputs;
everything below it works on these types.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from services.contracts import records as r


class JobEventKind(StrEnum):
    TASK_FAILURE = "TASK_FAILURE"
    GLOBAL_FAILURE = "GLOBAL_FAILURE"
    CHECKPOINT_COMPLETED = "CHECKPOINT_COMPLETED"
    CHECKPOINT_FAILED = "CHECKPOINT_FAILED"
    SAVEPOINT_REQUESTED = "SAVEPOINT_REQUESTED"
    SAVEPOINT_COMPLETED = "SAVEPOINT_COMPLETED"
    SAVEPOINT_FAILED = "SAVEPOINT_FAILED"
    CANCEL = "CANCEL"
    SUSPEND = "SUSPEND"
    FINISHED = "FINISHED"
    EXECUTION_GRAPH_CREATED = "EXECUTION_GRAPH_CREATED"
    EXECUTION_GRAPH_CANCELLED = "EXECUTION_GRAPH_CANCELLED"
    EXECUTION_GRAPH_FAILED = "EXECUTION_GRAPH_FAILED"


@dataclass(frozen=True)
class Profile:
    """A slot's ResourceProfile; None stands for Flink's ResourceProfile.UNKNOWN."""

    cpu_cores: float
    task_heap_mb: int
    task_off_heap_mb: int
    managed_mb: int
    network_mb: int


@dataclass(frozen=True)
class VertexSpec:
    id: str
    name: str
    ssg_id: str
    ssg_name: str
    parallelism: int
    max_parallelism: int | None


@dataclass(frozen=True)
class Requirement:
    vertex_id: str
    lower: int
    upper: int


@dataclass(frozen=True)
class JobSubmitted:
    job_id: str
    timestamp: int
    job_name: str
    vertices: tuple[VertexSpec, ...]
    checkpoint_interval_ms: int | None
    configuration: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Window:
    """When an observed event happened: after `after`, by `by` (epoch ms). The Flink
    bridge sees a TaskManager or a requirements change only as presence in a REST answer:
    it knows the answer that did not show it and the one that did, not the instant."""

    after: int
    by: int


@dataclass(frozen=True)
class TaskManagerRegistered:
    job_id: str
    timestamp: int
    task_manager_id: str
    slots: int
    profile: Profile | None
    window: Window | None = None


@dataclass(frozen=True)
class TaskManagerLost:
    job_id: str
    timestamp: int
    task_manager_id: str
    reason: str
    window: Window | None = None
    hosted_tasks: bool | None = None  # as observed; None: the scheduler's assignment says


RUNTIME_CHECKPOINT_IDS = 9_000_000_000_000_000_000
"""Checkpoint ids from here up (to Avro's long limit, 9.22e18) belong to the embedded
runtime (the actuator): its ids never collide with a producer's, which stay below."""


@dataclass(frozen=True)
class JobLifecycle:
    job_id: str
    timestamp: int
    kind: JobEventKind
    recoverable: bool = True
    exception: str | None = None
    checkpoint_id: int | None = None
    savepoint_path: str | None = None
    execution_graph_id: str | None = None


@dataclass(frozen=True)
class RequirementsUpdated:
    job_id: str
    timestamp: int
    requirements: tuple[Requirement, ...]
    window: Window | None = None


@dataclass(frozen=True)
class ConfigurationUpdated:
    job_id: str
    timestamp: int
    entries: tuple[tuple[str, str], ...]
    command_id: str | None = None


@dataclass(frozen=True)
class TimerFired:
    job_id: str
    timestamp: int


Event = (
    JobSubmitted
    | TaskManagerRegistered
    | TaskManagerLost
    | JobLifecycle
    | RequirementsUpdated
    | ConfigurationUpdated
    | TimerFired
)


def profile_from_record(record: Mapping[str, Any] | None) -> Profile | None:
    if record is None:
        return None
    return Profile(
        float(record["cpuCores"]),
        int(record["taskHeapMemoryMb"]),
        int(record["taskOffHeapMemoryMb"]),
        int(record["managedMemoryMb"]),
        int(record["networkMemoryMb"]),
    )


def profile_to_record(profile: Profile | None) -> dict[str, Any] | None:
    if profile is None:
        return None
    return {
        "cpuCores": profile.cpu_cores,
        "taskHeapMemoryMb": profile.task_heap_mb,
        "taskOffHeapMemoryMb": profile.task_off_heap_mb,
        "managedMemoryMb": profile.managed_mb,
        "networkMemoryMb": profile.network_mb,
    }


def from_record(schema: str, record: Mapping[str, Any]) -> Event:
    """The typed event of a decoded input record (KeyError for a non-input schema)."""
    return _READERS[schema](record)


def _submitted(record: Mapping[str, Any]) -> JobSubmitted:
    vertices = tuple(
        VertexSpec(
            id=v["id"],
            name=v["name"],
            ssg_id=v["slotSharingGroupId"],
            ssg_name=v.get("slotSharingGroupName") or v["slotSharingGroupId"],
            parallelism=int(v["parallelism"]),
            max_parallelism=v.get("maxParallelism"),
        )
        for v in record["vertices"]
    )
    return JobSubmitted(
        job_id=record["jobId"],
        timestamp=int(record["timestamp"]),
        job_name=record.get("jobName", ""),
        vertices=vertices,
        checkpoint_interval_ms=record.get("checkpointIntervalMillis"),
        configuration=tuple(sorted((record.get("configuration") or {}).items())),
    )


def _registered(record: Mapping[str, Any]) -> TaskManagerRegistered:
    return TaskManagerRegistered(
        job_id=record["jobId"],
        timestamp=int(record["timestamp"]),
        task_manager_id=record["taskManagerId"],
        slots=int(record["slots"]),
        profile=profile_from_record(record.get("slotProfile")),
        window=_window(record),
    )


def _lost(record: Mapping[str, Any]) -> TaskManagerLost:
    return TaskManagerLost(
        record["jobId"],
        int(record["timestamp"]),
        record["taskManagerId"],
        record.get("reason", ""),
        _window(record),
        record.get("hostedTasks"),
    )


def _window(record: Mapping[str, Any]) -> Window | None:
    after, by = record.get("observedAfterMillis"), record.get("observedByMillis")
    return None if after is None or by is None else Window(int(after), int(by))


def _window_fields(window: Window | None) -> dict[str, Any]:
    """The window's fields, left out when there is none: an exact event's record (and
    its line in a log) reads as before the window existed."""
    return (
        {}
        if window is None
        else {"observedAfterMillis": window.after, "observedByMillis": window.by}
    )


def _lifecycle(record: Mapping[str, Any]) -> JobLifecycle:
    return JobLifecycle(
        job_id=record["jobId"],
        timestamp=int(record["timestamp"]),
        kind=JobEventKind(record["kind"]),
        recoverable=bool(record.get("recoverable", True)),
        exception=record.get("exception"),
        checkpoint_id=record.get("checkpointId"),
        savepoint_path=record.get("savepointPath"),
        execution_graph_id=record.get("executionGraphId"),
    )


def _requirements(record: Mapping[str, Any]) -> RequirementsUpdated:
    return RequirementsUpdated(
        job_id=record["jobId"],
        timestamp=int(record["timestamp"]),
        requirements=tuple(
            Requirement(q["vertexId"], int(q["lowerBound"]), int(q["upperBound"]))
            for q in record["requirements"]
        ),
        window=_window(record),
    )


def _configuration(record: Mapping[str, Any]) -> ConfigurationUpdated:
    return ConfigurationUpdated(
        job_id=record["jobId"],
        timestamp=int(record["timestamp"]),
        entries=tuple(sorted(record["entries"].items())),
        command_id=record.get("commandId"),
    )


def _timer(record: Mapping[str, Any]) -> TimerFired:
    return TimerFired(record["jobId"], int(record["timestamp"]))


_READERS: dict[str, Callable[[Mapping[str, Any]], Event]] = {
    r.JOB_SUBMITTED: _submitted,
    r.TASK_MANAGER_REGISTERED: _registered,
    r.TASK_MANAGER_LOST: _lost,
    r.JOB_LIFECYCLE_EVENT: _lifecycle,
    r.RESOURCE_REQUIREMENTS_UPDATED: _requirements,
    r.JOB_CONFIGURATION_UPDATED: _configuration,
    r.TIMER_FIRED: _timer,
}


def to_record(event: Event) -> tuple[str, dict[str, Any]]:
    """The Avro record (schema name, datum) of an event: the inverse of `from_record`."""
    schema, fields = _WRITERS[type(event)](event)
    return schema, {"jobId": event.job_id, "timestamp": event.timestamp, **fields}


def _submitted_fields(event: Any) -> tuple[str, dict[str, Any]]:
    vertices = [
        {
            "id": v.id,
            "name": v.name,
            "slotSharingGroupId": v.ssg_id,
            "slotSharingGroupName": v.ssg_name,
            "parallelism": v.parallelism,
            "maxParallelism": v.max_parallelism,
        }
        for v in event.vertices
    ]
    return r.JOB_SUBMITTED, {
        "jobName": event.job_name,
        "vertices": vertices,
        "checkpointIntervalMillis": event.checkpoint_interval_ms,
        "configuration": dict(event.configuration),
    }


def _lifecycle_fields(event: Any) -> tuple[str, dict[str, Any]]:
    return r.JOB_LIFECYCLE_EVENT, {
        "kind": event.kind.value,
        "recoverable": event.recoverable,
        "exception": event.exception,
        "checkpointId": event.checkpoint_id,
        "savepointPath": event.savepoint_path,
        "executionGraphId": event.execution_graph_id,
    }


def _requirements_fields(event: Any) -> tuple[str, dict[str, Any]]:
    requirements = [
        {"vertexId": q.vertex_id, "lowerBound": q.lower, "upperBound": q.upper}
        for q in event.requirements
    ]
    return r.RESOURCE_REQUIREMENTS_UPDATED, {
        "requirements": requirements,
        **_window_fields(event.window),
    }


_WRITERS: dict[type, Callable[[Any], tuple[str, dict[str, Any]]]] = {
    JobSubmitted: _submitted_fields,
    TaskManagerRegistered: lambda e: (
        r.TASK_MANAGER_REGISTERED,
        {
            "taskManagerId": e.task_manager_id,
            "slots": e.slots,
            "slotProfile": profile_to_record(e.profile),
            **_window_fields(e.window),
        },
    ),
    TaskManagerLost: lambda e: (
        r.TASK_MANAGER_LOST,
        {
            "taskManagerId": e.task_manager_id,
            "reason": e.reason,
            **_window_fields(e.window),
            "hostedTasks": e.hosted_tasks,
        },
    ),
    JobLifecycle: _lifecycle_fields,
    RequirementsUpdated: _requirements_fields,
    ConfigurationUpdated: lambda e: (
        r.JOB_CONFIGURATION_UPDATED,
        {"entries": dict(e.entries), "commandId": e.command_id},
    ),
    TimerFired: lambda e: (r.TIMER_FIRED, {}),
}
