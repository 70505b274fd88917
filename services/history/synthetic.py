"""Synthetic rescale records (Avro v2 datums) for tests, the benchmark and demos.

Shaped like the scheduler's output: every rescale is sent as revisions 1..n,
the in-progress ones end with an open scheduler-state span, the last one is
terminated. Deterministic: the same arguments give the same records.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from services.history.tables import COOLDOWN_KEY

Record = dict[str, Any]

TERMINAL_STATE = {
    "SUCCEEDED": "COMPLETED",
    "EXCEPTION_OCCURRED": "FAILED",
    "RESOURCE_REQUIREMENTS_UPDATED": "IGNORED",
    "NO_RESOURCES_OR_PARALLELISMS_CHANGE": "IGNORED",
    "JOB_FINISHED": "IGNORED",
    "JOB_FAILED": "IGNORED",
    "JOB_CANCELED": "IGNORED",
    "JOB_FAILOVER_RESTARTING": "IGNORED",
}


@dataclass(frozen=True)
class Group:
    """One slot-sharing group's slot numbers (FLIP-495 SlotSharingGroupRescale)."""

    desired: int
    minimal: int = 1
    pre: int | None = None
    post: int | None = None
    name: str = "default"


Span = tuple[str, int, int | None]
"""(state, enter ms, leave ms or None while open)."""


def stable_uuid(*parts: object) -> str:
    """A UUID derived from `parts`, so synthetic data is reproducible."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(str(p) for p in parts)))


def _group_id(name: str) -> str:
    return uuid.uuid5(uuid.NAMESPACE_DNS, name).hex


def rescale(
    job_id: str,
    rescale_uuid: str,
    *,
    spans: Sequence[Span],
    groups: Sequence[Group] = (Group(desired=4, pre=2, post=4),),
    revision: int = 1,
    reason: str | None = None,
    available_slots: int | None = None,
    reactive: bool = False,
    cooldown_ms: int | None = None,
    trigger: str = "UPDATE_REQUIREMENT",
    attempt: int = 1,
    phases: Sequence[tuple[str, str, int, int | None]] = (),
) -> Record:
    """One revision of one rescale; start = first span's enter, end = last span's leave."""
    start = spans[0][1]
    end = spans[-1][2] if reason is not None else None
    settings = {} if cooldown_ms is None else {COOLDOWN_KEY: str(cooldown_ms)}
    return {
        "jobId": job_id,
        "rescaleUuid": rescale_uuid,
        "resourceRequirementsUuid": stable_uuid(job_id, "requirements", attempt > 1),
        "rescaleAttemptId": attempt,
        "vertices": [_vertex(g, i) for i, g in enumerate(groups) for _ in range(2)],
        "slots": [_slots(g) for g in groups],
        "schedulerStates": [_span(state, enter, leave) for state, enter, leave in spans],
        "startTimestampInMillis": start,
        "endTimestampInMillis": end,
        "triggerCause": trigger,
        "terminalState": TERMINAL_STATE[reason] if reason else None,
        "terminatedReason": reason,
        "revision": revision,
        "updatedAtMillis": max(t for _, enter, leave in spans for t in (enter, leave) if t),
        "transitionPhases": [_phase(*phase) for phase in phases],
        "availableSlots": available_slots,
        "reactiveMode": reactive,
        "schedulerSettings": settings,
        "statusMessage": None if reason else f"in {spans[-1][0]}",
    }


def _vertex(group: Group, index: int) -> Record:
    return {
        "jobVertexId": uuid.uuid5(uuid.NAMESPACE_OID, f"{group.name}/{index}").hex,
        "jobVertexName": f"{group.name} operator {index}",
        "slotSharingGroupId": _group_id(group.name),
        "slotSharingGroupName": group.name,
        "desiredParallelism": group.desired,
        "sufficientParallelism": group.minimal,
        "preRescaleParallelism": group.pre,
        "postRescaleParallelism": group.post,
    }


def _slots(group: Group) -> Record:
    return {
        "slotSharingGroupId": _group_id(group.name),
        "slotSharingGroupName": group.name,
        "requestResourceProfile": None,
        "desiredSlots": group.desired,
        "minimalRequiredSlots": group.minimal,
        "preRescaleSlots": group.pre,
        "postRescaleSlots": group.post,
        "acquiredResourceProfile": None
        if group.post is None
        else {
            "cpuCores": 1.0,
            "taskHeapMemoryMb": 512,
            "taskOffHeapMemoryMb": 0,
            "managedMemoryMb": 256,
            "networkMemoryMb": 64,
        },
    }


def _phase(phase: str, state: str, enter: int, leave: int | None) -> Record:
    return {
        "phase": phase,
        "state": state,
        "enterTimestampInMillis": enter,
        "leaveTimestampInMillis": leave,
        "durationInMillis": None if leave is None else leave - enter,
    }


def _span(state: str, enter: int, leave: int | None) -> Record:
    return {
        "state": state,
        "enterTimestampInMillis": enter,
        "leaveTimestampInMillis": leave,
        "durationInMillis": None if leave is None else leave - enter,
        "stringifiedException": "java.lang.RuntimeException: boom" if state == "Failing" else None,
    }


COMPLETED_PATH = ("Executing", "Restarting", "WaitingForResources", "CreatingExecutionGraph")


def revisions(
    job_id: str, index: int, start_ms: int, rng: random.Random, post: int
) -> list[Record]:
    """Every revision of one rescale, as the scheduler would send them, oldest first.

    The spans follow a rescale from Executing through Restarting and
    WaitingForResources to the new Executing; each revision adds one span and
    leaves it open, the last revision closes the rescale with `SUCCEEDED`.
    """
    rescale_uuid = stable_uuid(job_id, "rescale", index)
    group = Group(desired=8, minimal=1, pre=max(1, post - 1), post=post)
    enter, spans = start_ms, list[Span]()
    result = []
    for revision, state in enumerate(COMPLETED_PATH, start=1):
        spans.append((state, enter, None))
        phases = [("Stabilizing", "Executing", start_ms, spans[0][2])]
        result.append(
            rescale(
                job_id, rescale_uuid, spans=spans, groups=[group], revision=revision, phases=phases
            )
        )
        leave = enter + rng.randint(100, 5_000)
        spans[-1] = (state, enter, leave)
        enter = leave
    spans.append(("Executing", enter, enter))
    final = rescale(
        job_id,
        rescale_uuid,
        spans=spans,
        groups=[group],
        revision=len(COMPLETED_PATH) + 1,
        reason="SUCCEEDED",
        available_slots=post,
        phases=[("Stabilizing", "Executing", start_ms, spans[0][2])],
    )
    return [*result, final]


def fleet(jobs: int, rescales_per_job: int, start_ms: int, seed: int = 7) -> Iterator[Record]:
    """Many jobs' rescale revisions, interleaved job by job in send order."""
    rng = random.Random(seed)
    for number in range(rescales_per_job):
        for job in range(jobs):
            job_id = f"job-{job:04d}"
            post = 2 + (number + job) % 5
            begin = start_ms + number * 60_000 + job * 100
            yield from revisions(job_id, number, begin, rng, post)
