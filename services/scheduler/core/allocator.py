"""Slot allocation (Flink's SlotSharingSlotAllocator), as pure functions.

Slot-sharing groups (SSGs) are sized from their vertices' bounds:
`maxLowerBound = max(lower)`, `maxUpperBound = max(upper)`. `determine_parallelism`
shares the slots among groups in order of ascending range, and the last of groups
with equal ranges gets what is left over. Flink 2.3.0 orders those by its HashMap's
iteration (SlotSharingSlotAllocator.determineSlotsPerSharingGroup sorts the entries of
SlotSharingGroupMetaInfo.from's HashMap, stably): `flink_order` reproduces it for Flink's
own group ids (32 hex digits, as the bridge submits them); other ids tie by id.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache
from operator import attrgetter

from services.contracts.ordering import natural_key
from services.scheduler.core.model import Assignment, JobInformation, Plan, Slot, SsgMeta


@lru_cache(maxsize=2048)
def ssg_metas(info: JobInformation) -> tuple[SsgMeta, ...]:
    """SlotSharingGroupMetaInfo.from(vertices), sorted by SSG id."""
    lower: dict[str, int] = {}
    upper: dict[str, int] = {}
    names: dict[str, str] = {}
    for vertex, bounds in zip(info.vertices, info.bounds, strict=True):
        lower[vertex.ssg_id] = max(lower.get(vertex.ssg_id, 0), bounds.lower)
        upper[vertex.ssg_id] = max(upper.get(vertex.ssg_id, 0), bounds.upper)
        names.setdefault(vertex.ssg_id, vertex.ssg_name)
    return tuple(SsgMeta(i, names[i], lower[i], upper[i]) for i in sorted(lower))


def desired_slots(info: JobInformation) -> int:
    """calculateRequiredSlots: the sum over SSGs of the max upper bound."""
    return sum(meta.max_upper for meta in ssg_metas(info))


def minimal_slots(info: JobInformation) -> int:
    """The sum over SSGs of the max lower bound."""
    return sum(meta.max_lower for meta in ssg_metas(info))


@lru_cache(maxsize=8192)
def determine_parallelism(info: JobInformation, slot_count: int) -> Plan | None:
    """Flink's determineParallelism for `slot_count` slots, None if the minimum does not fit."""
    metas = ssg_metas(info)
    min_required = sum(meta.max_lower for meta in metas)
    if min_required > slot_count:
        return None
    unassigned, groups_left, min_left = slot_count, len(metas), min_required
    slots_of: dict[str, int] = {}
    order = flink_order(info)
    for meta in sorted(metas, key=lambda m: (m.range, order.get(m.id, 0), m.id)):
        share = (unassigned - min_left) // groups_left
        slots_of[meta.id] = meta.max_lower + min(meta.range, share)
        min_left -= meta.max_lower
        unassigned -= slots_of[meta.id]
        groups_left -= 1
    parallelism = tuple(
        min(bounds.upper, slots_of[vertex.ssg_id])
        for vertex, bounds in zip(info.vertices, info.bounds, strict=True)
    )
    return plan_for(info, parallelism)


HEX_ID = re.compile(r"^[0-9a-f]{32}$")


@lru_cache(maxsize=2048)
def flink_order(info: JobInformation) -> dict[str, int]:
    """Each group's place in Flink's HashMap<SlotSharingGroup, _> iteration, or {} unless
    every group id is Flink's (an AbstractID in hex). SlotSharingGroup.hashCode is
    Objects.hash(id) = 31 + id.hashCode(), AbstractID.hashCode the XOR of its four 32-bit
    words; HashMap iterates by bucket ((h ^ h >>> 16) & (capacity - 1)), a bucket's keys
    in insertion order (the vertices' order). Capacity: 16, doubled past 3/4 full."""
    firsts = list(dict.fromkeys(vertex.ssg_id for vertex in info.vertices))
    if not all(HEX_ID.match(i) for i in firsts):
        return {}
    capacity = 16
    while len(firsts) > capacity * 3 // 4:
        capacity *= 2

    def bucket(hex_id: str) -> int:
        words = 0
        for start in range(0, 32, 8):
            words ^= int(hex_id[start : start + 8], 16)
        h = (31 + words) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    ranked = sorted(range(len(firsts)), key=lambda n: (bucket(firsts[n]), n))
    return {firsts[n]: place for place, n in enumerate(ranked)}


def plan_for(info: JobInformation, parallelism: Sequence[int]) -> Plan:
    """The plan of a vertex parallelism: each SSG needs its largest vertex's parallelism."""
    slots_of: dict[str, int] = {}
    for vertex, p in zip(info.vertices, parallelism, strict=True):
        slots_of[vertex.ssg_id] = max(slots_of.get(vertex.ssg_id, 0), p)
    return Plan(tuple(parallelism), tuple(sorted(slots_of.items())))


def assign(
    plan: Plan, free: Iterable[Slot], prefer_minimal_taskmanagers: bool
) -> Assignment | None:
    """DefaultSlotAssigner: give each execution slot-sharing group one free slot.

    With prefer-minimal-taskmanagers (and more free slots than needed), whole
    TaskManagers are taken in descending order of free slots, so the job spreads
    over as few TaskManagers as possible; ties go by TaskManager id. Flink only
    does this for `execution.target: embedded`; scalefold whenever the option is on.
    Free slots are taken in natural TaskManager-id order (`tm-2` before `tm-10`),
    then by slot index; Flink takes them in its slot pool's order.
    """
    candidates = _in_natural_order(free)
    wanted = sum([count for _, count in plan.group_slots])
    if wanted > len(candidates):
        return None
    if prefer_minimal_taskmanagers and len(candidates) > wanted:
        candidates = _fewest_taskmanagers(candidates, wanted)
    chosen = iter(candidates[:wanted])
    return Assignment(
        tuple(
            (ssg, tuple(next(chosen).id for _ in range(count))) for ssg, count in plan.group_slots
        )
    )


def slot_ids(assignment: Assignment) -> frozenset[str]:
    """Every slot an assignment holds."""
    return frozenset([slot for _, slots in assignment.groups for slot in slots])


def _in_natural_order(slots: Iterable[Slot]) -> list[Slot]:
    """The slots by (natural TaskManager id, index): TaskManagers sorted once each rather
    than a key per slot (natural_key is total, so the order is the same)."""
    by_tm = _by_task_manager(slots)
    by_index = attrgetter("index")
    return [
        slot for tm in sorted(by_tm, key=natural_key) for slot in sorted(by_tm[tm], key=by_index)
    ]


def _by_task_manager(slots: Iterable[Slot]) -> dict[str, list[Slot]]:
    """The slots grouped by TaskManager, each group in the order given."""
    by_tm: dict[str, list[Slot]] = {}
    for slot in slots:
        by_tm.setdefault(slot.task_manager_id, []).append(slot)
    return by_tm


def _fewest_taskmanagers(slots: list[Slot], needed: int) -> list[Slot]:
    ordered = sorted(
        _by_task_manager(slots).items(), key=lambda item: (-len(item[1]), natural_key(item[0]))
    )
    picked: list[Slot] = []
    for _, tm_slots in ordered:
        if len(picked) >= needed:
            break
        picked.extend(tm_slots)
    return picked
