"""The bridge's source offset of one Flink job: what it has forwarded of it.

Kafka Connect keeps a source connector's offsets in Kafka, keyed by source
partition; so does the bridge, one `FlinkBridgeOffset` per (cluster, Flink job) on
the compacted `flink-bridge-offsets` topic, written in the same transaction as the
rescale records it accounts for (services/bridge/sink.py). Pure values here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from services.contracts.events import Requirement
from services.contracts.topics import flink_job_key


@dataclass(frozen=True)
class RescaleOffset:
    uuid: str
    revision: int
    digest: str
    final: bool


@dataclass(frozen=True)
class JobOffset:
    """Everything the bridge sent about one job, enough to send only what changed."""

    cluster: str
    job_id: str
    job_name: str | None = None
    submitted: bool = False
    rescales: tuple[RescaleOffset, ...] = ()
    task_managers: tuple[str, ...] = ()
    requirements: tuple[Requirement, ...] = ()
    job_state: str | None = None
    last_exception_ms: int = 0
    terminal: str | None = None
    updated_at: int = 0
    checkpoints_sent: tuple[int, ...] = ()
    lost_task_managers: tuple[str, ...] = ()  # lost by the JobMaster, still listed
    advanced_to: int = 0  # the job's clock, as the last TimerFired sent moved it
    checkpoint_floor: int | None = None  # None: updated_at (an offset of version 1)

    @property
    def key(self) -> str:
        return flink_job_key(self.cluster, self.job_id)

    def rescale(self, uuid: str) -> RescaleOffset | None:
        return next((r for r in self.rescales if r.uuid == uuid), None)

    def finished_rescales(self) -> frozenset[str]:
        return frozenset(r.uuid for r in self.rescales if r.final)

    def with_rescale(self, sent: RescaleOffset) -> JobOffset:
        kept = tuple(r for r in self.rescales if r.uuid != sent.uuid)
        return replace(self, rescales=(*kept, sent))

    def keeping_rescales(self, uuids: frozenset[str]) -> JobOffset:
        """Only the rescales Flink still lists: the offset stays as bounded as Flink's history."""
        return replace(self, rescales=tuple(r for r in self.rescales if r.uuid in uuids))


def to_record(offset: JobOffset) -> dict[str, Any]:
    """The FlinkBridgeOffset datum."""
    return {
        "cluster": offset.cluster,
        "jobId": offset.job_id,
        "jobName": offset.job_name,
        "submitted": offset.submitted,
        "rescales": [
            {"rescaleUuid": r.uuid, "revision": r.revision, "digest": r.digest, "final": r.final}
            for r in offset.rescales
        ],
        "taskManagers": list(offset.task_managers),
        "requirements": [
            {"vertexId": q.vertex_id, "lowerBound": q.lower, "upperBound": q.upper}
            for q in offset.requirements
        ],
        "jobState": offset.job_state,
        "lastExceptionMillis": offset.last_exception_ms,
        "terminal": offset.terminal,
        "updatedAtMillis": offset.updated_at,
        "checkpointsSent": list(offset.checkpoints_sent),
        "lostTaskManagers": list(offset.lost_task_managers),
        "advancedToMillis": offset.advanced_to,
        "checkpointFloorMillis": offset.checkpoint_floor,
    }


def from_record(record: dict[str, Any]) -> JobOffset:
    """The offset of a decoded FlinkBridgeOffset."""
    return JobOffset(
        cluster=record["cluster"],
        job_id=record["jobId"],
        job_name=record.get("jobName"),
        submitted=bool(record.get("submitted")),
        rescales=tuple(
            RescaleOffset(r["rescaleUuid"], int(r["revision"]), r["digest"], bool(r["final"]))
            for r in record.get("rescales") or ()
        ),
        task_managers=tuple(record.get("taskManagers") or ()),
        requirements=tuple(
            Requirement(q["vertexId"], int(q["lowerBound"]), int(q["upperBound"]))
            for q in record.get("requirements") or ()
        ),
        job_state=record.get("jobState"),
        last_exception_ms=int(record.get("lastExceptionMillis") or 0),
        terminal=record.get("terminal"),
        updated_at=int(record["updatedAtMillis"]),
        checkpoints_sent=tuple(int(c) for c in record.get("checkpointsSent") or ()),
        lost_task_managers=tuple(record.get("lostTaskManagers") or ()),
        advanced_to=int(record.get("advancedToMillis") or 0),
        checkpoint_floor=record.get("checkpointFloorMillis"),
    )
