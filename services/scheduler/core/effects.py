"""What a fold step returns besides the new state: effects, as plain data.

The service sends them (rescale records to the rescales topic, the rest to the
decisions topic, rejections to the dead-letter topic); `scalefold replay` prints
them. Every effect carries the job id, the event time and a per-job sequence
number, which orders a job's effects totally.
"""

from __future__ import annotations

from typing import Any

import msgspec

from services.scheduler.core.enums import DecisionKind, JobStatus, RejectionKind, RequestKind
from services.scheduler.core.model import JobState


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
