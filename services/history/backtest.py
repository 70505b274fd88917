"""The parallelism decision replayed over a job's recorded workload under other settings
(issue 50, item 4: the what-if of the policy). Pure.

From a job's samples (advice.py reads them) come a **trace**, the rate records arrived at
in each window (what its sources emitted plus their backlog's growth), and a **model** of
the job measured where the job ran: each vertex's selectivity (records out per record
in) and the **cost** of its records, a subtask's busy share as a straight line in the
records it takes a second (a share it is busy whatever its records, and the records per
busy second of the rest), fitted over the windows in which it took records (where the
rates are too alike to tell, or the line does not rise from a share at none, none is
fixed and its capacity is all its records over all its busy time: DS2's). A window with
no records measures nothing: in the recorded ramp run (2026-12-06) the source was busy
over 5 % only while its tasks started, one such window without a record, and the median
of those windows' capacities, the model's until then, read 447 records per busy second
where it took 600 a subtask at 1 % busy (22,600 over the run). The replay then runs the
trace through the model at the parallelism the policy chooses, window by window, the way
the decision sees a running job:

- the job processes what arrived and what is behind, up to the rate its bottleneck
  sustains at the current parallelism (each vertex's busy share at most a second, over
  the share of the source's records that reach it);
- once the current run of the tasks covers the metric window (from the start, or from
  the end of a rescale's downtime: a live job's counters restart with its tasks), the
  policy decides after each window on the loads the model produced over the run's last
  metric window (a rise on its last scale-up window too), a keyed vertex and a Kafka
  source aligned as on a live job, and sends what is worth its downtime (as live:
  `parallelism.worth`); a rescale stops processing for the downtime (the job's own
  recorded one, or the setting's) and the job runs on at the new parallelism.

It prints what a setting costs and gives: rescales, total downtime, backlog p50, p99 and
max over the windows, and slot-seconds (one slot-sharing group: the largest vertex's
parallelism). The cost of a record does not change with the parallelism, which is DS2's
assumption, but for the **skew** of its subtasks: where the samples report a vertex's
busiest subtask (`busyTimeMsPerSecond`'s max), the model keeps, per parallelism the job
ran at, how many times the average records the busiest took (from its busy share over
the average, the fixed share set aside; the median over the windows at least 5 % busy),
and takes a vertex to sustain only what its busiest subtask does: keyed records that fall
unevenly on the subtasks saturate one while the average reads half (docs/autoscaling.md,
"The rule"). A parallelism the job never ran at takes the skew of the nearest one it did
(the higher of two as near). The replayed loads report that busiest subtask too, so the
policy's `MAX` aggregator reads them as it reads a live job's.
What the model leaves out, it leaves out for every setting alike.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field

from services.history import parallelism as pl


@dataclass(frozen=True)
class Model:
    """A job's vertices as measured: topological order, capacity per subtask (records per
    busy second beyond its fixed share; None: never busy), selectivity, inputs, bounds,
    and the parallelism it ran at first."""

    vertices: tuple[str, ...]
    names: dict[str, str | None]
    inputs: dict[str, tuple[str, ...]]
    capacity: dict[str, float | None]
    selectivity: dict[str, float]
    max_parallelism: dict[str, int | None]
    parallelism: dict[str, int]
    skew: dict[str, dict[int, float]] = field(default_factory=dict)
    """Per vertex and parallelism it ran at: how many times the average records its
    busiest subtask took (1: even; absent: not reported)."""
    keyed: dict[str, bool] = field(default_factory=dict)
    """Whether keyBy feeds it: its targets align to its key groups, as a live job's."""
    partitions: dict[str, int | None] = field(default_factory=dict)
    """A Kafka source's partitions: its targets align to them."""
    fixed: dict[str, float] = field(default_factory=dict)
    """Per vertex, the share of a second a subtask is busy whatever its records (absent:
    none): its busy share is this plus its records a second over `capacity`."""

    def skew_at(self, vertex: str, parallelism: int) -> float:
        """How many times the average records the busiest subtask takes at `parallelism`: as
        measured there, else at the nearest parallelism measured (the higher of two)."""
        measured = self.skew.get(vertex)
        if not measured:
            return 1.0
        nearest = min(measured, key=lambda p: (abs(p - parallelism), -p))
        return measured[nearest]

    def reach(self) -> dict[str, float]:
        """The records each vertex takes per record its sources emit."""
        share: dict[str, float] = {}
        for v in self.vertices:
            ins = self.inputs[v]
            share[v] = sum(share[u] * self.selectivity[u] for u in ins) if ins else 1.0
        return share

    def sustained(self, parallelism: dict[str, int]) -> float:
        """The source rate the job keeps up with at `parallelism` (its bottleneck's)."""
        reach = self.reach()
        rates = [
            (1 - self.fixed.get(v, 0.0))
            * capacity
            * parallelism[v]
            / (reach[v] * self.skew_at(v, parallelism[v]))
            for v in self.vertices
            if (capacity := self.capacity[v]) is not None and reach[v] > 0
        ]
        return min(rates) if rates else math.inf

    def busy(self, vertex: str, per_subtask: float) -> float:
        """The share of a second a subtask is busy taking `per_subtask` records a second."""
        capacity = self.capacity[vertex]
        return self.fixed.get(vertex, 0.0) + per_subtask / capacity if capacity else 0.0


@dataclass(frozen=True)
class Window:
    seconds: float
    arrival: float
    """Records a second that arrived at the sources."""


@dataclass(frozen=True)
class Outcome:
    """What one setting did over the trace."""

    rescales: int
    downtime_ms: int
    backlog_p50: float
    backlog_p99: float
    backlog_max: float
    slot_seconds: float
    parallelism: tuple[dict[str, int], ...]
    """Per window, after it."""
    backlog: tuple[float, ...]
    """Per window, at its end."""


def measure(samples: Sequence[pl.Sample]) -> tuple[Model | None, list[Window]]:
    """The job's model and its trace from its samples (in time order): windows between
    consecutive samples of one run; None when no window could be used."""
    trace: list[Window] = []
    selectivities: dict[str, list[float]] = {}
    busy: dict[str, list[_Busy]] = {}
    first_loads: list[pl.Load] = []
    for first, last in itertools.pairwise(samples):
        if not pl.same_run(first, last):
            continue
        loads, problems = pl.window(first, last)
        if problems or not loads:
            continue
        trace.append(Window(loads[0].seconds, pl.input_rate([x for x in loads if not x.inputs])))
        for load in loads:
            if load.capacity is not None and load.records_in > 0:
                per_subtask = load.records_in / load.seconds / load.parallelism
                ratio = pl.skew_of(load)
                reading = _Busy(load.parallelism, per_subtask, load.busy, ratio, load.seconds)
                busy.setdefault(load.vertex_id, []).append(reading)
            if load.records_in > 0:
                selectivities.setdefault(load.vertex_id, []).append(load.selectivity)
        first_loads = first_loads or loads
    if not first_loads:
        return None, trace
    costs = {v: _cost(readings) for v, readings in busy.items()}
    model = Model(
        vertices=tuple(x.vertex_id for x in first_loads),
        names={x.vertex_id: x.name for x in first_loads},
        inputs={x.vertex_id: x.inputs for x in first_loads},
        capacity={
            x.vertex_id: costs[x.vertex_id][1] if x.vertex_id in costs else None
            for x in first_loads
        },
        selectivity={
            x.vertex_id: statistics.median(selectivities.get(x.vertex_id, [1.0]))
            for x in first_loads
        },
        max_parallelism={x.vertex_id: x.max_parallelism for x in first_loads},
        parallelism={x.vertex_id: x.parallelism for x in first_loads},
        keyed={x.vertex_id: x.keyed for x in first_loads},
        partitions={x.vertex_id: x.partitions for x in first_loads},
        skew={
            x.vertex_id: _skews_by_parallelism(busy.get(x.vertex_id, []), costs.get(x.vertex_id))
            for x in first_loads
        },
        fixed={v: fixed for v, (fixed, _) in costs.items() if fixed > 0},
    )
    return model, trace


@dataclass(frozen=True)
class _Busy:
    """One vertex over one window in which it took records: its parallelism, records a
    second a subtask took, the share of the window its subtasks were busy on average, its
    busiest subtask's share over that average (`parallelism.skew_of`; None: not reported,
    or too idle to say), the window's length."""

    parallelism: int
    per_subtask: float
    busy: float
    ratio: float | None
    seconds: float


FIXED_FLOOR = 0.005
"""A fixed busy share under half a percent of a second is not told apart from none."""


def _cost(readings: Sequence[_Busy]) -> tuple[float, float]:
    """A subtask's busy share as a straight line in its records a second, fitted by least
    squares over the windows: (the share at none, records per busy second of the rest).
    Where the line does not rise from a share in [FIXED_FLOOR, 1) at none, or the rates
    are too alike to tell (the fastest under 1.5 times the slowest, or fewer than three
    windows), none is fixed and the capacity is all the records over all the busy time
    (DS2's true processing rate, over the whole recording)."""
    records = sum(r.per_subtask * r.parallelism * r.seconds for r in readings)
    busy_s = sum(r.busy * r.parallelism * r.seconds for r in readings)
    pooled = records / busy_s
    xs = [r.per_subtask for r in readings]
    ys = [r.busy for r in readings]
    if len(xs) < 3 or max(xs) < 1.5 * min(xs):
        return 0.0, pooled
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    spread = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / spread
    fixed = my - slope * mx
    if slope <= 0 or not FIXED_FLOOR <= fixed < 1:
        return 0.0, pooled
    return fixed, 1 / slope


def _skews_by_parallelism(
    readings: Sequence[_Busy], cost: tuple[float, float] | None
) -> dict[int, float]:
    """Per parallelism, how many times the average records its busiest subtask takes (the
    median over the windows at least pl.SKEW_BUSY busy): from its busy share over the
    average's, less the share every subtask spends whatever its records (`cost`'s). With
    none fixed, the ratio itself."""
    fixed = cost[0] if cost else 0.0
    found: dict[int, list[float]] = {}
    for r in readings:
        if r.ratio is None or r.busy - fixed <= 0.01:
            continue
        found.setdefault(r.parallelism, []).append((r.ratio * r.busy - fixed) / (r.busy - fixed))
    return {p: statistics.median(skews) for p, skews in sorted(found.items())}


def replay(
    model: Model,
    trace: Sequence[Window],
    config: pl.PolicyConfig,
    restart_ms: int,
    *,
    decide: bool = True,
    window_ms: int = pl.DEFAULT_WINDOW_MS,
) -> Outcome:
    """The trace run through the model at the parallelism the policy (`decide`) or the
    first window's (not) chooses. The policy decides as it does on a live job: once the
    current run of the tasks (since the start, or since the last rescale's downtime
    ended: Flink's counters restart with the tasks) covers `window_ms`, on the loads over
    the run's last `window_ms`, a rise judged on its last `config.scale_up_window_ms`
    too (advice.py's `newest_run`, `unfilled` and `recent`), and sends only what is worth
    its downtime (parallelism.worth, as decisions.evaluate); a vertex's busiest subtask
    judged at another parallelism by the skew it showed there in the replay, as the live
    autoscaler keeps them (parallelism.recorded)."""
    parallelism = dict(model.parallelism)
    state, now_ms, down_ms = pl.PolicyState(), 0, 0
    backlog, rescales, downtime, slot_seconds = 0.0, 0, 0, 0.0
    after: list[dict[str, int]] = []
    backlogs: list[float] = []
    run: list[_Step] = []  # the current run of the tasks, window by window
    readings: pl.Readings = {}  # the skews it saw, as the live autoscaler keeps them
    run_s = 0.0  # its length
    for window in trace:
        seconds = window.seconds
        now_ms += int(seconds * 1000)
        stopped = min(seconds, down_ms / 1000)
        down_ms = max(0, down_ms - int(seconds * 1000))
        running = seconds - stopped
        arrived = window.arrival * seconds
        processed = min(arrived + backlog, model.sustained(parallelism) * running)
        before = backlog
        backlog = max(0.0, backlog + arrived - processed)
        slot_seconds += max(parallelism.values()) * seconds
        if stopped > 0:
            run, run_s = [], 0.0  # the tasks restarted: a new run
        if running > 0:
            run.append(_Step(running, processed, (backlog - before) * running / seconds))
            run_s += running
        if decide and run and run_s * 1000 >= window_ms:
            loads = _loads(model, parallelism, _last(run, window_ms), backlog)
            rising = (
                _loads(model, parallelism, _last(run, config.scale_up_window_ms), backlog)
                if config.scale_up_window_ms and len(run) >= 2
                else []
            )
            readings = pl.remember(readings, loads)
            decision, state = pl.decide(
                loads,
                config,
                state,
                now_ms,
                restart_ms,
                recent=rising,
                skews=pl.skews(readings),
            )
            if decision.send and pl.worth(decision, config) is None:
                state = pl.sent(state, now_ms)
                rescales += 1
                downtime += restart_ms
                down_ms = restart_ms
                parallelism = {**parallelism, **decision.targets}
        after.append(dict(parallelism))
        backlogs.append(backlog)
    ordered = sorted(backlogs) or [0.0]
    return Outcome(
        rescales,
        downtime,
        _percentile(ordered, 0.5),
        _percentile(ordered, 0.99),
        ordered[-1],
        slot_seconds,
        tuple(after),
        tuple(backlogs),
    )


@dataclass(frozen=True)
class _Step:
    """What the model did over one window of the trace while the tasks ran."""

    seconds: float
    processed: float
    """Records its sources emitted."""
    growth: float
    """How much their backlog grew."""


def _last(run: Sequence[_Step], within_ms: int) -> _Step:
    """The run's last `within_ms` as one step (at least that long, where the run is)."""
    seconds = processed = growth = 0.0
    for step in reversed(run):
        seconds, processed, growth = (
            seconds + step.seconds,
            processed + step.processed,
            growth + step.growth,
        )
        if seconds * 1000 >= within_ms:
            break
    return _Step(seconds, processed, growth)


def _loads(model: Model, parallelism: dict[str, int], step: _Step, backlog: float) -> list[pl.Load]:
    """The loads the decision would have seen over `step` of the model running at
    `parallelism`, its sources' backlog now `backlog`."""
    processed, seconds, growth = step.processed, step.seconds, step.growth
    reach = model.reach()
    loads = []
    for v in model.vertices:
        taken = processed * reach[v]
        p = parallelism[v]
        per_subtask = taken / seconds / p if seconds > 0 else 0.0
        average = model.busy(v, per_subtask) if seconds > 0 else 0.0
        busy = average * seconds * 1000 * p
        source = not model.inputs[v]
        loads.append(
            pl.Load(
                vertex_id=v,
                name=model.names[v],
                parallelism=parallelism[v],
                max_parallelism=model.max_parallelism[v],
                inputs=model.inputs[v],
                seconds=seconds,
                records_in=taken,
                records_out=taken * model.selectivity[v],
                busy_ms=busy,
                backlog=backlog if source else None,
                backlog_growth=growth if source else None,
                partitions=model.partitions.get(v) if source else None,
                keyed=model.keyed.get(v, False),
                busiest=min(1.0, model.busy(v, per_subtask * model.skew_at(v, p)))
                if model.skew.get(v)
                else None,
            )
        )
    return loads


def _percentile(ordered: Sequence[float], q: float) -> float:
    """The nearest-rank percentile of sorted values."""
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def as_text(
    key: str,
    model: Model,
    trace: Sequence[Window],
    tries: Sequence[tuple[str, pl.PolicyConfig, int]],
    restart_ms: int | None,
) -> list[str]:
    """The model, then one line per setting: as the job ran (no decision), then each of
    `tries` (name, settings, metric window in ms), with the job's recorded downtime
    (`restart_ms`) or the setting's."""
    seconds = sum(w.seconds for w in trace)
    capacities = ", ".join(
        f"{model.names[v] or v} {c:.1f} rec/s{_fixed(model, v)}{_skews(model, v)}"
        if c
        else f"{model.names[v] or v} idle"
        for v, c in model.capacity.items()
    )
    downtime = "recorded" if restart_ms is not None else "job.autoscaler.restart.time"
    width = min(72, max([44, *(len(name) for name, _, _ in tries)]))
    lines = [
        f"{key}: {len(trace)} windows, {seconds:.0f} s of recorded load; a subtask's capacity: "
        f"{capacities}; a rescale's downtime: {downtime}",
        f"{'setting':<{width}} {'rescales':>8} {'downtime':>9} {'backlog p50':>11} {'p99':>9} "
        f"{'max':>9} {'slot-s':>8}",
    ]
    rows = [("as run (no decision)", replay(model, trace, pl.PolicyConfig(), 0, decide=False))]
    for name, config, window_ms in tries:
        down = config.restart_ms if restart_ms is None else restart_ms
        rows.append((name, replay(model, trace, config, down, window_ms=window_ms)))
    for name, o in rows:
        lines.append(
            f"{_fit(name, width):<{width}} {o.rescales:>8} {o.downtime_ms / 1000:>8.1f}s "
            f"{o.backlog_p50:>11.0f} {o.backlog_p99:>9.0f} {o.backlog_max:>9.0f} "
            f"{o.slot_seconds:>8.0f}"
        )
    return lines


def _fixed(model: Model, vertex: str) -> str:
    """`, busy 18 % at any rate`, where a subtask's busy time has a fixed part."""
    fixed = model.fixed.get(vertex, 0.0)
    return f", busy {fixed:.0%} at any rate" if fixed else ""


def _skews(model: Model, vertex: str) -> str:
    """` (busiest subtask's records / average: 1.16 at 2, ...)`, where one took more."""
    skews = model.skew.get(vertex) or {}
    if all(skew < 1.05 for skew in skews.values()):
        return ""
    shown = ", ".join(f"{skew:.2f} at {p}" for p, skew in sorted(skews.items()))
    return f" (busiest subtask's records / average: {shown})"


def _fit(name: str, width: int) -> str:
    """A setting's name in `width` characters: its end kept, where the settings differ."""
    return name if len(name) <= width else "…" + name[len(name) - width + 1 :]
