"""The month benchmark's pure parts (bench/month_bench.py): its clock, the fleet's days,
and the history's guard on the VACUUM retention it shortens."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from bench.month_bench import Clock, FleetState, Shape, plan_day, submit
from services.cli import parse_args
from services.contracts.events import JobLifecycle, JobSubmitted, TaskManagerLost
from services.history import handlers

SHAPE = Shape(60.0, 0.1, (("jobstore.expiration-time", "3"),), 60_000)


def test_a_minute_a_day_divides_horizons_by_1440_and_never_below_a_second() -> None:
    clock = Clock(60.0)
    assert clock.factor == 1_440
    assert clock.scaled_ms(7 * 86_400_000) == 420_000  # a week: 7 minutes
    assert clock.scaled_ms(60_000) == 1_000


def test_a_day_keeps_the_fleet_whole_and_each_job_within_its_life() -> None:
    state, rng = FleetState(), random.Random(7)
    first = [event for _ in range(100) for event in submit(state, rng.uniform(0, 30), SHAPE)]
    assert Counter(type(e).__name__ for _, e in first) == {
        "JobSubmitted": 100,
        "TaskManagerRegistered": 200,
    }
    for _ in range(5):
        day = plan_day(state, rng, SHAPE)
        assert len(state.live) == 100
        ended = {e.job_id for _, e in day if isinstance(e, JobLifecycle) and e.kind == "CANCEL"}
        assert ended and not ended & {job.job_id for job in state.live}
        submitted_at = {e.job_id: at for at, e in day if isinstance(e, JobSubmitted)}
        for at, event in day:
            assert 0 <= at < SHAPE.day_s
            assert event.job_id not in ended or isinstance(event, JobLifecycle)
            if event.job_id in submitted_at:  # a new job: nothing before its submission
                assert at >= submitted_at[event.job_id]
        lost = [e.task_manager_id for _, e in day if isinstance(e, TaskManagerLost)]
        assert len(lost) == len(set(lost))
        assert all(len(job.tms) >= 2 for job in state.live)


@pytest.mark.parametrize(
    ("flags", "hours"),
    [
        ((), 24.0),
        (("--retention-hours", "1"), 1.0),
        (("--retention-hours", "0.05", "--short-retention"), 0.05),
    ],
)
def test_the_vacuum_retention_is_an_hour_at_least_unless_asked(
    flags: tuple[str, ...], hours: float
) -> None:
    assert handlers._retention_hours(parse_args(["history", "run", *flags])) == hours


@pytest.mark.parametrize(
    "flags", [("--retention-hours", "0.5"), ("--retention-hours", "0", "--short-retention")]
)
def test_a_shorter_retention_is_refused(
    flags: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as stopped:
        handlers._retention_hours(parse_args(["history", "run", *flags]))
    assert stopped.value.code == 2
    assert "--retention-hours must be" in capsys.readouterr().err
