"""What a fold step returns besides the new state: effects, as plain data.

The service sends them (rescale records to the rescales topic, the rest to the
decisions topic, rejections to the dead-letter topic); `scalefold replay` prints
them. Every effect carries the job id, the event time and a per-job sequence
number, which orders a job's effects totally.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

import msgspec

from services.scheduler.core.model import JobState, JobStatus


class DecisionKind(StrEnum):
    STATE_TRANSITION = "STATE_TRANSITION"
    PHASE_TRANSITION = "PHASE_TRANSITION"
    CHANGE_RECORDED = "CHANGE_RECORDED"
    CHANGE_IGNORED = "CHANGE_IGNORED"
    TRIGGER_IGNORED = "TRIGGER_IGNORED"
    RESCALE_TRIGGERED = "RESCALE_TRIGGERED"
    RESTART_DECIDED = "RESTART_DECIDED"
    ACTIVE_CHECKPOINT = "ACTIVE_CHECKPOINT"  # FLINK-36753: asked, deferred, skipped, dropped
    TIMEOUT = "TIMEOUT"  # a wait ended by its timeout, and what happens now
    REQUIREMENTS_UPDATED = "REQUIREMENTS_UPDATED"
    REQUIREMENTS_UNCHANGED = "REQUIREMENTS_UNCHANGED"
    CONFIGURATION_UPDATED = "CONFIGURATION_UPDATED"
    RESOURCES_CHANGED = "RESOURCES_CHANGED"
    EVENT_IGNORED = "EVENT_IGNORED"
    CLOCK_CLAMPED = "CLOCK_CLAMPED"


class RequestKind(StrEnum):
    """What the scheduler asks of the runtime (a real cluster or the embedded one)."""

    DECLARE_RESOURCES = "DECLARE_RESOURCES"
    CREATE_EXECUTION_GRAPH = "CREATE_EXECUTION_GRAPH"
    DEPLOY = "DEPLOY"
    CANCEL_EXECUTION_GRAPH = "CANCEL_EXECUTION_GRAPH"
    STOP_WITH_SAVEPOINT = "STOP_WITH_SAVEPOINT"
    TRIGGER_CHECKPOINT = "TRIGGER_CHECKPOINT"


class RejectionKind(StrEnum):
    """Why an input was dead-lettered (the DeadLetter's errorClass)."""

    UNKNOWN_JOB = "UnknownJob"
    INVALID_EVENT = "InvalidEvent"


class Decision(msgspec.Struct, frozen=True):
    """A scheduler decision and why: transitions, and why a change did or did not rescale.

    A state transition carries the job's new JobStatus (Flink's job status listeners
    hear of every change); the transition into Finished carries how the job ended.
    """

    job_id: str
    at: int
    sequence: int
    kind: DecisionKind
    state: str
    phase: str | None
    message: str
    details: tuple[tuple[str, str], ...] = ()
    job_status: JobStatus | None = None


class RuntimeRequest(msgspec.Struct, frozen=True):
    job_id: str
    at: int
    sequence: int
    kind: RequestKind
    state: str
    execution_graph_id: str | None
    details: tuple[tuple[str, str], ...] = ()


class RescaleUpdated(msgspec.Struct, frozen=True):
    """One revision of a rescale record, ready for the Avro rescale schema."""

    job_id: str
    at: int
    sequence: int
    rescale_uuid: str
    revision: int
    record: dict[str, Any]


class Rejected(msgspec.Struct, frozen=True):
    """An input the scheduler cannot use at all: it belongs on the dead-letter topic."""

    job_id: str
    at: int
    sequence: int
    kind: RejectionKind
    message: str


Effect = Decision | RuntimeRequest | RescaleUpdated | Rejected


class Step(msgspec.Struct, frozen=True):
    """The job after one event (None if it was never created) and what the event caused."""

    job: JobState | None
    effects: tuple[Effect, ...]
