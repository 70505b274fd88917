"""The parallelism decision's rules (services/history/parallelism.py), as scenarios of a
two-vertex job, `Source` feeding `Work`, sampled 10 s apart."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from itertools import pairwise

import pytest

from services.history.parallelism import (
    EVENLY_SPREAD,
    MAXIMIZE_UTILISATION,
    Decision,
    PolicyConfig,
    PolicyState,
    Sample,
    VertexDecision,
    VertexSample,
    aligned,
    decide,
    input_rate,
    recorded,
    same_run,
    sent,
    skew_near,
    skews,
    sustained,
    window,
    worth,
)

T0 = 1_795_935_400_000
CONFIG = PolicyConfig()  # utilization 0.7 ± 0.2, catch-up 5 min, restart 30 s


def sample(
    at_s: float, counters: tuple[float, float, float, float], pending: float | None, p: int = 2
) -> Sample:
    """Cumulative counters at `at_s` seconds: (records the source emitted in all, its busy
    ms, records `Work` took, its busy ms); `p`: Work's parallelism."""
    emitted, source_busy_ms, taken, work_busy_ms = counters
    return Sample(
        T0 + int(at_s * 1000),
        (
            VertexSample("src", 2, 8, 0, emitted, source_busy_ms, pending, "Source"),
            VertexSample("work", p, 8, taken, taken, work_busy_ms, None, "Work", ("src",)),
        ),
    )


ZERO = (0.0, 0.0, 0.0, 0.0)
STEADY = (10_000.0, 12_000.0, 10_000.0, 14_000.0)
"""10 s of 1,000 records a second: the source busy 60 %, Work 70 % of its two subtasks."""
LOW = (2_000.0, 2_000.0, 2_000.0, 2_000.0)
"""10 s of 200 records a second, both vertices busy 10 %."""


def decided(first: Sample, last: Sample) -> Decision:
    loads, problems = window(first, last)
    assert not problems
    return decide(loads, CONFIG, PolicyState(), last.at_ms)[0]


def test_a_steady_load_within_the_boundary_keeps_every_vertex() -> None:
    decision = decided(sample(0, ZERO, 0), sample(10, STEADY, 0))
    assert not decision.send
    assert decision.targets == {"src": 2, "work": 2}
    assert decision.input_rate == pytest.approx(1_000)
    assert all("within the target's boundary" in v.reason for v in decision.vertices)


def test_a_growing_backlog_scales_the_busy_vertex_up_to_its_bound() -> None:
    # the source emits 1,000/s (back-pressured) while its backlog grows by 2,000/s; Work is
    # busy all the time at 500 records per busy second a subtask
    first = sample(0, ZERO, 0)
    last = sample(10, (10_000, 4_000, 10_000, 20_000), 20_000)
    decision = decided(first, last)
    assert decision.send
    assert decision.input_rate == pytest.approx(3_000)  # emitted + the backlog's growth
    work = decision.vertices[1]
    # 3,000/s, the 20,000 behind and a 30 s restart's 90,000 caught up within 5 min
    assert work.target_rate == pytest.approx(3_000 + (20_000 + 90_000) / 300)
    assert math.ceil(work.target_rate / (500 * 0.7)) == 10
    assert decision.targets == {"src": 2, "work": 8}  # its max parallelism
    assert "(capped)" in work.reason and decision.reason == "rescale: Work 2 -> 8"
    capped = PolicyConfig(max_parallelism=4)
    loads, _ = window(first, last)
    assert decide(loads, capped, PolicyState(), last.at_ms)[0].targets["work"] == 4


def test_a_lower_target_waits_the_scale_down_delay() -> None:
    first, last = sample(0, ZERO, 0), sample(10, LOW, 0)
    loads, _ = window(first, last)
    decision, state = decide(loads, CONFIG, PolicyState(), last.at_ms)
    assert not decision.send and decision.targets == {"src": 2, "work": 2}
    assert "scale-down to 1 waits" in decision.vertices[1].reason
    later = last.at_ms + CONFIG.scale_down_delay_ms - 1
    assert not decide(loads, CONFIG, state, later)[0].send
    decision, state = decide(loads, CONFIG, state, last.at_ms + CONFIG.scale_down_delay_ms)
    assert decision.send and decision.targets == {"src": 1, "work": 1}
    assert state.last_sent_ms is None  # not sent yet: an advisor keeps advising it
    at = last.at_ms + CONFIG.scale_down_delay_ms
    assert sent(state, at) == PolicyState(at, {})


def test_a_load_back_up_resets_the_scale_down_delay() -> None:
    low = window(sample(0, ZERO, 0), sample(10, LOW, 0))[0]
    steady = window(sample(0, ZERO, 0), sample(10, STEADY, 0))[0]
    _, state = decide(low, CONFIG, PolicyState(), T0)
    assert set(state.lower_since_ms) == {"src", "work"}
    _, state = decide(steady, CONFIG, state, T0 + 60_000)
    assert state.lower_since_ms == {}


def test_the_target_rate_flows_through_each_vertexs_selectivity() -> None:
    def chain(at_s: float, n: float, busy: float) -> Sample:
        return Sample(
            T0 + int(at_s * 1000),
            (
                VertexSample("s", 1, 8, 0, n, busy, 0.0, "S"),
                VertexSample("f", 1, 8, n, n / 2, busy, None, "Filter", ("s",)),
                VertexSample("w", 1, 8, n / 2, n / 2, busy, None, "Work", ("f",)),
            ),
        )

    loads, _ = window(chain(0, 0, 0), chain(10, 10_000, 9_000))
    decision = decide(loads, CONFIG, PolicyState(), T0 + 10_000)[0]
    rates = {v.vertex_id: v.target_rate for v in decision.vertices}
    assert rates["f"] == pytest.approx(rates["s"])  # what the source emits, it takes
    assert rates["w"] == pytest.approx(rates["s"] / 2)  # half of it passes the filter


def test_no_more_rescales_an_hour_than_the_stabilization_allows() -> None:
    rng = random.Random(7)
    state, count, at = PolicyState(), 0, 0.0
    counters = ZERO
    parallelism, pending = 2, 0.0
    previous = sample(0, counters, 0, parallelism)
    while at < 3_600:
        at += 10
        rate = rng.choice([100.0, 1_000.0, 5_000.0, 20_000.0])
        pending = max(0.0, pending + rng.uniform(-5_000, 5_000))
        step = (rate * 10, 4_000.0, rate * 10, 19_000.0)
        counters = (
            counters[0] + step[0],
            counters[1] + step[1],
            counters[2] + step[2],
            counters[3] + step[3],
        )
        current = sample(at, counters, pending, parallelism)
        loads, _ = window(previous, current)
        decision, state = decide(loads, CONFIG, state, current.at_ms)
        previous = current
        if decision.send:
            state = sent(state, current.at_ms)
            count += 1
            parallelism = decision.targets["work"]
            previous = sample(at, counters, pending, parallelism)  # a new run of the tasks
    assert 0 < count <= CONFIG.max_rescales_per_hour == 30


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"busy_ms": float("nan")}, "busy_ms is"),
        ({"busy_ms": -1.0}, "busy_ms is"),
        ({"read_records": None}, "no read_records reported"),
        ({"read_records": 1.0}, "went back"),
        ({"parallelism": 3}, "not one run of its tasks"),
    ],
)
def test_a_sample_that_cannot_be_used_decides_nothing_and_says_why(
    change: dict[str, object], why: str
) -> None:
    first = sample(0, (0, 0, 100, 100), 0)
    last = sample(10, STEADY, 0)
    work = last.vertices[1].__class__(**{**last.vertices[1].__dict__, **change})
    loads, problems = window(first, Sample(last.at_ms, (last.vertices[0], work)))
    assert [p for p in problems if p.startswith("Work: ") and why in p], problems
    assert [load.vertex_id for load in loads] == ["src"]
    gone = Sample(first.at_ms, (first.vertices[0],))
    assert window(gone, last)[1] == ["Work: not in the earlier sample"]
    assert window(last, first)[1]  # out of order
    assert decide([], CONFIG, PolicyState(), T0)[0].reason == "no usable window of samples"


def test_a_source_without_a_backlog_metric_is_taken_at_its_emitted_rate() -> None:
    decision = decided(sample(0, ZERO, None), sample(10, (10_000, 12_000, 10_000, 20_000), None))
    assert decision.backlog is None and decision.input_rate == pytest.approx(1_000)


def test_bad_settings_are_refused() -> None:
    for bad in (
        {"target_utilization": 0},
        {"utilization_boundary": 0.8},
        {"catch_up_ms": 0},
        {"max_scale_down_factor": 1.5},
    ):
        with pytest.raises(ValueError, match=r"job\.autoscaler"):
            PolicyConfig(**bad)


def _one_vertex(current: int, target: int, backlog: float, restart_ms: int) -> Decision:
    """A job of one vertex taking 1,000 records a second at 600 a busy second a subtask."""
    work = VertexDecision("work", "Work", current, target, 1_000.0, 600.0, 0.8, "")
    return Decision(True, "rescale", (work,), 1_000.0, backlog, restart_ms)


def test_a_rescale_is_sent_only_when_it_gains_more_than_its_downtime_costs() -> None:
    # keeping up (1,200/s at 2) with 1,000 behind: clears in 5 s as it runs; a minute's
    # downtime first would make it 60 s + 61,000 / 800 s
    slow_restart = _one_vertex(2, 3, 1_000, 60_000)
    assert sustained(slow_restart.vertices, {}) == pytest.approx(1_200)
    assert "clears in 5 s as it runs" in (worth(slow_restart, CONFIG) or "")
    # nothing behind: up for headroom (the utilization target) is worth it
    assert worth(_one_vertex(2, 3, 0, 60_000), CONFIG) is None
    # falling behind (600/s at 1 subtask): always worth it
    assert worth(_one_vertex(1, 3, 50_000, 60_000), CONFIG) is None
    # down from 4 to 2 (1,200/s): a 30 s downtime's 30,000 records caught up in 150 s
    assert worth(_one_vertex(4, 2, 0, 30_000), CONFIG) is None
    # ... a 2 min one's in 600 s, more than the 5 min catch-up
    assert "more than the catch-up time" in (worth(_one_vertex(4, 2, 0, 120_000), CONFIG) or "")
    # down to 1 (600/s) would not keep up at all
    assert "would not keep up" in (worth(_one_vertex(4, 1, 0, 0), CONFIG) or "")


def test_a_scale_down_that_frees_no_slot_is_not_worth_its_restart() -> None:
    """The job's slots are its widest vertex's (one slot-sharing group): the source down
    beside a wider `Work` frees none; `Work` down does."""
    src = VertexDecision("src", "Source", 2, 1, 1_000.0, 6_000.0, 0.1, "")
    work = VertexDecision("work", "Work", 8, 8, 1_000.0, 250.0, 0.6, "")
    narrower = Decision(True, "rescale", (src, work), 1_000.0, 0.0, 100)
    assert "frees no slot" in (worth(narrower, CONFIG) or "")
    wider_down = Decision(True, "rescale", (src, replace(work, target=6)), 1_000.0, 0.0, 100)
    assert worth(wider_down, CONFIG) is None
    # nothing arriving and `Work` idle (no capacity measured): still none freed (the
    # burst trace's tail, 2026-12-06: the source went 2 -> 1 there, restarting the job)
    idle = (replace(src, capacity=None), replace(work, capacity=None, target_rate=0.0))
    assert "frees no slot" in (worth(Decision(True, "rescale", idle, 0.0, 0.0, 0), CONFIG) or "")
    assert "frees no slot" in (worth(Decision(True, "rescale", idle, None, None, 0), CONFIG) or "")


def test_a_kafka_source_is_bounded_by_its_partitions() -> None:
    # the source is busy all the time at 500 records a busy second a subtask, its backlog
    # growing: it needs 6 subtasks, and reads 3 partitions
    first, last = sample(0, ZERO, 0), sample(10, (10_000, 20_000, 10_000, 14_000), 20_000)
    read = Sample(
        last.at_ms,
        (
            VertexSample("src", 2, 8, 0, 10_000, 20_000, 20_000, "Source", (), 3),
            last.vertices[1],
        ),
    )
    decision = decided(first, read)
    assert decision.targets["src"] == 3
    assert decision.vertices[0].reason.endswith(": 3 (its partitions)")
    assert decided(first, last).targets["src"] == 8  # without them known: its max parallelism


def test_a_sources_busy_time_going_back_is_no_restart() -> None:
    # Flink's sum of a source's accumulated busy time went 402 -> 351 ms within one run
    # (the benchmark): the window stands, the source's capacity is not measured by it
    first, last = sample(0, (0, 402, 0, 0), 0), sample(10, (10_000, 351, 10_000, 14_000), 0)
    assert same_run(first, last)
    loads, problems = window(first, last)
    assert problems == [] and loads[0].busy_ms == 0 and loads[0].capacity is None
    assert not same_run(last, sample(20, (5_000, 500, 5_000, 100), 0))  # records went back


def keyed(s: Sample) -> Sample:
    """`s` with Work fed by keyBy (its 8 key groups spread over its subtasks)."""
    work = s.vertices[1]
    return Sample(s.at_ms, (s.vertices[0], replace(work, keyed=True)))


def test_a_keyed_vertex_is_raised_to_spread_its_key_groups_evenly() -> None:
    # Work needs 3 subtasks for 1,300/s (a backlog of 3,000 grown in 10 s) at 700 a busy
    # second: its 8 key groups over 3 would leave one subtask 2 of them, the others 3
    first, last = sample(0, ZERO, 0), sample(10, (10_000, 6_000, 10_000, 14_286), 3_000)
    assert decided(first, last).targets["work"] == 3
    decision = decided(keyed(first), keyed(last))
    assert decision.targets["work"] == 4
    assert decision.vertices[1].reason.endswith(": 3, 4 for its 8 key groups")


def test_key_group_alignment_follows_the_operators_modes() -> None:
    assert [aligned(t, 2, 8, None, EVENLY_SPREAD) for t in (3, 5, 6, 7, 8)] == [4, 8, 8, 8, 8]
    assert aligned(5, 2, 128, None, EVENLY_SPREAD) == 8
    assert aligned(5, 2, 128, None, MAXIMIZE_UTILISATION) == 6  # at most 21 groups, not 25
    assert aligned(5, 2, 128, 7, EVENLY_SPREAD) == 5  # no divisor within the bound: as is
    assert aligned(3, 4, 8, None, EVENLY_SPREAD) == 4  # down: never past the current one
    assert aligned(3, 6, 8, None, EVENLY_SPREAD) == 4
    assert aligned(3, 2, None, None, EVENLY_SPREAD) == 3  # nothing to spread


def test_the_boundary_is_judged_at_the_rate_that_sizes_the_target() -> None:
    # the job's first minute: 50 s at 100/s, then 10 s at 430/s; Work takes 250 a busy
    # second a subtask. Over the window its two subtasks read 31 % busy, below the
    # boundary, but at the recent 430/s they are 86 % busy: within it, so it keeps 2 (the
    # operator's test: the target rate against the true processing rate)
    def at(s: float, pending: float) -> Sample:
        records = 100 * min(s, 50) + 430 * max(s - 50, 0)
        return sample(s, (records, records / 10, records, records * 4), pending)

    def judged(pending: float) -> Decision:
        loads, _ = window(at(0, pending), at(60, pending))
        recent, _ = window(at(50, pending), at(60, pending))
        return decide(loads, CONFIG, PolicyState(), T0, 0, recent=recent)[0]

    kept = judged(0)
    assert kept.input_rate == pytest.approx(430)
    assert kept.vertices[1].busy == pytest.approx(0.31)
    assert kept.targets == {"src": 2, "work": 2}
    assert "busy 86% at 430.0 rec/s: within the target's boundary" in kept.vertices[1].reason
    # 10,000 behind, caught up within 5 min, add 33/s: 93 % busy, over the boundary
    behind = judged(10_000)
    assert behind.input_rate == pytest.approx(430)
    assert behind.vertices[1].target_rate == pytest.approx(430 + 10_000 / 300)
    assert behind.send and behind.targets["work"] == 3  # 463 / (250 x 0.7), not keyed here


def test_a_rise_is_judged_on_the_recent_part_of_the_window_and_a_fall_is_not() -> None:
    # a minute: 50 s at 300/s, then 10 s at 1,200/s which Work (2 x 250/s) cannot keep up
    # with, so the backlog grows by 700/s; over the last 10 s the input is 1,200/s
    first = sample(0, ZERO, 0)
    before = sample(50, (15_000, 10_000, 15_000, 60_000), 0)
    last = sample(60, (20_000, 12_000, 20_000, 80_000), 7_000)
    loads, _ = window(first, last)
    recent, _ = window(before, last)
    whole = decide(loads, CONFIG, PolicyState(), last.at_ms)[0]
    assert whole.input_rate == pytest.approx(450)
    rise = decide(loads, CONFIG, PolicyState(), last.at_ms, recent=recent)[0]
    assert rise.input_rate == pytest.approx(1_200)
    assert rise.targets["work"] > whole.targets["work"]
    assert "(input 1200.0 rec/s over the last 10 s, 450.0 over the window)" in rise.reason
    off = replace(CONFIG, scale_up_window_ms=0)
    assert decide(loads, off, PolicyState(), last.at_ms, recent=recent)[0] == whole
    # a fall: the recent part lower than the window decides nothing by itself
    calm = sample(70, (21_000, 12_500, 21_000, 81_000), 0)
    loads, _ = window(first, calm)
    lower, _ = window(last, calm)
    assert (
        decide(loads, CONFIG, PolicyState(), calm.at_ms, recent=lower)[0]
        == decide(loads, CONFIG, PolicyState(), calm.at_ms)[0]
    )


def test_a_skewed_vertex_is_judged_by_its_busiest_subtask() -> None:
    # STEADY's Work: two subtasks 70 % busy on average, but the keys fall unevenly and
    # the busiest one reports 95 % (Flink's busyTimeMsPerSecond, max over the subtasks).
    # MAX (the default, the operator's): 1,000/s over 2 x 0.95 busy seconds is 526 a
    # subtask, 95 % busy at its rate: over the boundary, 3 subtasks at 0.7 (2 keep the
    # average's reading: AVG keeps it)
    def skewed(at_s: float, counters: tuple[float, float, float, float], ms: float) -> Sample:
        plain = sample(at_s, counters, 0)
        work = replace(plain.vertices[1], busiest_ms_per_s=ms)
        return Sample(plain.at_ms, (plain.vertices[0], work))

    first, middle, last = skewed(0, ZERO, 900), skewed(5, STEADY, 940), skewed(10, STEADY, 960)
    loads, problems = window(first, last, [middle])
    assert not problems
    assert loads[1].busiest == pytest.approx(0.95)  # the mean of the window's readings
    assert loads[1].busy == pytest.approx(0.7)
    by_max = decide(loads, CONFIG, PolicyState(), last.at_ms)[0]
    assert by_max.send and by_max.targets["work"] == 3
    work = by_max.vertices[1]
    assert work.capacity == pytest.approx(10_000 / (2 * 0.95 * 10))
    assert work.busy == pytest.approx(0.95)
    assert "its busiest subtask 95% busy, 70% on average" in work.reason
    by_avg = decide(loads, replace(CONFIG, busy_time_aggregator="AVG"), PolicyState(), T0)[0]
    assert not by_avg.send and by_avg.vertices[1].capacity == pytest.approx(10_000 / 14)
    # a gauge that is no reading (NaN, over a second) is left out; one below the
    # average (a quiet instant) never gives more capacity than the average does
    loads, _ = window(first, skewed(10, STEADY, math.nan), [skewed(5, STEADY, 1_500)])
    assert loads[1].busiest is None
    loads, _ = window(first, skewed(10, STEADY, 300))
    assert loads[1].capacity_by("MAX") == pytest.approx(loads[1].capacity)


def test_what_arrived_is_the_brokers_end_offsets_not_flinks_metrics_of_other_ages() -> None:
    # the benchmark's steps trace at 300 records a second (2026-12-06): the records the
    # source wrote and the broker's backlog behind its reader's currentOffset, refreshed
    # by Flink at other instants, summed to 32 and then 623 a second over 10 s intervals;
    # the broker's end offsets say 300 both times
    def at(s: float, written: float, backlog: float, received: float | None) -> Sample:
        plain = sample(s, (written, written / 10, written, written * 4), backlog)
        source = replace(plain.vertices[0], received=received)
        return Sample(plain.at_ms, (source, plain.vertices[1]))

    readings = [(0.0, 21_379, 2_631), (12.0, 24_373, 17), (22.0, 27_625, 3_027)]
    for (s0, w0, b0), (s1, w1, b1) in pairwise(readings):
        metrics, _ = window(at(s0, w0, b0, None), at(s1, w1, b1, None))
        broker, _ = window(at(s0, w0, b0, 24_010 + 300 * s0), at(s1, w1, b1, 24_010 + 300 * s1))
        assert input_rate(broker[:1]) == pytest.approx(300)
        assert abs(input_rate(metrics[:1]) - 300) > 250  # 32, then 623
    # a window whose samples read other partitions, or offsets that went back: not counted
    changed = replace(at(10, 3_000, 0, 5_000).vertices[0], partitions=6)
    loads, _ = window(
        at(0, 0, 0, 2_000), Sample(T0 + 10_000, (changed, sample(10, STEADY, 0).vertices[1]))
    )
    assert loads[0].arrivals is None
    loads, _ = window(at(0, 0, 0, 9_000), at(10, 3_000, 0, 2_000))
    assert loads[0].arrivals is None


def keyed_sample(at_s: float, rate: float, p: int, skew: float) -> Sample:
    """The benchmark's job after `at_s` seconds of `rate` records a second: `Work` keyed
    over 8 key groups at `p` subtasks of 240 records per busy second, its busiest subtask
    `skew` times as busy as their average."""
    taken = rate * at_s
    average = rate / p / 240  # a subtask's busy share
    work = VertexSample(
        "work",
        p,
        8,
        taken,
        taken,
        taken / 240 * 1000,
        None,
        "Work",
        ("src",),
        None,
        True,
        busiest_ms_per_s=min(1000.0, average * skew * 1000),
    )
    source = VertexSample("src", 2, 8, 0, taken, taken * 0.05, 0.0, "Source")
    return Sample(T0 + int(at_s * 1000), (source, work))


def test_a_lower_parallelism_is_judged_by_its_busiest_subtask_as_recorded_there() -> None:
    # the burst trace's tail (2026-12-06): Work at 8 after the burst, 400 records a second;
    # its busiest subtask holds 15 of the 64 keys, 1.88 times the average: 39 % busy, so
    # MAX's straight line reads 128 records per busy second a subtask and wants 5 (8, its
    # key groups): it keeps 8. Where the job ran at 4, its busiest there took 1.31 times
    # the average: at 4, 60 % busy at the target rate (440: a restart's arrivals caught
    # up too), within the target
    first, last = keyed_sample(0, 400, 8, 1.88), keyed_sample(60, 400, 8, 1.88)
    loads, problems = window(first, last)
    assert not problems
    plain, _ = decide(loads, CONFIG, PolicyState(), last.at_ms)
    assert plain.targets["work"] == 8
    ran = {"work": {2: 1.16, 4: 1.31}}
    config = replace(CONFIG, scale_down_delay_ms=0)
    by_skew, _ = decide(loads, config, PolicyState(), last.at_ms, skews=ran)
    assert by_skew.send and by_skew.targets["work"] == 4
    assert "4 by its busiest subtask at 4, 1.31 times the average as recorded: 60% busy" in (
        by_skew.vertices[1].reason
    )
    # the scale-down delay still applies, and AVG judges by the average alone
    waiting, _ = decide(loads, CONFIG, PolicyState(), last.at_ms, skews=ran)
    assert not waiting.send and "waits" in waiting.vertices[1].reason
    avg = replace(config, busy_time_aggregator="AVG")
    assert (
        decide(loads, avg, PolicyState(), last.at_ms, skews=ran)[0]
        == decide(loads, avg, PolicyState(), last.at_ms)[0]
    )


def test_a_rise_past_what_any_parallelism_takes_goes_to_the_widest_either_way() -> None:
    # the steps trace's step: 1,200 a second at 2; at 4 and 8 the busiest subtask took
    # 1.31 and 1.88 times the average (118 % busy at 8): none within the target, so 8
    first, last = keyed_sample(0, 1_200, 2, 1.16), keyed_sample(60, 1_200, 2, 1.16)
    loads, _ = window(first, last)
    ran = {"work": {4: 1.31, 8: 1.88}}
    plain = decide(loads, CONFIG, PolicyState(), last.at_ms)[0]
    by_skew = decide(loads, CONFIG, PolicyState(), last.at_ms, skews=ran)[0]
    assert plain.targets["work"] == by_skew.targets["work"] == 8
    # a vertex over its bound is never lowered by a skew read elsewhere, however even
    at4 = window(keyed_sample(0, 1_000, 4, 1.31), keyed_sample(60, 1_000, 4, 1.31))[0]
    odd = decide(at4, CONFIG, PolicyState(), last.at_ms, skews={"work": {2: 0.3}})[0]
    assert odd.targets["work"] == 8


def test_the_skews_are_remembered_per_parallelism_from_the_samples() -> None:
    samples = [keyed_sample(10 * i, 400, 2, 1.16) for i in range(4)]
    samples += [keyed_sample(40 + 10 * i, 400, 4, 1.31) for i in range(3)]  # a new run
    readings = recorded(samples)
    assert len(readings["work"][2]) == 3 and len(readings["work"][4]) == 2
    assert skews(readings)["work"] == {2: pytest.approx(1.16), 4: pytest.approx(1.31)}
    assert "src" not in readings  # no gauge reported
    few = recorded(samples, keep=2)
    assert len(few["work"][2]) == 2
    # a window too idle to say (under 5 % busy) is not a reading
    idle = [keyed_sample(10 * i, 10, 2, 1.5) for i in range(3)]
    assert recorded(idle) == {}
    assert skew_near({2: 1.16, 8: 1.88}, 5) == 1.88  # as near: the higher
    assert skew_near({2: 1.16, 8: 1.88}, 4) == 1.16


def test_an_idle_job_is_sized_for_a_rate_of_0_after_the_scale_down_delay() -> None:
    """Nothing arrives and nothing is behind: the operator's true processing rate is
    infinite there and it lowers the vertices to their least; until 2026-12-07 scalefold
    kept them and started their wait again, holding the peak's slots all night."""
    first, last = sample(0, STEADY, 0, p=4), sample(10, STEADY, 0, p=4)  # no change: idle
    loads, problems = window(first, last)
    assert not problems and all(load.capacity is None for load in loads)
    decision, state = decide(loads, CONFIG, PolicyState(), last.at_ms)
    assert not decision.send and decision.targets == {"src": 2, "work": 4}
    assert all("scale-down to 1 waits" in v.reason for v in decision.vertices)
    assert "sized for a rate of 0" in decision.vertices[1].reason
    due = last.at_ms + CONFIG.scale_down_delay_ms
    decision, _ = decide(loads, CONFIG, state, due)
    assert decision.send and decision.targets == {"src": 1, "work": 1}
    assert worth(decision, CONFIG) is None  # frees 3 slots, nothing to weigh it against
    # the operator's limit on a fall (its default 0.6): 4 keeps at least 40 %, rounded up
    limited = replace(CONFIG, max_scale_down_factor=0.6)
    decision, state = decide(loads, limited, PolicyState(), last.at_ms)
    decision, _ = decide(loads, limited, state, due)
    assert decision.send and decision.targets == {"src": 1, "work": 2}  # src at 2: 0.8 -> 1
    assert "at most 60% lower a step: 2" in decision.vertices[1].reason
    assert decide(loads, replace(CONFIG, max_scale_down_factor=0), state, due)[0].targets == {
        "src": 2,
        "work": 4,
    }  # 0: never lower
    # the backlog unknown: a source that stopped reading is not one with nothing to read
    unknown = window(sample(0, STEADY, None, p=4), sample(10, STEADY, None, p=4))[0]
    decision, state = decide(unknown, CONFIG, PolicyState(), last.at_ms)
    assert decision.targets == {"src": 2, "work": 4} and state.lower_since_ms == {}
    assert all("no busy time to measure" in v.reason for v in decision.vertices)
    # something behind, or arriving: not idle
    behind = window(sample(0, STEADY, 5_000, p=4), sample(10, STEADY, 5_000, p=4))[0]
    assert decide(behind, CONFIG, PolicyState(), last.at_ms)[1].lower_since_ms == {}
