"""A rescale as the Avro rescale record (schemas/rescale.v2.avsc), field for field."""

from __future__ import annotations

from typing import Any

from services.contracts.events import profile_to_record
from services.scheduler.core.config import SchedulerConfig
from services.scheduler.core.enums import TriggerCause
from services.scheduler.core.model import (
    JobState,
    PhaseSpan,
    Rescale,
    SchedulerState,
    SlotRescale,
    StateSpan,
    VertexRescale,
)
from services.scheduler.core.timeline import terminal_state, terminated


def build_record(
    job: JobState,
    rescale: Rescale,
    config: SchedulerConfig,
    *,
    state: SchedulerState,
    now: int,
    slot_count: int,
) -> dict[str, Any]:
    """The record of `rescale` at `now`, with `slot_count` slots available; a rescale in
    progress shows `state`, the current one, open."""
    spans = list(rescale.spans)
    if not terminated(rescale):
        spans.append(StateSpan(str(state.name), state.entered_at, None))
    state_reported = terminal_state(rescale.reason)
    return {
        "jobId": job.job_id,
        "rescaleUuid": rescale.uuid,
        "resourceRequirementsUuid": rescale.requirements_uuid,
        "rescaleAttemptId": rescale.attempt,
        "vertices": [_vertex(v) for v in rescale.vertices],
        "slots": [_slots(s) for s in rescale.slots],
        "schedulerStates": [_span(s) for s in spans],
        "startTimestampInMillis": rescale.start if rescale.start is not None else now,
        "endTimestampInMillis": rescale.end,
        "triggerCause": str(rescale.trigger or TriggerCause.INITIAL_SCHEDULE),
        "terminalState": str(state_reported) if state_reported else None,
        "terminatedReason": str(rescale.reason) if rescale.reason else None,
        "revision": rescale.revision,
        "updatedAtMillis": now,
        "transitionPhases": [_phase(p) for p in rescale.phases],
        "availableSlots": slot_count,
        "reactiveMode": config.reactive,
        "schedulerSettings": config.settings_snapshot(job.checkpoint_interval_ms),
        "statusMessage": rescale.status,
    }


def _vertex(v: VertexRescale) -> dict[str, Any]:
    return {
        "jobVertexId": v.vertex_id,
        "jobVertexName": v.name,
        "slotSharingGroupId": v.ssg_id,
        "slotSharingGroupName": v.ssg_name,
        "desiredParallelism": v.desired,
        "sufficientParallelism": v.sufficient,
        "preRescaleParallelism": v.pre,
        "postRescaleParallelism": v.post,
    }


def _slots(s: SlotRescale) -> dict[str, Any]:
    return {
        "slotSharingGroupId": s.ssg_id,
        "slotSharingGroupName": s.ssg_name,
        "requestResourceProfile": None,  # UNKNOWN, as Flink requests by default
        "desiredSlots": s.desired,
        "minimalRequiredSlots": s.minimal,
        "preRescaleSlots": s.pre,
        "postRescaleSlots": s.post,
        "acquiredResourceProfile": profile_to_record(s.acquired_profile),
    }


def _span(s: StateSpan) -> dict[str, Any]:
    return {
        "state": s.state,
        "enterTimestampInMillis": s.enter,
        "leaveTimestampInMillis": s.leave,
        "durationInMillis": None if s.leave is None else s.leave - s.enter,
        "stringifiedException": s.exception,
    }


def _phase(p: PhaseSpan) -> dict[str, Any]:
    return {
        "phase": p.phase,
        "state": p.state,
        "enterTimestampInMillis": p.enter,
        "leaveTimestampInMillis": p.leave,
        "durationInMillis": None if p.leave is None else p.leave - p.enter,
    }
