"""The rescale timeline (FLIP-495; Flink's timeline package), immutable.

A `Timeline` holds the rescale in progress and what later rescales need from
earlier ones; the rescale records themselves leave the scheduler as effects and
live on in Kafka and the Parquet history. Flink's bounded history
(`web.adaptive-scheduler.rescale-history.size`) is the last N rescales, whose ids
`recent_ids` derives from the count of rescales created (so they are not stored);
size 0 is Flink's NoOpRescaleTimeline, whose `is_idling` is false, so no rescale
is ever opened.

Ids are derived from the job id and counters (uuid5), never drawn at random, so
folding the same log twice yields the same rescaleUuids.
"""

from __future__ import annotations

import hashlib
import uuid
from functools import lru_cache
from typing import Final, TypeVar

from services.scheduler.core.allocator import ssg_metas
from services.scheduler.core.enums import TerminalState, TerminatedReason
from services.scheduler.core.model import (
    Assignment,
    Completed,
    JobInformation,
    Plan,
    Rescale,
    Slot,
    SlotRescale,
    StateSpan,
    Timeline,
    VertexRescale,
)
from services.scheduler.core.structs import replace

_T = TypeVar("_T")
NAMESPACE: Final = uuid.UUID("6b1f3c2e-8d4a-5e7b-9c0d-1a2b3c4d5e6f")


_NAMESPACE_BYTES: Final = NAMESPACE.bytes
_VERSION_MASK: Final = ~(0xF000 << 64) & ~(0xC000 << 48)
_VERSION_5: Final = (0x5000 << 64) | (0x8000 << 48)


def derive_uuid(job_id: str, kind: str, number: int) -> str:
    """`str(uuid.uuid5(NAMESPACE, name))`, without the UUID object: the first 16 bytes of
    SHA-1(namespace + name) with version 5 and the RFC 4122 variant set, as hex groups
    (a rescale opens with one or two of these, and UUID's checks cost more than the hash)."""
    name = f"{job_id}/{kind}/{number}".encode()
    digest = hashlib.sha1(_NAMESPACE_BYTES + name, usedforsecurity=False).digest()
    value = (int.from_bytes(digest[:16]) & _VERSION_MASK) | _VERSION_5
    text = f"{value:032x}"
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"


def is_idling(timeline: Timeline) -> bool:
    """True when a new rescale may open; always False for the no-op timeline (size 0)."""
    return timeline.size > 0 and timeline.current is None


def terminated(rescale: Rescale) -> bool:
    """A rescale has terminated once it has a reason."""
    return rescale.reason is not None


def terminal_state(reason: TerminatedReason | None) -> TerminalState | None:
    """The terminal state a reason reports (RescaleTimeline's terminal state of a rescale)."""
    if reason is None:
        return None
    if reason is TerminatedReason.SUCCEEDED:
        return TerminalState.COMPLETED
    if reason is TerminatedReason.EXCEPTION_OCCURRED:
        return TerminalState.FAILED
    return TerminalState.IGNORED


def recent_ids(timeline: Timeline, job_id: str) -> tuple[str, ...]:
    """The ids of the last `size` rescales, oldest first: rescale n's id is derived from n."""
    first = max(1, timeline.created - timeline.size + 1)
    return tuple(derive_uuid(job_id, "rescale", n) for n in range(first, timeline.created + 1))


def new_rescale(timeline: Timeline, job_id: str, new_epoch: bool) -> Timeline:
    """RescaleTimeline.newRescale: a new requirements id and attempt 1, or attempt + 1."""
    if not is_idling(timeline):
        raise AssertionError("a new rescale may only open while the timeline is idling")
    epoch = timeline.requirements_epoch + 1 if new_epoch else timeline.requirements_epoch
    requirements = (
        derive_uuid(job_id, "requirements", epoch) if new_epoch else timeline.requirements_uuid
    )
    attempt = 1 if new_epoch else timeline.attempt + 1
    created = timeline.created + 1
    rescale = Rescale(derive_uuid(job_id, "rescale", created), requirements, attempt)
    return replace(
        timeline,
        current=rescale,
        requirements_uuid=requirements,
        requirements_epoch=epoch,
        attempt=attempt,
        created=created,
    )


def with_current(timeline: Timeline, changed: Rescale) -> Timeline:
    """The timeline with `changed` as its rescale in progress (RescaleTimeline.updateRescale,
    whose guard is Fold.update_rescale); a terminated rescale is counted and let go."""
    if not terminated(changed):
        return replace(timeline, current=changed)
    return _terminated(replace(timeline, current=None), changed)


def _terminated(timeline: Timeline, rescale: Rescale) -> Timeline:
    state = terminal_state(rescale.reason)
    if state is TerminalState.COMPLETED:
        done = Completed(
            tuple([(v.vertex_id, v.post) for v in rescale.vertices]),
            tuple([(s.ssg_id, s.post) for s in rescale.slots]),
        )
        return replace(timeline, completed=timeline.completed + 1, latest_completed=done)
    if state is TerminalState.FAILED:
        return replace(timeline, failed=timeline.failed + 1)
    return replace(timeline, ignored=timeline.ignored + 1)


# Rescale setters: each returns a new Rescale (Flink's fluent setters, immutable).


def add_state_span(rescale: Rescale, span: StateSpan) -> Rescale:
    """addSchedulerState: appended while in progress; a terminated rescale ignores it.

    Flink's transient `stringifiedException`, which the next span would take, is only
    ever set where no span follows (goToFailing after terminating; Executing's
    "Resources must be available" before it throws), so scalefold has no such field.
    """
    if terminated(rescale):
        return rescale
    return replace(rescale, spans=(*rescale.spans, span))


def terminate(rescale: Rescale, reason: TerminatedReason, end: int) -> Rescale:
    """setTerminatedReason + setEndTimestamp; the open transition phase ends with it."""
    return replace(close_phases(rescale, end), reason=reason, end=end)


def close_phases(rescale: Rescale, at: int) -> Rescale:
    """End the open transition-phase span, if any, at `at`."""
    if not rescale.phases or rescale.phases[-1].leave is not None:
        return rescale
    last = replace(rescale.phases[-1], leave=at)
    return replace(rescale, phases=(*rescale.phases[:-1], last))


def set_requirements(rescale: Rescale, info: JobInformation) -> Rescale:
    """setDesiredSlots + setDesiredVertexParallelism + setMinimalRequiredSlots."""
    if not rescale.vertices and not rescale.slots:  # a new rescale: rows from `info` alone
        vertices, slots = _requirement_rows(info)
    else:
        vertices, slots = _with_requirements(rescale.vertices, rescale.slots, info)
    return replace(rescale, vertices=vertices, slots=slots)


@lru_cache(maxsize=2048)
def _requirement_rows(
    info: JobInformation,
) -> tuple[tuple[VertexRescale, ...], tuple[SlotRescale, ...]]:
    """The rows of a rescale that has none yet, built once per job information."""
    return _with_requirements((), (), info)


def _with_requirements(
    known_vertices: tuple[VertexRescale, ...],
    known_slots: tuple[SlotRescale, ...],
    info: JobInformation,
) -> tuple[tuple[VertexRescale, ...], tuple[SlotRescale, ...]]:
    vertices = {v.vertex_id: v for v in known_vertices}
    for vertex, bounds in zip(info.vertices, info.bounds, strict=True):
        known = vertices.get(vertex.id) or VertexRescale(
            vertex.id, vertex.name, vertex.ssg_id, vertex.ssg_name
        )
        vertices[vertex.id] = replace(known, desired=bounds.upper, sufficient=bounds.lower)
    slots = {s.ssg_id: s for s in known_slots}
    for meta in ssg_metas(info):
        group = slots.get(meta.id) or SlotRescale(meta.id, meta.name)
        slots[meta.id] = replace(group, desired=meta.max_upper, minimal=meta.max_lower)
    return _sorted(vertices), _sorted(slots)


def set_pre_rescale(rescale: Rescale, info: JobInformation, latest: Completed | None) -> Rescale:
    """setPreRescaleSlotsAndParallelisms from the latest COMPLETED rescale, if any."""
    if latest is None:
        return rescale
    vertex_post = dict(latest.vertex_post)
    slot_post = dict(latest.slot_post)
    rescale = set_requirements(rescale, info) if not rescale.vertices else rescale
    vertices = tuple([replace(v, pre=vertex_post.get(v.vertex_id)) for v in rescale.vertices])
    slots = tuple([replace(s, pre=slot_post.get(s.ssg_id)) for s in rescale.slots])
    return replace(rescale, vertices=vertices, slots=slots)


def set_post_rescale(
    rescale: Rescale,
    info: JobInformation,
    plan: Plan,
    assignment: Assignment,
    pool: dict[str, Slot],
) -> Rescale:
    """setPostRescaleVertexParallelism + setPostRescaleSlots."""
    rescale = set_requirements(rescale, info) if not rescale.vertices else rescale
    post = {v.id: p for v, p in zip(info.vertices, plan.parallelism, strict=True)}
    vertices = tuple([replace(v, post=post.get(v.vertex_id)) for v in rescale.vertices])
    assigned = dict(assignment.groups)
    slots = tuple(
        [
            replace(
                s,
                post=len(assigned.get(s.ssg_id, ())),
                acquired_profile=pool[assigned[s.ssg_id][0]].profile
                if assigned.get(s.ssg_id)
                else None,
            )
            for s in rescale.slots
        ]
    )
    return replace(rescale, vertices=vertices, slots=slots)


def _sorted(items: dict[str, _T]) -> tuple[_T, ...]:
    return tuple([items[key] for key in sorted(items)])
