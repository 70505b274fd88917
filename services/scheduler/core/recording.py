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
from services.scheduler.core.structs import fields
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
    # Each Struct's fields in the order model.py declares them (the stored state's order
    # too: the Structs are array_like); a field added there fails these unpackings loudly.
    (
        uuid,
        requirements_uuid,
        attempt,
        vertices,
        slots,
        spans,
        phases,
        start,
        end,
        trigger,
        reason,
        revision,
        status,
    ) = fields(rescale)
    if not terminated(rescale):
        spans = (*spans, StateSpan(str(state.name), state.entered_at, None))
    state_reported = terminal_state(reason)
    return {
        "jobId": job.job_id,
        "rescaleUuid": uuid,
        "resourceRequirementsUuid": requirements_uuid,
        "rescaleAttemptId": attempt,
        "vertices": [_vertex(v) for v in vertices],
        "slots": [_slots(s) for s in slots],
        "schedulerStates": [_span(s) for s in spans],
        "startTimestampInMillis": start if start is not None else now,
        "endTimestampInMillis": end,
        "triggerCause": str(trigger or TriggerCause.INITIAL_SCHEDULE),
        "terminalState": str(state_reported) if state_reported else None,
        "terminatedReason": str(reason) if reason else None,
        "revision": revision,
        "updatedAtMillis": now,
        "transitionPhases": [_phase(p) for p in phases],
        "availableSlots": slot_count,
        "reactiveMode": config.reactive,
        "schedulerSettings": config.settings_snapshot(job.checkpoint_interval_ms),
        "statusMessage": status,
    }


def _vertex(v: VertexRescale) -> dict[str, Any]:
    vertex_id, name, ssg_id, ssg_name, desired, sufficient, pre, post = fields(v)
    return {
        "jobVertexId": vertex_id,
        "jobVertexName": name,
        "slotSharingGroupId": ssg_id,
        "slotSharingGroupName": ssg_name,
        "desiredParallelism": desired,
        "sufficientParallelism": sufficient,
        "preRescaleParallelism": pre,
        "postRescaleParallelism": post,
    }


def _slots(s: SlotRescale) -> dict[str, Any]:
    ssg_id, ssg_name, desired, minimal, pre, post, acquired = fields(s)
    return {
        "slotSharingGroupId": ssg_id,
        "slotSharingGroupName": ssg_name,
        "requestResourceProfile": None,  # UNKNOWN, as Flink requests by default
        "desiredSlots": desired,
        "minimalRequiredSlots": minimal,
        "preRescaleSlots": pre,
        "postRescaleSlots": post,
        "acquiredResourceProfile": profile_to_record(acquired),
    }


def _span(s: StateSpan) -> dict[str, Any]:
    state, enter, leave, exception = fields(s)
    return {
        "state": state,
        "enterTimestampInMillis": enter,
        "leaveTimestampInMillis": leave,
        "durationInMillis": None if leave is None else leave - enter,
        "stringifiedException": exception,
    }


def _phase(p: PhaseSpan) -> dict[str, Any]:
    phase, state, enter, leave = fields(p)
    return {
        "phase": phase,
        "state": state,
        "enterTimestampInMillis": enter,
        "leaveTimestampInMillis": leave,
        "durationInMillis": None if leave is None else leave - enter,
    }
