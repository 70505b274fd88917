"""The hindsight frontier's model (bench/autoscale_frontier.py): backlog, slot-seconds,
time over the busy bound, an early scale-down, and which schedules dominate a run."""

from __future__ import annotations

import json
from pathlib import Path

from bench.autoscale_frontier import (
    Model,
    Run,
    Schedule,
    candidates,
    dominating,
    from_results,
    model,
    parse_schedule,
    peak_need,
)
from services.tools.load import Trace

CEILINGS = {1: 100.0, 2: 200.0, 4: 400.0}


def _model(trace: Trace, **settings: float) -> Model:
    known = {"tail_s": 0.0, "step_s": 1.0, "scale_down_s": 5.0, "busy_bound": 0.9}
    return model(trace, ceilings=CEILINGS, **(known | settings))


def test_a_load_under_the_ceiling_leaves_no_backlog_and_costs_its_slots() -> None:
    out = _model(Trace(((0.0, 150.0), (10.0, 150.0)))).run(Schedule((), start=2))
    assert (out.p99, out.slot_seconds, out.over_s, out.early_down) == (0.0, 20.0, 0.0, False)


def test_a_step_over_the_ceiling_grows_the_backlog_until_the_rescale() -> None:
    step = Trace(((0.0, 100.0), (4.0, 100.0), (4.0, 300.0), (10.0, 300.0)))
    late = _model(step).run(Schedule(((7.0, 4),)))  # 3 s at 2 under 300 a second
    assert late.slot_seconds == 7 * 2 + 3 * 4
    assert late.p99 == 300.0  # 100 a second behind for 3 s, then 100 a second drained
    assert late.over_s == 3.0  # 300 over 200 at 2, with 4 to go to
    widest = _model(step).run(Schedule((), start=1))
    assert widest.over_s == 10.0
    assert _model(step).run(Schedule((), start=4)).over_s == 0.0  # the widest: nowhere to go


def test_a_scale_down_before_the_lower_ceiling_held_the_interval_is_early() -> None:
    fall = Trace(((0.0, 300.0), (3.0, 300.0), (3.0, 50.0), (20.0, 50.0)))
    assert _model(fall).run(Schedule(((5.0, 2),), start=4)).early_down  # 2 s of 50
    assert not _model(fall).run(Schedule(((8.0, 2),), start=4)).early_down  # 5 s of 50


def test_candidates_are_every_schedule_of_so_many_rescales() -> None:
    one = candidates([1, 2, 4], 1, 30.0, 10.0)
    assert len(one) == 3 * 2  # three instants, two other levels
    assert Schedule(((10.0, 4),)) in one
    two = candidates([1, 2, 4], 2, 30.0, 10.0)
    assert all(a[0] < b[0] and a[1] != b[1] for a, b in (s.moves for s in two))
    assert len(two) == 3 * 2 * 2  # instant pairs, then two other levels each


def test_a_run_is_dominated_by_fewer_rescales_at_no_more_p99_and_slot_seconds() -> None:
    step = Trace(((0.0, 100.0), (4.0, 100.0), (4.0, 300.0), (12.0, 300.0)))
    m = _model(step)
    staircase = Run("step", "peer", Schedule(((6.0, 2), (9.0, 4))), rescales=2)
    found = dominating(staircase, m, [1, 2, 4], every_s=1.0)
    assert found and all(len(s.moves) < 2 for _, s in found)
    bar = m.run(staircase.schedule)
    assert all(o.p99 <= bar.p99 and o.slot_seconds <= bar.slot_seconds for o, _ in found)
    assert Schedule(((5.0, 4),)) not in [s for _, s in found]  # more slot-seconds


def test_the_peaks_need_is_the_least_level_whose_ceiling_takes_it() -> None:
    assert peak_need(Trace(((0.0, 150.0),)), CEILINGS) == 2
    assert peak_need(Trace(((0.0, 900.0),)), CEILINGS) == 4  # none does: the widest


def test_schedules_are_read_from_text_and_from_a_results_file(tmp_path: Path) -> None:
    run = parse_schedule("sine peer 133=4 263=8 694=8")
    assert run.rescales == 3 and run.schedule.label().endswith("(another vertex)@694")
    p = {"Work": 2}
    samples = [
        {"at_s": 0.0, "parallelism": p, "running": True},
        {"at_s": 1.0, "parallelism": {"Work": 8}, "running": False},  # mid-restart
        {"at_s": 2.0, "parallelism": {"Work": 4}, "running": True},
    ]
    result = {"trace": "ramp", "controller": "peer", "rescales": 2, "samples": samples}
    result |= {"backlog_p99": 10.0, "slot_seconds": 6.0}
    path = tmp_path / "results.json"
    path.write_text(json.dumps([result]))
    (read,) = from_results(path)
    assert read.schedule == Schedule(((2.0, 4),), start=2) and read.rescales == 2
    assert read.measured is not None and read.measured.p99 == 10.0
