"""The Flink backend: its pure parts (routing, the autoscaler's bounds, the idle choice, the
job's need), and a command's check against a fake Flink's REST answers and launcher."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import msgspec

from services.actuator.flinkbackend import (
    FlinkBackend,
    autoscaler_bounds,
    flink_job_id,
    holds_slots,
    idle_choice,
    parallelism_targets,
)
from services.actuator.flinkfacts import at_desired, needed_slots
from services.contracts.commands import (
    CommandBasis,
    ExpectedBounds,
    ScalingAction,
    ScalingCommand,
)


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


# -- a PROVISION or RELEASE checked against what Flink shows now (flinkfacts.py) ---------------

ANSWERS = Path(__file__).parents[1] / "bridge" / "answers"  # a real Flink 2.3.0's answers
JID = "cc408c8079b82a80a401c5ac85881e95"


def test_the_need_is_flinks_sum_over_slot_sharing_groups_of_the_max_upper_bound() -> None:
    job = json.loads((ANSWERS / "job.json").read_text())
    requirements = json.loads((ANSWERS / "resource-requirements.json").read_text())
    assert needed_slots(job, requirements) == 8  # two groups, each up to 4
    assert not at_desired(job, requirements)  # it runs at 2 and 1
    shared = {"vertices": [vertex("a", "g", 2), vertex("b", "g", 3), vertex("c", "h", 1)]}
    bounds = {"a": upper(4), "b": upper(3), "c": upper(1)}
    assert needed_slots(shared, bounds) == 5
    assert needed_slots({"vertices": [{"id": "a", "parallelism": 1}]}, bounds) is None


def vertex(vid: str, group: str, parallelism: int) -> dict[str, Any]:
    return {"id": vid, "slotSharingGroupId": group, "parallelism": parallelism}


def upper(bound: int) -> dict[str, Any]:
    return {"parallelism": {"lowerBound": 1, "upperBound": bound}}


class FakeFlink:
    """The REST answers the backend reads: a job of two slot-sharing groups wanting 2 + 2."""

    def __init__(self, *registered: str, state: str = "RUNNING", parallelism: int = 2) -> None:
        self.state = state
        self.vertices = [vertex("bucket", "g1", parallelism), vertex("sum", "g2", parallelism)]
        self.bounds = {"bucket": upper(2), "sum": upper(2)}
        self.listed = [{"id": tm, "slotsNumber": 1, "freeSlots": 0} for tm in registered]

    def job(self, jid: str) -> dict[str, Any]:
        return {"jid": jid, "state": self.state, "vertices": self.vertices}

    def requirements(self, jid: str) -> dict[str, Any]:
        return self.bounds

    def set_requirements(self, jid: str, bounds: dict[str, tuple[int, int]]) -> None:
        self.bounds = {
            v: {"parallelism": {"lowerBound": lo, "upperBound": up}}
            for v, (lo, up) in bounds.items()
        }

    def taskmanagers(self) -> list[dict[str, Any]]:
        return list(self.listed)

    def get_json(self, path: str) -> dict[str, Any]:
        return {"allocatedSlots": []}  # /taskmanagers/:id: idle


class FakeLauncher:
    """Starts TaskManagers that Flink lists at once; `unlisted` run but are not listed yet."""

    slots_per_taskmanager = 1
    max_taskmanagers = None

    def __init__(self, flink: FakeFlink, *unlisted: str, before: tuple[str, ...] = ()) -> None:
        self.flink, self.before = flink, set(before)
        self.up = [str(tm["id"]) for tm in flink.listed] + list(unlisted)
        self.started: list[str] = []
        self.stopped: list[str] = []

    def rest_url(self) -> str:
        return "http://flink.invalid"

    def start(self, tm: str) -> None:
        self.started.append(tm)
        self.up.append(tm)
        self.flink.listed.append({"id": tm, "slotsNumber": 1, "freeSlots": 1})

    def stop(self, tm: str) -> bool:
        self.stopped.append(tm)
        return True

    def running(self) -> list[str]:
        return list(self.up)

    def started_before(self, tm: str) -> bool:
        return tm in self.before

    def remember_release(self, command_id: str, ids: list[str]) -> None:
        pass

    def remembered_release(self, command_id: str) -> list[str] | None:
        return None


def backend(flink: FakeFlink, launcher: FakeLauncher, spare: int = 0) -> FlinkBackend:
    made = FlinkBackend("t", launcher.rest_url, launcher, spare_slots=spare)
    made._rest = lambda: flink  # the fake's answers instead of a JobManager's
    return made


def planned(
    action: ScalingAction, amount: int, command_id: str = "p-1", **seen: Any
) -> ScalingCommand:
    facts: dict[str, Any] = {
        "rescale_uuid": "afc103edd691c5267ae684fefa3ae972",
        "revision": 2,
        "state": "WaitingForResources",
        "observed_at_millis": 0,
        "decided_at_millis": 0,
        "fresh_as_of_millis": 0,
        **seen,
    }
    basis = CommandBasis(**facts)
    return ScalingCommand(
        command_id=command_id,
        job_id=f"t.{JID}",
        action=action,
        amount=amount,
        reason="test",
        issued_at_millis=0,
        basis=basis,
    )


PROVISION = ScalingAction.PROVISION_TASK_MANAGERS


def test_a_provision_decided_on_fewer_slots_than_flink_has_registered_is_superseded() -> None:
    """The issue's Flink side: a job running at its desired parallelism on 4 slots, a
    planner a minute behind that saw it waiting with none."""
    flink = FakeFlink("tm-1", "tm-2", "tm-3", "tm-4")
    launcher = FakeLauncher(flink)
    result = backend(flink, launcher).apply(planned(PROVISION, 4, available_slots=0))
    assert result.status == "SUPERSEDED"
    assert result.message == (
        f"Flink cluster t (job {JID} RUNNING at its desired parallelism) holds 4 slot(s) of "
        "registered TaskManagers and 0 more are starting; the command was decided on 0 "
        "slot(s) (WaitingForResources, rescale afc103ed revision 2)"
    )
    assert dict(result.details) == {
        "heldSlots": "4",
        "startingSlots": "0",
        "seenSlots": "0",
        "neededSlots": "4",
        "flink": "t",
    }
    assert launcher.started == []


def test_taskmanagers_the_launcher_started_that_flink_does_not_list_yet_are_starting() -> None:
    flink = FakeFlink("tm-1")
    launcher = FakeLauncher(flink, "tm-other-0", "tm-other-1")
    result = backend(flink, launcher).apply(planned(PROVISION, 3, available_slots=1))
    assert result.status == "SUPERSEDED" and "2 more are starting" in result.message
    assert launcher.started == []


def test_a_provision_is_capped_at_what_the_job_needs_plus_the_spare() -> None:
    flink = FakeFlink("tm-1", parallelism=1)
    launcher = FakeLauncher(flink)
    result = backend(flink, launcher, spare=1).apply(planned(PROVISION, 6, available_slots=1))
    assert result.status == "APPLIED", result
    assert launcher.started == ["tm-p-1-0", "tm-p-1-1", "tm-p-1-2", "tm-p-1-3"]
    assert result.message.endswith(
        "; capped from 6 to 4 slot(s): 1 held or starting, 4 needed + 1 spare"
    )


def test_a_provision_redone_after_a_crash_does_not_count_its_own_taskmanagers() -> None:
    """tm-p-1-0 was started (and registered) before the crash: checked as it was first."""
    flink = FakeFlink("tm-1", "tm-p-1-0", parallelism=1)
    launcher = FakeLauncher(flink, before=("tm-p-1-0",))
    result = backend(flink, launcher).apply(planned(PROVISION, 3, available_slots=1))
    assert result.status == "APPLIED", result
    assert launcher.started == ["tm-p-1-1", "tm-p-1-2"]


def test_an_operators_provision_without_a_basis_is_applied_unchecked() -> None:
    flink = FakeFlink("tm-1", "tm-2", "tm-3", "tm-4")
    launcher = FakeLauncher(flink)
    unchecked = msgspec.structs.replace(planned(PROVISION, 2), basis=None)
    assert backend(flink, launcher).apply(unchecked).status == "APPLIED"
    assert launcher.started == ["tm-p-1-0", "tm-p-1-1"]


def test_a_release_of_slots_gone_since_is_superseded_and_stops_none() -> None:
    flink = FakeFlink("tm-1", "tm-2", parallelism=1)
    launcher = FakeLauncher(flink)
    release = planned(
        ScalingAction.RELEASE_TASK_MANAGERS,
        1,
        state="COMPLETED",
        available_slots=5,
        post_rescale_slots=4,
    )
    result = backend(flink, launcher).apply(release)
    assert result.status == "SUPERSEDED" and "released or lost since" in result.message
    assert launcher.stopped == []


def test_a_job_that_ended_supersedes_a_planners_command_and_rejects_an_operators() -> None:
    flink = FakeFlink("tm-1", state="CANCELED")
    launcher = FakeLauncher(flink)
    planners = backend(flink, launcher).apply(planned(PROVISION, 1, available_slots=0))
    assert planners.status == "SUPERSEDED"
    assert planners.message.startswith(f"Flink's job {JID} (CANCELED) no longer runs")
    operators = msgspec.structs.replace(planned(PROVISION, 1), basis=None)
    assert backend(flink, launcher).apply(operators).status == "REJECTED"


def test_targets_decided_on_requirements_someone_else_changed_since_are_superseded() -> None:
    """The history's autoscaler sends the bounds it saw; a change by anyone else since (an
    operator, another autoscaler) is not overwritten."""
    seen = {v: ExpectedBounds(lower_bound=1, upper_bound=2) for v in ("bucket", "sum")}
    command = msgspec.structs.replace(
        set_parallelism(0, {"sum": 4}), job_id=f"t.{JID}", expected_requirements=seen
    )
    flink = FakeFlink()
    flink.bounds["sum"] = upper(3)  # someone raised it meanwhile
    result = backend(flink, FakeLauncher(flink)).apply(command)
    assert result.status == "SUPERSEDED"
    assert result.message.endswith("sum 1:2 -> 1:3")
    assert flink.bounds["sum"] == upper(3)  # untouched
    flink.bounds["sum"] = upper(2)  # as the decision saw it
    assert backend(flink, FakeLauncher(flink)).apply(command).status == "APPLIED"
    assert flink.bounds["sum"] == upper(4)
