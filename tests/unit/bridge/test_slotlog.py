"""Reading a TaskManager's log for when its slots reached a job (services/bridge/slotlog.py)."""

from __future__ import annotations

from pathlib import Path

from services.bridge import slotlog
from services.contracts.events import Window

CAPTURED = Path(__file__).parent / "answers" / "taskmanager-log.txt"
"""Flink 2.3.0's tm-2 joining a running job's cluster (the local stack, 2026-12-05)."""
JOB = "45efdee18c55743474cf931ea08f6b38"
REGISTERED = 1796488320834  # 2026-12-05 16:32:00,834 UTC


def test_flinks_own_log_gives_the_offer_and_its_acceptance() -> None:
    read = slotlog.read(CAPTURED.read_text(), JOB)
    assert read == slotlog.Offered(
        REGISTERED, REGISTERED + 157, REGISTERED + 207, requested=REGISTERED + 98
    )
    # the bridge's listing showed it 110 ms after the registration line
    shift = slotlog.clock_shift(read, Window(REGISTERED - 150, REGISTERED + 110), None)
    assert shift == 0
    assert slotlog.on_the_epoch(read, shift) == Window(REGISTERED + 156, REGISTERED + 207)


def test_another_jobs_offer_is_not_this_ones() -> None:
    read = slotlog.read(CAPTURED.read_text(), "0" * 32)
    assert read == slotlog.Offered(REGISTERED)
    assert slotlog.on_the_epoch(read, 0) is None
    # nor can its clock be placed by the other job's start: no slot request of its
    assert slotlog.clock_shift(read, None, REGISTERED) is None


def test_the_logs_zone_is_taken_out_in_quarter_hours() -> None:
    read = slotlog.read(CAPTURED.read_text(), JOB)
    assert read is not None
    india = 5 * 3_600_000 + 30 * 60_000  # a log in UTC+5:30 reads 5 h 30 later
    listed = Window(REGISTERED - india - 1_000, REGISTERED - india + 2_000)
    assert slotlog.clock_shift(read, listed, None) == -india
    assert slotlog.on_the_epoch(read, -india) == Window(
        REGISTERED + 156 - india, REGISTERED + 207 - india
    )


def test_a_task_manager_there_before_the_job_is_placed_by_the_jobs_start() -> None:
    read = slotlog.read(CAPTURED.read_text(), JOB)
    assert read is not None
    # no listing window (there at the bridge's first listing): the job's first slot
    # request lies seconds after the job's start, whatever the zone
    start = REGISTERED + 98 - 3 * 3_600_000 - 1_400  # a log in UTC+3, requested 1.4 s in
    assert slotlog.clock_shift(read, None, start) == -3 * 3_600_000
    assert slotlog.clock_shift(read, None, None) is None


def test_a_log_far_from_its_listing_or_of_another_pattern_is_not_used() -> None:
    read = slotlog.read(CAPTURED.read_text(), JOB)
    assert read is not None
    far = REGISTERED + 7 * 60_000  # seven minutes: neither a zone nor a listing's lag
    assert slotlog.clock_shift(read, Window(far - 100, far), None) is None
    assert (
        slotlog.read("[16:32:00] INFO Successful registration at resource manager\n", JOB) is None
    )


def test_a_registration_again_starts_over() -> None:
    # a TaskManager that reconnected to the ResourceManager offers its slots anew
    text = CAPTURED.read_text() + (
        "2026-12-05 16:40:00,000 INFO  TaskExecutor [] - Successful registration at resource "
        "manager x\n"
    )
    read = slotlog.read(text, JOB)
    assert read == slotlog.Offered(REGISTERED + 479_166)  # its earlier offer is not this one
