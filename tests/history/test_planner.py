"""The planner's rules, each at its boundary: pure, no Spark, no broker."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from services.contracts import Codec
from services.contracts import records as r
from services.contracts.commands import ScalingCommand
from services.history.jobview import (
    PROVISION,
    RAISE_COOLDOWN,
    RELEASE,
    PlannerConfig,
    Rescale,
)
from services.history.planner import command_id, plan

NOW = 1_800_000_000_000
CONFIG = PlannerConfig()
SECOND = 1_000


def waiting(
    waited_ms: int = 60 * SECOND, available: int = 2, minimal: int = 4, desired: int = 8, **kw: Any
) -> Rescale:
    """An in-progress rescale whose open span is WaitingForResources, entered `waited_ms` ago."""
    fields: dict[str, Any] = {
        "job_id": "job",
        "rescale_uuid": "r-wait",
        "updated_at_ms": NOW - 1_000,
        "start_timestamp_ms": NOW - waited_ms - 5_000,
        "end_timestamp_ms": None,
        "terminal_state": None,
        "available_slots": available,
        "reactive_mode": False,
        "cooldown_ms": None,
        "total_desired_slots": desired,
        "total_minimal_required_slots": minimal,
        "total_post_rescale_slots": None,
        "current_state": "WaitingForResources",
        "current_state_enter_ms": NOW - waited_ms,
        "current_state_open": True,
    }
    fields.update(kw)
    return Rescale(**fields)


def completed(
    ended_ms_ago: int = 300 * SECOND,
    post: int = 4,
    desired: int = 4,
    available: int = 4,
    uuid: str = "r-done",
    **kw: Any,
) -> Rescale:
    end = NOW - ended_ms_ago
    fields: dict[str, Any] = {
        "rescale_uuid": uuid,
        "start_timestamp_ms": end - 10_000,
        "end_timestamp_ms": end,
        "updated_at_ms": end,
        "terminal_state": "COMPLETED",
        "available_slots": available,
        "total_post_rescale_slots": post,
        "total_desired_slots": desired,
        "total_minimal_required_slots": 1,
        "current_state": "Executing",
        "current_state_enter_ms": end,
        "current_state_open": False,
    }
    fields.update(kw)
    return replace(waiting(), **fields)


def actions(rows: list[Rescale], config: PlannerConfig = CONFIG) -> list[tuple[str, int]]:
    return [(c.action, c.amount) for c in plan(rows, NOW, config)]


# PROVISION_TASK_MANAGERS while waiting for resources


def test_waiting_below_minimum_for_the_grace_period_provisions_the_gap_to_desired() -> None:
    assert actions([waiting(waited_ms=30 * SECOND)]) == [(PROVISION, 6)]


def test_waiting_one_millisecond_less_than_the_grace_period_provisions_nothing() -> None:
    assert actions([waiting(waited_ms=30 * SECOND - 1)]) == []


def test_waiting_with_the_minimum_available_provisions_nothing() -> None:
    assert actions([waiting(available=4, minimal=4)]) == []
    assert actions([waiting(available=3, minimal=4)]) == [(PROVISION, 5)]


def test_only_an_open_waiting_span_counts() -> None:
    assert actions([waiting(current_state="Restarting")]) == []
    assert actions([waiting(current_state_open=False)]) == []


def test_provisioning_is_capped_by_the_pool_limit() -> None:
    assert actions([waiting(available=30, minimal=31, desired=40)]) == [(PROVISION, 2)]
    assert actions([waiting(available=32, minimal=33, desired=40)]) == []


def test_unknown_pool_size_provisions_nothing() -> None:
    """A v1 writer does not report availableSlots: no evidence, no command."""
    assert actions([waiting(available=None)]) == []


# PROVISION_TASK_MANAGERS after a rescale that completed below desired


def test_completed_below_desired_provisions_after_the_grace_period() -> None:
    row = completed(ended_ms_ago=30 * SECOND, post=4, desired=8, available=4)
    assert actions([row]) == [(PROVISION, 4)]
    assert actions([replace(row, end_timestamp_ms=NOW - 30 * SECOND + 1)]) == []


def test_completed_at_desired_provisions_nothing() -> None:
    assert actions([completed(post=8, desired=8, available=8)]) == []


def test_reactive_jobs_are_not_provisioned_unless_asked() -> None:
    row = completed(post=4, desired=128, available=4, reactive_mode=True)
    assert actions([row]) == []
    assert actions([row], replace(CONFIG, provision_reactive=True)) == [(PROVISION, 28)]


def test_a_newer_rescale_in_progress_defers_below_desired_provisioning() -> None:
    done = completed(post=4, desired=8, available=4)
    newer = waiting(waited_ms=1_000, available=4, minimal=2, rescale_uuid="r-new")
    assert actions([done, newer]) == []


def test_below_desired_with_the_desired_slots_available_provisions_nothing() -> None:
    assert actions([completed(post=4, desired=8, available=8)]) == []


# RELEASE_TASK_MANAGERS


def test_idle_slots_are_released_after_the_release_grace() -> None:
    row = completed(ended_ms_ago=120 * SECOND, post=4, desired=4, available=6)
    assert actions([row]) == [(RELEASE, 2)]
    assert actions([replace(row, end_timestamp_ms=NOW - 120 * SECOND + 1)]) == []


def test_no_idle_slots_no_release() -> None:
    assert actions([completed(post=4, desired=4, available=4)]) == []
    assert actions([completed(post=4, desired=4, available=5)]) == [(RELEASE, 1)]


def test_no_release_while_a_rescale_is_in_progress_or_after_a_failure() -> None:
    done = completed(post=4, desired=4, available=6)
    running = waiting(available=6, minimal=2, rescale_uuid="r-run")
    assert actions([done, running]) == []
    assert actions([replace(done, terminal_state="FAILED")]) == []


def test_a_job_below_desired_keeps_its_idle_slots_for_the_next_rescale() -> None:
    row = completed(post=4, desired=8, available=6)
    assert actions([row]) == [(PROVISION, 2)]


# RAISE_COOLDOWN


def flapping(
    slots: list[int], cooldown_ms: int | None = None, spacing: int = 60_000
) -> list[Rescale]:
    """Completed rescales `spacing` apart, the last ending 10 minutes ago, with these post slots."""
    count = len(slots)
    return [
        completed(
            ended_ms_ago=600 * SECOND + (count - 1 - i) * spacing,
            post=s,
            desired=s,
            available=s,
            uuid=f"r-{i}",
            cooldown_ms=cooldown_ms,
        )
        for i, s in enumerate(slots)
    ]


def test_three_reversals_raise_the_cooldown_from_the_default() -> None:
    assert actions(flapping([2, 4, 2, 4, 2])) == [(RAISE_COOLDOWN, 60_000)]


def test_two_reversals_are_not_flapping() -> None:
    assert actions(flapping([2, 4, 2, 4])) == []
    assert actions(flapping([2, 4, 6, 4, 4, 2])) == []  # one reversal; flat steps do not count


def test_the_new_cooldown_doubles_and_is_capped() -> None:
    assert actions(flapping([2, 4, 2, 4, 2], cooldown_ms=100_000)) == [(RAISE_COOLDOWN, 200_000)]
    assert actions(flapping([2, 4, 2, 4, 2], cooldown_ms=400_000)) == [(RAISE_COOLDOWN, 600_000)]
    assert actions(flapping([2, 4, 2, 4, 2], cooldown_ms=600_000)) == []


def test_a_raised_cooldown_needs_new_flapping_under_it() -> None:
    before = flapping([2, 4, 2, 4, 2])  # flapped under the default cooldown: raised to 60 s
    after = [
        replace(
            row, rescale_uuid=f"after-{i}", end_timestamp_ms=NOW - 60_000 + i, cooldown_ms=60_000
        )
        for i, row in enumerate(flapping([4, 2, 4, 2]))
    ]  # two reversals since: failovers, which no cooldown prevents
    assert actions(before + after) == []
    more = replace(
        after[-1], rescale_uuid="after-4", end_timestamp_ms=NOW - 1_000, total_post_rescale_slots=4
    )
    assert actions(before + after + [more]) == [(RAISE_COOLDOWN, 120_000)]


def test_only_rescales_within_the_hour_before_the_latest_count() -> None:
    at_the_edge = flapping([2, 4, 2, 4, 2], spacing=15 * 60_000)  # first ends exactly 1 h earlier
    assert actions(at_the_edge) == [(RAISE_COOLDOWN, 60_000)]
    beyond = flapping([2, 4, 2, 4, 2], spacing=15 * 60_000 + 1)
    assert actions(beyond) == []


def test_cooldown_evidence_is_the_window_and_the_time_its_newest_record() -> None:
    rows = flapping([2, 4, 2, 4, 2])
    (command,) = plan(rows, NOW, CONFIG)
    assert command.evidence == tuple(f"r-{i}" for i in range(5))
    assert command.issued_at_millis == max(row.updated_at_ms for row in rows)


# Commands as data


def test_command_ids_are_stable_and_name_job_action_evidence_and_facts() -> None:
    first = plan([waiting()], NOW, CONFIG)
    later = plan([replace(waiting(), updated_at_ms=NOW)], NOW + 60_000, CONFIG)
    assert first[0].command_id == later[0].command_id
    assert first[0].command_id == command_id("job", PROVISION, ["r-wait"], [2, 8])
    assert first[0].command_id.startswith("provision-")
    # the same rescale with other slots seen is a new decision, a new command
    (other,) = plan([waiting(available=3)], NOW, CONFIG)
    assert other.command_id == command_id("job", PROVISION, ["r-wait"], [3, 8])
    assert other.command_id != first[0].command_id
    assert command_id("job", PROVISION, ["a"]) != command_id("job", PROVISION, ["b"])
    assert command_id("job", PROVISION, ["a"]) != command_id("other", PROVISION, ["a"])
    assert command_id("job", RELEASE, ["a"]).startswith("release-")


def test_commands_fit_the_scaling_command_schema(codec: Codec) -> None:
    rows = [
        waiting(),
        *[replace(row, job_id="flappy") for row in flapping([2, 4, 2, 4, 2])],
        replace(completed(post=4, desired=4, available=6), job_id="idle"),
    ]
    commands = plan(rows, NOW, CONFIG)
    assert sorted(c.action for c in commands) == sorted([PROVISION, RAISE_COOLDOWN, RELEASE])
    for command in commands:
        codec.validate(r.SCALING_COMMAND, command.to_record())
        assert command.reason.endswith(".")
        decoded = codec.decode(codec.encode(r.SCALING_COMMAND, command.to_record())).record
        assert ScalingCommand.from_record(decoded) == command
        assert command.parallelism == {}  # SET_PARALLELISM's targets only


def test_rows_from_the_view_are_accepted_as_mappings() -> None:
    row = {**waiting().__dict__, "revision": 3, "extra_column": "ignored"}
    assert [c.action for c in plan([row], NOW, CONFIG)] == [PROVISION]


@pytest.mark.parametrize("state", ["FAILED", "IGNORED"])
def test_only_completed_rescales_lead_to_provisioning_below_desired(state: str) -> None:
    assert actions([completed(post=4, desired=8, available=4, terminal_state=state)]) == []


def test_a_job_observed_on_a_real_flink_is_never_commanded() -> None:
    """The bridge's jobs (`scalefold.observed-cluster` in their settings) are predicted in
    shadow mode only: the same rescales that provision, release and raise the cooldown
    for a job of scalefold's own plan nothing for them."""
    observed = {"scalefold.observed-cluster": "local", "jobmanager.scheduler": "adaptive"}
    flapping = [
        completed(ended_ms_ago=(10 - i) * 60 * SECOND, post=2 + i % 2, uuid=f"r-{i}")
        for i in range(6)
    ]
    cases = [[waiting()], [completed(post=2, desired=4, available=2)], [completed(available=9)]]
    for rows in [*cases, flapping]:
        assert plan(rows, NOW, CONFIG), "the rule must fire for a job of scalefold's own"
        marked = [replace(r, scheduler_settings=observed) for r in rows]
        assert plan(marked, NOW, CONFIG) == []
    other = {"jobmanager.scheduler": "adaptive"}
    assert plan([replace(waiting(), scheduler_settings=other)], NOW, CONFIG)


def test_the_observed_mark_is_read_from_the_views_rows() -> None:
    row = {**waiting().__dict__, "scheduler_settings": {"scalefold.observed-cluster": "c1"}}
    assert Rescale.from_row(row).observed
    assert plan([row], NOW, CONFIG) == []
    assert not Rescale.from_row({**row, "scheduler_settings": None}).observed


def test_a_commanded_flink_cluster_gets_the_same_commands() -> None:
    """`history run --command-flink local`: the jobs observed on `local` (whose actuator has
    a Flink backend) get what a job of scalefold's own would; other clusters' jobs none."""
    commanded = replace(CONFIG, commanded_clusters=frozenset({"local"}))
    for cluster, expected in (("local", True), ("elsewhere", False)):
        settings = {"scalefold.observed-cluster": cluster}
        rows = [replace(waiting(), scheduler_settings=settings)]
        commands = plan(rows, NOW, commanded)
        assert bool(commands) is expected
        assert all(c.action is PROVISION for c in commands)
    assert (
        Rescale.from_row(
            {**waiting().__dict__, "scheduler_settings": {"scalefold.observed-cluster": "c1"}}
        ).cluster
        == "c1"
    )


# What a command rests on, and when the planner may decide at all


def test_a_command_carries_its_basis_the_revision_and_slots_it_saw_and_when() -> None:
    row = waiting(available=2, minimal=4, desired=8, revision=7, updated_at_ms=NOW - 3_000)
    (command,) = plan([row], NOW, CONFIG, fresh_as_of_ms=NOW - 400)
    basis = command.basis
    assert basis is not None
    assert (basis.rescale_uuid, basis.revision, basis.state) == ("r-wait", 7, "WaitingForResources")
    assert (basis.available_slots, basis.minimal_required_slots, basis.desired_slots) == (2, 4, 8)
    assert (basis.observed_at_millis, basis.decided_at_millis) == (NOW - 3_000, NOW)
    assert basis.fresh_as_of_millis == NOW - 400
    done = completed(post=4, desired=4, available=6, revision=2)
    (release,) = plan([done], NOW, CONFIG)
    assert release.basis is not None
    assert (release.basis.state, release.basis.post_rescale_slots) == ("COMPLETED", 4)


def test_nothing_is_decided_from_a_view_older_than_the_staleness_bound() -> None:
    """Issue 46: a history paused for 30 s resumes with the record of a wait the job has
    long left; deciding on it would provision slots the job already has."""
    rows = [waiting(waited_ms=60 * SECOND)]
    bound = CONFIG.max_staleness_ms
    assert plan(rows, NOW, CONFIG, fresh_as_of_ms=NOW - bound)
    assert plan(rows, NOW, CONFIG, fresh_as_of_ms=NOW - bound - 1) == []


def _flink_side(row: Rescale, **kw: Any) -> Rescale:
    """Flink's own record of `row` (the bridge's `flink-rescales`), under the same job key."""
    return replace(row, **{"available_slots": None, "scheduler_settings": None, **kw})


def test_flinks_own_records_must_agree_before_a_commanded_job_is_provisioned() -> None:
    settings = {"scalefold.observed-cluster": "local"}
    commanded = replace(CONFIG, commanded_clusters=frozenset({"local"}))
    ours = replace(waiting(), scheduler_settings=settings)
    assert plan([ours], NOW, commanded, flink=[_flink_side(ours)])  # Flink waits too
    # Flink 2.3.0's record of an initial schedule still showing Created (the Flink demo)
    assert plan([ours], NOW, commanded, flink=[_flink_side(ours, current_state="Created")])
    # Flink has the job running: its rescale completed; ours still waits (a lagging view)
    running = _flink_side(completed(post=8, desired=8), rescale_uuid="flink-done")
    assert plan([ours], NOW, commanded, flink=[running]) == []
    executing = _flink_side(ours, current_state="Executing")
    assert plan([ours], NOW, commanded, flink=[executing]) == []
    assert plan([ours], NOW, commanded, flink=[]) != []  # no record of Flink's yet: ours stands


def test_flinks_own_records_hold_back_below_desired_and_release() -> None:
    settings = {"scalefold.observed-cluster": "local"}
    commanded = replace(CONFIG, commanded_clusters=frozenset({"local"}))
    below = replace(completed(post=2, desired=4, available=2), scheduler_settings=settings)
    assert plan([below], NOW, commanded, flink=[_flink_side(below)])
    at_desired = _flink_side(below, total_post_rescale_slots=4)
    assert plan([below], NOW, commanded, flink=[at_desired]) == []
    idle = replace(completed(post=4, desired=4, available=6), scheduler_settings=settings)
    assert plan([idle], NOW, commanded, flink=[_flink_side(idle)])
    busy = _flink_side(waiting(), rescale_uuid="flink-new")
    assert plan([idle], NOW, commanded, flink=[_flink_side(idle), busy]) == []
