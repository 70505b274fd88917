"""The planner's state folded from rescale records: order-insensitive, bounded. Pure."""

from __future__ import annotations

from dataclasses import replace

from services.history.jobview import Rescale
from services.history.planstate import PlannerState
from tests.history.test_planner import NOW, completed, waiting

HOUR = 3_600_000


def state() -> PlannerState:
    return PlannerState(flap_window_ms=HOUR, lookback_ms=48 * HOUR)


def test_a_later_revision_replaces_an_earlier_one_and_never_the_reverse() -> None:
    planner = state()
    first = waiting(revision=1, kafka_offset=10, available=0)
    second = replace(first, revision=2, kafka_offset=11, available_slots=4)
    assert planner.fold([first, second]) == 1
    version = planner.version
    assert planner.fold([first]) == 0  # an old one arriving late changes nothing
    assert planner.fold([second]) == 0  # nor a repeat (a restart reads an overlap)
    assert planner.version == version
    assert [r.available_slots for r in planner.ours()] == [4]
    # equal revisions (v1 records): the message written last wins
    resent = replace(second, kafka_offset=12, available_slots=5)
    assert planner.fold([resent]) == 1
    assert [r.available_slots for r in planner.ours()] == [5]


def test_flinks_records_are_kept_apart_from_scalefolds() -> None:
    planner = state()
    ours = waiting(revision=3)
    planner.fold([ours])
    planner.fold([replace(ours, revision=1, available_slots=None)], flink=True)
    assert [r.revision for r in planner.ours()] == [3]
    assert [r.revision for r in planner.flink()] == [1]


def test_only_what_the_rules_read_is_kept_per_job() -> None:
    """In progress, the latest terminated, the COMPLETED ones of the flapping window."""
    planner = state()
    old = completed(ended_ms_ago=3 * HOUR, uuid="old")
    recent = [completed(ended_ms_ago=(10 - i) * 60_000, uuid=f"r-{i}") for i in range(3)]
    failed = completed(ended_ms_ago=60_000, uuid="failed", terminal_state="FAILED")
    running = waiting(rescale_uuid="now")
    planner.fold([old, *recent, failed, running])
    kept = {r.rescale_uuid for r in planner.ours()}
    assert kept == {"r-0", "r-1", "r-2", "failed", "now"}


def test_a_job_with_no_change_for_the_lookback_is_forgotten() -> None:
    planner = state()
    planner.fold([completed(uuid="a")])
    planner.fold([replace(completed(uuid="b"), job_id="other", updated_at_ms=NOW - 49 * HOUR)])
    assert planner.forget_idle(NOW) == ["other"]
    assert {r.job_id for r in planner.ours()} == {"job"}
    assert isinstance(planner.ours()[0], Rescale)
