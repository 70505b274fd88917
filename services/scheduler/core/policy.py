"""Scaling policies (seed 004's ScalingPolicy): which change a rescale may make.

A policy turns the parallelism the allocator can reach with the available slots
(the candidate) into the parallelism to run, given what runs now. Every policy
stays within the candidate, so its plan always fits the slots the candidate
was computed from. `FLINK`, the default, takes the candidate as it is: that is
Flink today, where any change of the computable parallelism counts.
"""

from __future__ import annotations

from collections.abc import Sequence

from services.contracts.jobconfig import ScalingPolicy
from services.scheduler.core.model import JobInformation


def adjust(
    policy: ScalingPolicy,
    info: JobInformation,
    current: Sequence[int] | None,
    candidate: Sequence[int],
    min_increase: int = 1,
) -> tuple[int, ...]:
    """The parallelism to run; equal to `current` when the policy declines the change."""
    if policy is ScalingPolicy.PROPORTIONAL:
        return _proportional(info, candidate)
    if current is None or policy is ScalingPolicy.FLINK or not _within(info, current):
        return tuple(candidate)  # a parallelism outside the bounds is never kept
    if policy is ScalingPolicy.MIN_INCREASE:
        return _min_increase(current, candidate, min_increase)
    return _double_halve(info, current, candidate)


def _within(info: JobInformation, parallelism: Sequence[int]) -> bool:
    return all(b.lower <= p <= b.upper for p, b in zip(parallelism, info.bounds, strict=True))


def _min_increase(
    current: Sequence[int], candidate: Sequence[int], min_increase: int
) -> tuple[int, ...]:
    """Flink 1.18's EnforceMinimalIncreaseRescalingController, per vertex."""
    scale_down = any(c < p for c, p in zip(candidate, current, strict=True))
    enough_up = any(c - p >= min_increase for c, p in zip(candidate, current, strict=True))
    return tuple(candidate) if scale_down or enough_up else tuple(current)


def _proportional(info: JobInformation, candidate: Sequence[int]) -> tuple[int, ...]:
    """Every vertex at the same fraction of its upper bound: the smallest fraction reachable."""
    fraction = min(c / b.upper for c, b in zip(candidate, info.bounds, strict=True))
    return tuple(
        min(c, max(b.lower, int(b.upper * fraction)))
        for c, b in zip(candidate, info.bounds, strict=True)
    )


def _double_halve(
    info: JobInformation, current: Sequence[int], candidate: Sequence[int]
) -> tuple[int, ...]:
    result = []
    for p, c, bounds in zip(current, candidate, info.bounds, strict=True):
        target = max(p, bounds.lower)
        while target * 2 <= c:
            target *= 2
        while target > c:
            target = max(bounds.lower, (target + 1) // 2)
        result.append(target)
    return tuple(result)
