"""The job's vertices, their parallelism bounds, and Flink's checks on changing them.

Mirrors AdaptiveScheduler's two vertex-parallelism stores: the requirements
(lower and upper bound per vertex, FLIP-291) and max parallelism, which is fixed
at submission and never changes (`testConsistentMaxParallelism`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from services.contracts.events import Requirement, VertexSpec
from services.scheduler.core.model import (
    Bounds,
    InvalidJobGraphError,
    JobInformation,
    RequirementsRejectedError,
    Vertex,
    shared,
)

LOWER_BOUND_MAX_PARALLELISM: Final = 128
UPPER_BOUND_MAX_PARALLELISM: Final = 32768
AUTO: Final = -1  # FLIP-291: -1 as lower bound means 1, as upper bound means max parallelism
MAX_PARALLELISM_DEFAULT: Final = -1  # JobVertex's "not set": computed from the parallelism
PARALLELISM_DEFAULT: Final = -1  # ExecutionConfig's "not set": normalized to 1
PARALLELISM_AUTO_MAX: Final = 2**31 - 1  # Integer.MAX_VALUE: the largest max parallelism, 32768


def round_up_to_power_of_two(value: int) -> int:
    return 1 if value <= 1 else 1 << (value - 1).bit_length()


def default_max_parallelism(parallelism: int) -> int:
    """KeyGroupRangeAssignment.computeDefaultMaxParallelism: 1.5 x p rounded up to a power
    of two, within [128, 32768]."""
    candidate = round_up_to_power_of_two(parallelism + parallelism // 2)
    return min(max(candidate, LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)


def _within_bounds(value: int) -> bool:
    return 0 < value <= UPPER_BOUND_MAX_PARALLELISM


def vertex_parallelism(spec: VertexSpec) -> int:
    """SchedulerBase.normalizeParallelism: -1 (not set) is 1; otherwise 1..32768."""
    if spec.parallelism == PARALLELISM_DEFAULT:
        return 1
    if not _within_bounds(spec.parallelism):
        raise InvalidJobGraphError(
            f"vertex {spec.id}: parallelism {spec.parallelism} is not within "
            f"1..{UPPER_BOUND_MAX_PARALLELISM} (or -1, not set)"
        )
    return spec.parallelism


def effective_max_parallelism(spec: VertexSpec) -> int:
    """SchedulerBase.computeVertexParallelismStore and DefaultVertexParallelismInfo.

    Not set (null, or JobVertex.MAX_PARALLELISM_DEFAULT = -1): the default computed
    from the vertex's parallelism. Integer.MAX_VALUE (PARALLELISM_AUTO_MAX): 32768.
    Anything else must lie within 1..32768.
    """
    maximum = spec.max_parallelism
    if maximum is None or maximum == MAX_PARALLELISM_DEFAULT:
        return default_max_parallelism(vertex_parallelism(spec))
    if maximum == PARALLELISM_AUTO_MAX:
        return UPPER_BOUND_MAX_PARALLELISM
    if not _within_bounds(maximum):
        raise InvalidJobGraphError(
            f"vertex {spec.id}: max parallelism {maximum} is not within "
            f"1..{UPPER_BOUND_MAX_PARALLELISM} (or -1, not set)"
        )
    return maximum


def job_information(specs: Sequence[VertexSpec], reactive: bool) -> JobInformation:
    """The initial stores: reactive mode asks for max parallelism, with lower bound 1."""
    if not specs:
        raise InvalidJobGraphError("the job graph has no vertices")
    ids = [spec.id for spec in specs]
    if len(set(ids)) != len(ids):
        raise InvalidJobGraphError(f"vertex ids are not unique: {', '.join(sorted(ids))}")
    vertices = []
    bounds = []
    for spec in specs:
        maximum = effective_max_parallelism(spec)
        # Reactive mode runs every vertex "as parallel as possible": at its max parallelism.
        parallelism = maximum if reactive else vertex_parallelism(spec)
        if parallelism > maximum:
            raise InvalidJobGraphError(
                f"vertex {spec.id}: parallelism {parallelism} exceeds max parallelism {maximum}"
            )
        vertices.append(Vertex(spec.id, spec.name, spec.ssg_id, spec.ssg_name, maximum))
        bounds.append(Bounds(1, parallelism))
    return shared(JobInformation(tuple(vertices), tuple(bounds)))


def validate_requirements(
    info: JobInformation, requirements: Sequence[Requirement]
) -> tuple[Bounds, ...]:
    """The new bounds (index-aligned with the vertices), or RequirementsRejectedError saying why."""
    if not requirements:
        raise RequirementsRejectedError("the update lists no vertex")
    known = {vertex.id: i for i, vertex in enumerate(info.vertices)}
    new: dict[int, Bounds] = {}
    for requirement in requirements:
        if requirement.vertex_id not in known:
            raise RequirementsRejectedError(
                f"vertex {requirement.vertex_id} is not part of the job"
            )
        index = known[requirement.vertex_id]
        if index in new:
            raise RequirementsRejectedError(f"vertex {requirement.vertex_id} is listed twice")
        new[index] = _bounds(info.vertices[index], requirement)
    missing = [v.id for i, v in enumerate(info.vertices) if i not in new]
    if missing:
        raise RequirementsRejectedError(
            f"the update must list every vertex; missing {', '.join(missing)}"
        )
    return tuple(new[i] for i in range(len(info.vertices)))


def _bounds(vertex: Vertex, requirement: Requirement) -> Bounds:
    lower = 1 if requirement.lower == AUTO else requirement.lower
    upper = vertex.max_parallelism if requirement.upper == AUTO else requirement.upper
    if lower < 1 or upper < 1:
        raise RequirementsRejectedError(
            f"vertex {vertex.id}: bounds must be at least 1 (or -1), "
            f"got {requirement.lower}..{requirement.upper}"
        )
    if lower > upper:
        raise RequirementsRejectedError(
            f"vertex {vertex.id}: lower bound {lower} is greater than upper bound {upper}"
        )
    if upper > vertex.max_parallelism:
        raise RequirementsRejectedError(
            f"vertex {vertex.id}: upper bound {upper} exceeds max parallelism "
            f"{vertex.max_parallelism}"
        )
    return Bounds(lower, upper)
