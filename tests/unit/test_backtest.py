"""The policy's backtest (services/history/backtest.py): the model measured from a job's
samples, and a load step replayed through it as run and under the decision."""

from __future__ import annotations

import pytest

from services.history import backtest as bt
from services.history.parallelism import PolicyConfig, Sample, VertexSample

T0 = 1_795_935_400_000


def samples(rates: list[float], skew: float | None = None, keyed: bool = True) -> list[Sample]:
    """A job sampled every 10 s while its source emitted `rates[i]` records a second and
    kept up: the source takes 0.2 ms a record, `work` (two subtasks) 2 ms (500 records per
    busy second of a subtask); with `skew`, work's busiest subtask is that many times as
    busy as their average (the gauge Flink reports)."""
    found, n = [], 0.0
    for i in range(len(rates) + 1):
        rate = rates[min(i, len(rates) - 1)] if rates else 0.0
        busiest = None if skew is None else rate * 2.0 / 2 * skew  # ms a second
        found.append(
            Sample(
                T0 + i * 10_000,
                (
                    VertexSample("source", 2, 8, 0, n, n * 0.2, 0.0, "Source"),
                    VertexSample(
                        "work", 2, 8, n, n, n * 2.0, None, "Work", ("source",), None, keyed, busiest
                    ),
                ),
            )
        )
        n += rates[i] * 10 if i < len(rates) else 0
    return found


def test_the_model_is_measured_from_the_samples() -> None:
    model, trace = bt.measure(samples([600, 800, 900]))
    assert model is not None
    assert [w.arrival for w in trace] == pytest.approx([600, 800, 900])
    assert model.capacity == pytest.approx({"source": 5_000, "work": 500})
    assert model.parallelism == {"source": 2, "work": 2}
    assert model.sustained({"source": 2, "work": 2}) == pytest.approx(1_000)  # Work's
    assert model.sustained({"source": 2, "work": 6}) == pytest.approx(3_000)
    assert bt.measure(samples([]))[0] is None


def test_a_load_step_as_run_and_under_the_decision() -> None:
    model, _ = bt.measure(samples([600, 800, 900]))
    assert model is not None
    step = [bt.Window(10, 800)] * 6 + [bt.Window(10, 2_400)] * 60  # 1,000/s sustained at 2
    config = PolicyConfig(stabilization_ms=60_000)
    as_run = bt.replay(model, step, config, 6_000, decide=False)
    decided = bt.replay(model, step, config, 6_000)
    assert as_run.rescales == 0 and as_run.backlog_max == pytest.approx(60 * 10 * 1_400)
    assert decided.rescales >= 1 and decided.downtime_ms == 6_000 * decided.rescales
    assert decided.backlog_max < as_run.backlog_max / 10
    assert decided.backlog[-1] == 0  # caught up by the end
    assert max(decided.parallelism[-1].values()) > 2
    assert decided.slot_seconds > as_run.slot_seconds  # what it costs
    # a lower utilization target buys more slots for the same trace
    roomy = bt.replay(
        model, step, PolicyConfig(target_utilization=0.4, stabilization_ms=60_000), 6_000
    )
    assert roomy.slot_seconds > decided.slot_seconds


def test_the_table_has_a_line_as_run_and_one_per_setting() -> None:
    model, trace = bt.measure(samples([600, 800, 900, 2_400, 2_400]))
    assert model is not None
    tries = [
        ("defaults", PolicyConfig(), 60_000),
        ("utilization 0.5", PolicyConfig(target_utilization=0.5), 60_000),
    ]
    lines = bt.as_text("c1.j1", model, trace, tries, 6_000)
    assert lines[0].startswith("c1.j1: 5 windows, 50 s of recorded load")
    assert [line.split()[0] for line in lines[2:]] == ["as", "defaults", "utilization"]


def test_a_skewed_vertex_sustains_what_its_busiest_subtask_does() -> None:
    model, _ = bt.measure(samples([300, 400, 300], skew=1.5))
    assert model is not None
    assert model.skew == {"source": {}, "work": {2: pytest.approx(1.5)}}
    assert model.capacity["work"] == pytest.approx(500)  # per busy second, on average
    assert model.sustained({"source": 2, "work": 2}) == pytest.approx(1_000 / 1.5)
    assert model.skew_at("work", 8) == pytest.approx(1.5)  # the nearest measured
    even, _ = bt.measure(samples([300, 400, 300]))
    assert even is not None and even.skew == {"source": {}, "work": {}}
    # 600 a second: 60 % busy on average, the busiest 90 %: MAX scales, AVG does not
    load = [bt.Window(10, 600)] * 30
    skewed = bt.replay(model, load, PolicyConfig(stabilization_ms=60_000), 1_000)
    averaged = bt.replay(
        model, load, PolicyConfig(stabilization_ms=60_000, busy_time_aggregator="AVG"), 1_000
    )
    assert skewed.rescales >= 1 and max(skewed.parallelism[-1].values()) > 2
    assert averaged.rescales == 0 and averaged.backlog_max == 0
    header = bt.as_text("c1.j1", model, load, [], None)[0]
    assert "Work 500.0 rec/s (busiest subtask's records / average: 1.50 at 2)" in header


def changes(outcome: bt.Outcome, first: dict[str, int]) -> list[int]:
    """The windows after which the parallelism changed."""
    before = [first, *outcome.parallelism]
    return [i for i in range(len(outcome.parallelism)) if before[i + 1] != before[i]]


def test_the_replay_decides_on_a_full_window_of_one_run_as_a_live_job_does() -> None:
    model, _ = bt.measure(samples([600, 800, 900]))
    assert model is not None
    config = PolicyConfig(stabilization_ms=10_000)
    at_once = [bt.Window(10, 2_400)] * 30
    for window_ms, first in ((30_000, 2), (60_000, 5)):  # decided at the end of window `first`
        outcome = bt.replay(model, at_once, config, 5_000, window_ms=window_ms)
        assert changes(outcome, model.parallelism)[:1] == [first]
    # keyed, Work goes 2 -> 8 (its 8 key groups); not keyed, 2 -> 5, and a second rise right
    # after it waits for the new run's full window: 5 s down in the next window, then six
    # more windows of the run
    assert outcome.parallelism[5]["work"] == 8
    loose, _ = bt.measure(samples([600, 800, 900], keyed=False))
    assert loose is not None
    twice = [bt.Window(10, 1_400)] * 6 + [bt.Window(10, 3_200)] * 30
    outcome = bt.replay(loose, twice, config, 5_000, window_ms=60_000)
    assert changes(outcome, loose.parallelism)[:2] == [5, 12]
    assert [outcome.parallelism[i]["work"] for i in (5, 12)] == [5, 8]


def busy_samples(rates: list[float], fixed: float, source_start_ms: float = 0.0) -> list[Sample]:
    """As `samples`, but each of work's two subtasks is busy `fixed` of every second
    whatever its records, and the source spends `source_start_ms` busy in the first
    window with no record (its tasks starting), then 0.01 ms a record."""
    found, n, work_busy, source_busy = [], 0.0, 0.0, 0.0
    for i in range(len(rates) + 1):
        found.append(
            Sample(
                T0 + i * 10_000,
                (
                    VertexSample("source", 2, 8, 0, n, source_busy, 0.0, "Source"),
                    VertexSample("work", 2, 8, n, n, work_busy, None, "Work", ("source",)),
                ),
            )
        )
        if i < len(rates):
            records = rates[i] * 10
            n += records
            work_busy += fixed * 10_000 * 2 + records * 2.0
            source_busy += source_start_ms if i == 0 else records * 0.01
    return found


def test_a_fixed_busy_share_is_fitted_beside_the_cost_of_a_record() -> None:
    model, _ = bt.measure(busy_samples([200, 400, 600, 800], fixed=0.1))
    assert model is not None
    assert model.fixed == {"work": pytest.approx(0.1)}
    assert model.capacity["work"] == pytest.approx(500)  # per busy second beyond the fixed
    # its two subtasks keep up with what leaves each 90 % of a second at 2 ms a record
    assert model.sustained({"source": 2, "work": 2}) == pytest.approx(900)
    header = bt.as_text("c1.j1", model, [], [], None)[0]
    assert "Work 500.0 rec/s, busy 10% at any rate" in header
    # too alike to tell a fixed part from the records' cost: DS2's straight line
    alike, _ = bt.measure(busy_samples([600, 650, 700], fixed=0.1))
    assert alike is not None and alike.fixed == {}
    assert alike.capacity["work"] == pytest.approx(650 * 10 / (0.2 * 10 + 650 * 10 * 0.002))


def test_a_window_without_records_measures_no_capacity() -> None:
    """The ramp run's source (2026-12-06): busy only while its tasks started, a window
    with no record among them; its median capacity over the busy windows read 447 records
    a second where it took 600 a subtask at 1 % busy, and the replay rescaled it twice."""
    model, _ = bt.measure(busy_samples([0, 300, 600, 900, 1_200], 0.0, source_start_ms=2_000))
    assert model is not None
    assert model.capacity["source"] == pytest.approx(100_000)  # 0.01 ms a record
    assert model.capacity["work"] == pytest.approx(500)


def test_the_replay_sends_only_what_is_worth_its_downtime() -> None:
    """The source's lower target beside Work at 8 frees no slot: live, the decision is not
    sent (parallelism.worth: NOT_WORTH); the replay does not send it either."""
    model, _ = bt.measure(samples([600, 800, 900]))
    assert model is not None
    wide = bt.Model(**{**model.__dict__, "parallelism": {"source": 4, "work": 8}})
    steady = [bt.Window(10, 2_800)] * 60  # work 70 % busy at 8; the source wants 1
    config = PolicyConfig(stabilization_ms=60_000, scale_down_delay_ms=60_000)
    outcome = bt.replay(wide, steady, config, 1_000)
    assert outcome.rescales == 0 and changes(outcome, wide.parallelism) == []
    assert outcome.backlog_max == 0
