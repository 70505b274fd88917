"""The Flink backend's pure parts: routing, the autoscaler's bounds, the idle choice."""

from __future__ import annotations

from services.actuator.flinkbackend import (
    autoscaler_bounds,
    flink_job_id,
    holds_slots,
    idle_choice,
    parallelism_targets,
)
from services.contracts.commands import ScalingAction, ScalingCommand


def bounds(lower: int, upper: int) -> dict[str, dict[str, int]]:
    return {"parallelism": {"lowerBound": lower, "upperBound": upper}}


def set_parallelism(amount: int, targets: dict[str, int] | None = None) -> ScalingCommand:
    return ScalingCommand(
        command_id="p-1",
        job_id="local.j",
        action=ScalingAction.SET_PARALLELISM,
        amount=amount,
        reason="test",
        issued_at_millis=0,
        parallelism=targets or {},
    )


def test_a_job_is_routed_by_its_cluster_prefix_only() -> None:
    assert flink_job_id("local", "local.cc408c8079b82a80a401c5ac85881e95") == (
        "cc408c8079b82a80a401c5ac85881e95"
    )
    assert flink_job_id("local", "other.cc40") is None
    assert flink_job_id("local", "local") is None
    assert flink_job_id("local", "localx.cc40") is None


def test_bounds_follow_the_kubernetes_operator_autoscaler() -> None:
    """upper = target, lower = min(target, current lower); the rest of the map unchanged."""
    current = {"a": bounds(3, 8), "b": bounds(1, 4), "c": bounds(2, 2)}
    assert autoscaler_bounds(current, {"a": 2, "b": 6}) == {"a": (2, 2), "b": (1, 6), "c": (2, 2)}
    assert autoscaler_bounds(current, {}) == {"a": (3, 8), "b": (1, 4), "c": (2, 2)}


def test_targets_are_the_map_and_the_amount_for_the_vertices_it_leaves_out() -> None:
    vertices = ["a", "b"]
    command = set_parallelism(4, {"a": 2})
    assert parallelism_targets(command, vertices) == {"a": 2, "b": 4}
    assert parallelism_targets(set_parallelism(0, {"a": 2}), vertices) == {"a": 2}
    assert parallelism_targets(set_parallelism(3), vertices) == {"a": 3, "b": 3}


def test_a_release_chooses_only_idle_taskmanagers_it_runs_within_the_amount() -> None:
    listed = [
        {"id": "tm-1", "slotsNumber": 1, "freeSlots": 0},  # busy
        {"id": "tm-2", "slotsNumber": 1, "freeSlots": 1},
        {"id": "tm-3", "slotsNumber": 2, "freeSlots": 2},
        {"id": "theirs", "slotsNumber": 1, "freeSlots": 1},  # not the launcher's
    ]
    ours = {"tm-1", "tm-2", "tm-3"}
    assert idle_choice(listed, ours, 1) == ["tm-2"]
    assert idle_choice(listed, ours, 3) == ["tm-3", "tm-2"]
    assert idle_choice(listed[:1], ours, 5) == []


def test_a_taskmanager_holding_a_slot_of_any_job_is_busy() -> None:
    assert holds_slots({"allocatedSlots": [{"jobId": "j"}], "slotsNumber": 1, "freeSlots": 1})
    assert not holds_slots({"allocatedSlots": [], "slotsNumber": 1, "freeSlots": 1})
    assert holds_slots({"slotsNumber": 2, "freeSlots": 1})  # no allocatedSlots: by the counts
