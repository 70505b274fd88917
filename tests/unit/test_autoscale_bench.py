"""The autoscaling benchmark's arithmetic (bench/autoscale_bench.py): what it counts as a
rescale, downtime, slot-seconds and catching up, from its samples."""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import pytest

from bench.autoscale_bench import (
    SETTINGS,
    Sample,
    Tail,
    catch_up,
    downtime_ms,
    rises,
    setting,
    settled_at,
    shared,
    summarize,
    table,
)
from services.tools.load import Trace, shape


def test_the_rises_of_a_trace_are_its_start_and_its_steps_up() -> None:
    assert rises(shape("steps", 1_000, 400)) == [0.0, 100.0]  # 250, 1,000, 500, 250
    assert rises(Trace(((0.0, 10.0), (50.0, 100.0)))) == [0.0]  # a ramp has no step


def test_a_run_is_counted_from_its_samples() -> None:
    trace = Trace(((0.0, 100.0), (2.0, 100.0), (2.0, 400.0), (6.0, 400.0)))
    p2, p4 = {"Source": 2, "Work": 2}, {"Source": 2, "Work": 4}
    samples = [
        Sample(0.0, 100, 0, p2, True),
        Sample(1.0, 100, 0, p2, True),
        Sample(2.0, 400, 300, p2, True),
        Sample(3.0, 400, 900, p4, False),  # rescaling: down until the next sample
        Sample(4.0, 400, 600, p4, True),
        Sample(5.0, 400, 100, p4, True),
        Sample(6.0, 0, None, p4, True),  # the broker did not answer: no backlog known
    ]
    result = summarize("t", "peer", trace, samples, decisions=1, limit=0.5, downtime=2.5)
    assert result.rescales == 1 and (result.downtime_s, result.stalled_s) == (2.5, 1.0)
    assert result.slot_seconds == 2 + 2 + 2 + 4 + 4 + 4
    assert (result.backlog_p50, result.backlog_max) == (100.0, 900.0)
    assert result.catch_up_s == [0.0, 3.0]  # the rise at 2 s is caught up at 5 s
    assert catch_up(samples, 2.0, 4.0, 0.5) is None  # not within that span
    assert result.decisions_per_hour == 600.0  # one in 6 s
    assert table([result])[2].startswith("| t | peer | 1 | 2.5 | 100 |")


def test_a_rescales_downtime_is_its_time_outside_executing_as_flink_recorded_it() -> None:
    spans = [("Executing", 30_000), ("Restarting", 1_200), ("CreatingExecutionGraph", 300)]
    details = {"schedulerStates": [{"state": s, "durationInMillis": d} for s, d in spans]}
    assert downtime_ms(details) == 1_500


def test_a_set_setting_overrides_the_shared_one_for_both_autoscalers() -> None:
    key = "job.autoscaler.utilization.target"
    args = argparse.Namespace(set=[setting(f"{key}=0.5")])
    assert shared(args)[key] == "0.5" and SETTINGS[key] == "0.7"  # the module's stays
    assert shared(argparse.Namespace(set=[])) == SETTINGS
    factor = "job.autoscaler.scale-down.max-factor"  # defaults apart, one value when set
    assert (
        factor not in SETTINGS
        and shared(argparse.Namespace(set=[setting(f"{factor}=1")]))[factor] == "1"
    )
    for wrong in ("job.autoscaler.utilization.target", "job.autoscaler.nothing=1"):
        with pytest.raises(argparse.ArgumentTypeError):
            setting(wrong)


def test_a_job_has_settled_from_when_every_vertex_ran_at_1_to_the_end() -> None:
    p1, p2 = {"Source": 1, "Work": 1}, {"Source": 1, "Work": 2}
    samples = [
        Sample(0.0, 100, 0, p1, True),  # at 1 during the trace: not settled, load comes
        Sample(5.0, 0, 0, p2, True),
        Sample(6.0, 0, 0, p1, False),  # restarting at 1: not yet running there
        Sample(7.0, 0, 0, p1, True),
        Sample(8.0, 0, 0, p1, True),
    ]
    assert settled_at(samples, 4.0) == 7.0
    assert settled_at(samples[:3], 4.0) is None  # the last sample is not at the floor
    assert settled_at(samples[:1], 0.0) == 0.0 and settled_at(samples[:1], 4.0) is None
    result = summarize(
        "t", "peer", Trace(((0.0, 100.0), (4.0, 100.0))), samples, decisions=0, limit=1
    )
    assert result.settled_s == 7.0 and table([result])[2].endswith("| 7 |")


def test_the_tail_ends_when_every_run_has_settled_and_not_before() -> None:
    at_1 = [Sample(float(t), 0, 0, {"Work": 1}, True) for t in range(10, 60)]
    sampled = SimpleNamespace(samples=at_1)

    tail = Tail(2, settle=True, most_s=0.0)
    tail.wait(0, sampled, 10.0)  # type: ignore[arg-type]
    assert tail.settled[0].is_set() is False  # no time to look: at most 0 s
    tail = Tail(2, settle=True, most_s=3.0)
    tail.settled[1].set()  # the other run settled already
    started = time.monotonic()
    tail.wait(0, sampled, 10.0)  # type: ignore[arg-type]
    assert tail.settled[0].is_set() and time.monotonic() - started < 1.0
    sampled.samples = at_1[:20]  # 10-29 s: at 1 for 19 s, under HOLD_S
    tail = Tail(1, settle=True, most_s=1.5)
    tail.wait(0, sampled, 10.0)  # type: ignore[arg-type]
    assert not tail.settled[0].is_set()
