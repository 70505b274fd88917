"""How much parallelism each vertex of a real Flink job needs, from its workload samples
(issue 50, item 3: the decision's rules). Pure: samples, settings and the time in; a
decision, its evidence and the policy's state out.

The rule is DS2's (Kalavri et al., OSDI'18), as the Flink Kubernetes Operator's autoscaler
applies it, over a window between two samples of one run of the job's tasks
(signal_tables.py's counters; a restart between them resets them):
- a vertex's **capacity** is the records it processed per busy second of one subtask
  (Δ records in / Δ accumulated busy time, which Flink sums over the subtasks), or per
  busy second of its busiest subtask (below); a source's records are those it emitted;
- the job's **input rate** is what arrived per second on its sources' topics (below,
  "Arrivals"), else what they emitted per second plus how fast their backlog grew; the
  **target rate** adds what clears the backlog, and
  what a restart's downtime adds to it, within the catch-up time;
- each vertex's target rate is its inputs' target rates times their selectivity
  (records out per record in), in topological order;
- the **target parallelism** is the target rate over the capacity at the utilization
  target, within 1 and the vertex's bounds.

**Key groups and partitions.** A vertex fed by hash partitioning (keyBy) holds its
maximum parallelism's key groups, a Kafka source its topic's partitions; as the
operator's autoscaler (`job.autoscaler.scaling.key-group.partitions.adjust.mode`), a
target is raised to the next parallelism that divides them (EVENLY_SPREAD, its default:
every subtask gets as many), or to the next one that lowers the most any subtask holds
(MAXIMIZE_UTILISATION), within the bounds; a lower target is never raised past the
current parallelism. With none within the bounds the target stays as computed.

**The busiest subtask.** A keyed vertex's subtasks are as busy as the keys that fall on
them: the benchmark's 64 keys leave the busiest of 8 subtasks 15 of them, where even
would be 8 (bench/key_skew.py), so it saturates while the average says half. As the
operator (`job.autoscaler.metrics.busy-time.aggregator`, MAX by default), a vertex is
judged by its busiest subtask: its capacity is its rate over the busiest subtask's busy
share (Flink's `busyTimeMsPerSecond`, max over the subtasks, averaged over the window's
samples: the bridge reads it) times its parallelism, never more than the average gives;
AVG judges it by Flink's accumulated busy time alone, as scalefold did until 2026-12-06.
Where no sample reports the gauge, the average.

**The busiest subtask at another parallelism.** MAX scales the busiest subtask's share
linearly to any parallelism, which holds where the job runs and is pessimistic below it:
the benchmark's `Work` at 8 after a peak, its busiest 1.88 times the average, keeps 8 at
400 records a second where 4 (its busiest 1.31 times the average there) would do. Where
the job ran at other parallelisms, `decide` takes their recorded skews (`skews`:
`recorded` from its samples, a window each at least SKEW_BUSY busy, the median per
parallelism; the history's autoscaler keeps them as it runs and reads them back from the
job's samples on a start) and resizes a vertex to the least aligned parallelism whose
busiest subtask, as skewed as recorded there or at the nearest one recorded (the higher
of two as near; the current one as measured now), is within the utilization target at
the target rate, the widest allowed where none is. With no skew recorded elsewhere, or
AVG, the straight line alone.

**A rise** is judged on the recent part of the window as well (`scale_up_window_ms`, 30 s
by default; 0: off): when the sources' input rate over it is higher than over the whole
window, the higher rate sets the targets. A window that began before a step of the load
averages it away (a quarter of a minute at the new rate reads as a third of it), and a
decision made on it is followed by another a stabilization interval later; a fall is
still judged on the whole window and waits the scale-down delay. scalefold's deviation
from the operator, which averages the whole window both ways. Where every source's
arrivals over the newest interval are the broker's count (below), that interval alone is
judged too (advice.recent): a decision 4 s into a step read 381 records a second over
the last 34 s where 1,200 arrived (the benchmark's long steps trace: 2 -> 4, then 4 -> 8
82 s later with 57,731 behind). Counted any other way a 10 s interval may hold two of
Flink's metric refreshes or none, so it is not judged alone (until 2026-12-06 the
broker's backlog was taken to be exact enough: it is not, below).

**Arrivals.** Where both samples of a window carry the broker's end offsets of a
source's partitions (the bridge's `sourceEndOffsets`), what arrived over it is their
change, and the input rate is that over the window's length: exact, from one clock's
answers. Otherwise it is what the source emitted plus its backlog's growth, whose two
terms come from Flink's metrics of different ages (the records written and the reader's
`currentOffset`, refreshed at other instants): over a 10 s interval of 300 records a
second the sum read 32, then 623 (the benchmark's steps trace, 2026-12-06, which sent
2 -> 8 on the 623 a minute before the step came).

A vertex whose subtasks would be busy within the boundary of the target at its target
rate keeps its parallelism: the operator's test (its `SCALE_UP_RATE_THRESHOLD` and
`SCALE_DOWN_RATE_THRESHOLD`, from the target rate, catching up included, over the
utilization target plus and minus the boundary, around the vertex's true processing
rate). The rate is the one that sized the target, so a rise judged on the recent part of
the window is judged so here too, and a backlog counts by what catching it up adds:
until 2026-12-06 scalefold kept a vertex by its busy share over the whole window with no
backlog at all, and sent 2 -> 4 at 400 records/s where two subtasks were 86 % busy (a
window that began at the job's start read 41 %, and the broker's backlog, up to a metric
refresh of reading, is never 0: the benchmark's burst trace).

**An idle job.** Where nothing arrived on the sources over the window and nothing is
behind them, both known (the broker's count, or the emitted records and a backlog read as
0), a vertex that took no records and measured no capacity is sized for a rate of 0: 1
subtask, which waits the scale-down delay like any lower target. The operator does the
same (a rate of 0 is an infinite true processing rate to it, so its scale factor falls to
the least). Until 2026-12-07 scalefold kept such a vertex as it was and started its
scale-down wait again: a job idle all night held its peak's slots. Where the backlog is
not known, an idle vertex keeps its parallelism (a source that stopped reading is not a
source with nothing to read).

**A fall.** A lower target is no lower than the parallelism less `max_scale_down_factor`
of it, rounded up and aligned (`job.autoscaler.scale-down.max-factor`: the operator's
limit, its default 0.6, so an idle vertex at 8 goes 8 -> 4 -> 2 -> 1, a restart and a
scale-down delay a step). scalefold's default is 1, no limit: a restart is the cost it
weighs, and three of them to reach what one reaches is what its users rescale too often
by. The operator's reason for 0.6 (a capacity taken as linear can overstate what fewer
subtasks take) the recorded skew meets in part ("The busiest subtask").

A lower target waits `scale_down_delay_ms` of staying lower before it is applied (the
operator's delayed scale-down); no decision follows the last one sent within
`stabilization_ms`. So a job is rescaled at most 3,600,000 / `stabilization_ms` times an
hour (`max_rescales_per_hour`), whatever its load.
A sample that cannot be used (NaN, negative, counters that went backwards, a vertex
without its metrics) decides nothing: the reason says which and why.

Settings keep the operator's key names (`job.autoscaler.*`) where they mean the same;
the defaults are scalefold's, chosen for jobs that rescale in seconds, not minutes.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

TARGET_UTILIZATION = "job.autoscaler.utilization.target"
DEPRECATED_KEYS = {"job.autoscaler.target.utilization": TARGET_UTILIZATION}
"""Keys the operator still reads under their newer name (its deprecated keys)."""
UTILIZATION_BOUNDARY = "job.autoscaler.target.utilization.boundary"
CATCH_UP = "job.autoscaler.catch-up.duration"
RESTART_TIME = "job.autoscaler.restart.time"
SCALE_DOWN_DELAY = "job.autoscaler.scale-down.interval"
STABILIZATION = "job.autoscaler.stabilization.interval"
MAX_PARALLELISM = "job.autoscaler.vertex.max-parallelism"
ADJUST_MODE = "job.autoscaler.scaling.key-group.partitions.adjust.mode"
BUSY_TIME_AGGREGATOR = "job.autoscaler.metrics.busy-time.aggregator"
MAX_SCALE_DOWN_FACTOR = "job.autoscaler.scale-down.max-factor"
SCALE_UP_WINDOW = "scalefold.autoscaler.scale-up.window"
"""scalefold's own key (the operator has none): module doc, "A rise"."""
EVENLY_SPREAD, MAXIMIZE_UTILISATION = "EVENLY_SPREAD", "MAXIMIZE_UTILISATION"
ADJUST_MODES = (EVENLY_SPREAD, MAXIMIZE_UTILISATION)
MAX, AVG = "MAX", "AVG"
DEFAULT_WINDOW_MS = 60_000
"""The window a decision looks at (`job.autoscaler.metrics.window`, advice.py)."""
BUSY_TIME_AGGREGATORS = (MAX, AVG)
"""The operator's aggregators of a vertex's busy time over its subtasks but MIN (the
bridge reads no least busy subtask)."""

IDLE_BUSY_MS = 1.0
"""Less busy time than this over a window measures no capacity (an idle vertex)."""


@dataclass(frozen=True)
class PolicyConfig:
    """The decision's settings (module doc: the keys they are read from)."""

    target_utilization: float = 0.7
    utilization_boundary: float = 0.2
    catch_up_ms: int = 5 * 60_000
    restart_ms: int = 30_000
    """The downtime a rescale is assumed to cost when the job has no recorded one."""
    scale_down_delay_ms: int = 10 * 60_000
    stabilization_ms: int = 2 * 60_000
    max_parallelism: int | None = None
    """The cluster's cap on any vertex (its slots); None: only the vertices' own bounds."""
    adjust_mode: str = EVENLY_SPREAD
    scale_up_window_ms: int = 30_000
    busy_time_aggregator: str = MAX
    max_scale_down_factor: float = 1.0
    """The most of its parallelism a vertex loses in one decision (1: no limit; the
    operator's default is 0.6: module doc, "A fall")."""

    def __post_init__(self) -> None:
        if not 0 < self.target_utilization <= 1:
            raise ValueError(f"{TARGET_UTILIZATION} must be in (0, 1]")
        if not 0 <= self.utilization_boundary < self.target_utilization:
            raise ValueError(f"{UTILIZATION_BOUNDARY} must be in [0, {TARGET_UTILIZATION})")
        if self.catch_up_ms <= 0 or self.stabilization_ms <= 0:
            raise ValueError(f"{CATCH_UP} and {STABILIZATION} must be positive")
        if self.restart_ms < 0 or self.scale_down_delay_ms < 0 or self.scale_up_window_ms < 0:
            raise ValueError(
                f"{RESTART_TIME}, {SCALE_DOWN_DELAY} and {SCALE_UP_WINDOW} must not be negative"
            )
        if not 0 <= self.max_scale_down_factor <= 1:
            raise ValueError(f"{MAX_SCALE_DOWN_FACTOR} must be in [0, 1]")
        if self.adjust_mode not in ADJUST_MODES:
            raise ValueError(f"{ADJUST_MODE} must be one of {', '.join(ADJUST_MODES)}")
        if self.busy_time_aggregator not in BUSY_TIME_AGGREGATORS:
            raise ValueError(
                f"{BUSY_TIME_AGGREGATOR} must be one of {', '.join(BUSY_TIME_AGGREGATORS)}"
            )

    @property
    def max_rescales_per_hour(self) -> int:
        """The bound on decisions sent per job and hour (the stabilization interval's)."""
        return math.ceil(3_600_000 / self.stabilization_ms)


@dataclass(frozen=True)
class VertexSample:
    """One vertex in one sample (a `flink_vertex_signals` row's columns)."""

    vertex_id: str
    parallelism: int | None
    max_parallelism: int | None
    read_records: float | None
    write_records: float | None
    busy_ms: float | None
    """Flink's accumulated busy time, summed over the subtasks."""
    pending_records: float | None
    name: str | None = None
    inputs: tuple[str, ...] = ()
    """The vertices feeding it (none: a source)."""
    partitions: int | None = None
    """The Kafka partitions a source reads: more subtasks than these read nothing."""
    keyed: bool | None = None
    """Whether an input reaches it by hash partitioning (keyBy): its key groups spread."""
    busiest_ms_per_s: float | None = None
    """Flink's `busyTimeMsPerSecond` of its busiest subtask when sampled (the gauge's max
    over the subtasks; module doc, "The busiest subtask")."""
    received: float | None = None
    """A Kafka source's topic's end offsets, summed over the partitions it reads, as the
    broker answered when sampled: what the topic had received (module doc, "Arrivals")."""


@dataclass(frozen=True)
class Sample:
    """One workload sample of a job: its vertices in topological order (sources first)."""

    at_ms: int
    vertices: tuple[VertexSample, ...]


@dataclass(frozen=True)
class Load:
    """One vertex over a window between two samples (`window`)."""

    vertex_id: str
    name: str | None
    parallelism: int
    max_parallelism: int | None
    inputs: tuple[str, ...]
    seconds: float
    records_in: float
    records_out: float
    busy_ms: float
    backlog: float | None
    backlog_growth: float | None
    partitions: int | None = None
    keyed: bool = False
    busiest: float | None = None
    """The share of a second its busiest subtask was busy, averaged over the window's
    samples (None: none reported one)."""
    arrivals: float | None = None
    """A source's records that arrived on its topic over the window, from the broker's end
    offsets (None: not both samples had them, over the same partitions)."""

    @property
    def capacity(self) -> float | None:
        """Records one subtask processes per busy second, its busy time the subtasks'
        average (None: idle, not measurable)."""
        if self.busy_ms < IDLE_BUSY_MS:
            return None
        return self.records_in / (self.busy_ms / 1000)

    @property
    def busy(self) -> float:
        """The share of the window its subtasks were busy, on average."""
        return self.busy_ms / (self.seconds * 1000 * self.parallelism)

    def share(self, aggregator: str) -> float:
        """The busy share the vertex is judged by: its subtasks' average (AVG), or its
        busiest subtask's where one was reported (MAX; never below the average)."""
        if aggregator == MAX and self.busiest is not None:
            return max(self.busiest, self.busy)
        return self.busy

    def capacity_by(self, aggregator: str) -> float | None:
        """Records one subtask processes per busy second with every subtask as busy as
        `share` says: a vertex's rate over that share of its subtasks' time (the
        operator's true processing rate, per subtask)."""
        busy_s = self.share(aggregator) * self.seconds * self.parallelism
        if self.busy_ms < IDLE_BUSY_MS or busy_s <= 0:
            return None
        return self.records_in / busy_s

    @property
    def selectivity(self) -> float:
        return self.records_out / self.records_in if self.records_in > 0 else 1.0


@dataclass(frozen=True)
class VertexDecision:
    """What one vertex needs, and the evidence."""

    vertex_id: str
    name: str | None
    current: int
    target: int
    target_rate: float
    """Records a second it should take (its inputs' targets, through their selectivity)."""
    capacity: float | None
    busy: float
    reason: str


@dataclass(frozen=True)
class PolicyState:
    """What the policy remembers of a job between decisions."""

    last_sent_ms: int | None = None
    lower_since_ms: Mapping[str, int] = field(default_factory=dict)
    """Per vertex, since when its target has been below its parallelism."""


@dataclass(frozen=True)
class Decision:
    """The outcome for a job: `send` the `targets` (FLIP-291 upper bounds), or not, and why."""

    send: bool
    reason: str
    vertices: tuple[VertexDecision, ...] = ()
    input_rate: float | None = None
    backlog: float | None = None
    restart_ms: int | None = None

    @property
    def targets(self) -> dict[str, int]:
        return {v.vertex_id: v.target for v in self.vertices}


def window(
    first: Sample, last: Sample, between: Sequence[Sample] = ()
) -> tuple[list[Load], list[str]]:
    """Each vertex's load between two samples of one run of the tasks, and the reasons
    the window cannot be used (empty: it can). `between`: the run's samples between
    them, whose busiest-subtask gauges are averaged with the last one's."""
    seconds = (last.at_ms - first.at_ms) / 1000
    if seconds <= 0:
        return [], [f"the samples are not in time order ({first.at_ms} then {last.at_ms})"]
    busiest = _busiest([*between, last])
    before = {v.vertex_id: v for v in first.vertices}
    later = {v.vertex_id for v in last.vertices}
    loads: list[Load] = []
    problems = [
        f"{_named(v)}: not in the later sample" for v in first.vertices if v.vertex_id not in later
    ]
    for v in last.vertices:
        old = before.get(v.vertex_id)
        problem = _unusable(old, v)
        if problem or old is None or v.parallelism is None:
            problems.append(f"{_named(v)}: {problem}")
            continue
        source = not v.inputs
        out = _delta(old.write_records, v.write_records)
        loads.append(
            Load(
                vertex_id=v.vertex_id,
                name=v.name,
                parallelism=v.parallelism,
                max_parallelism=v.max_parallelism,
                inputs=v.inputs,
                seconds=seconds,
                records_in=out if source else _delta(old.read_records, v.read_records),
                records_out=out,
                busy_ms=max(0.0, _delta(old.busy_ms, v.busy_ms)),  # back: none measured
                backlog=v.pending_records if _finite(v.pending_records) else None,
                backlog_growth=_delta(old.pending_records, v.pending_records)
                if _finite(v.pending_records) and _finite(old.pending_records)
                else None,
                partitions=v.partitions if source else None,
                keyed=bool(v.keyed),
                busiest=busiest.get(v.vertex_id),
                arrivals=_arrivals(old, v) if source else None,
            )
        )
    return loads, problems


def _arrivals(old: VertexSample, new: VertexSample) -> float | None:
    """What arrived on a source's topic between two samples: the change of the broker's
    end offsets over the same partitions (None: either sample lacks them, the partitions
    differ, or the offsets went back: a topic made again)."""
    a, b = old.received, new.received
    if a is None or b is None or old.partitions != new.partitions:
        return None
    return b - a if _finite(a) and _finite(b) and b >= a else None


def _busiest(samples: Sequence[Sample]) -> dict[str, float]:
    """Per vertex, the mean of its busiest subtask's busy share over `samples` (a gauge
    that is NaN, negative or over a second is no reading)."""
    readings: dict[str, list[float]] = {}
    for sample in samples:
        for v in sample.vertices:
            ms = v.busiest_ms_per_s
            if ms is not None and math.isfinite(ms) and 0 <= ms <= 1000:
                readings.setdefault(v.vertex_id, []).append(ms / 1000)
    return {vertex: sum(shares) / len(shares) for vertex, shares in readings.items()}


def same_run(first: Sample, last: Sample) -> bool:
    """Whether two samples can be of one run of the job's tasks: the same vertices at the
    same parallelism, and no record count lower in the later one (a restart resets them).
    Busy time is no witness: a source's accumulated busy time, summed by Flink over its
    subtasks, was seen to go back within one run (370, 402, 351 ms: the benchmark)."""
    before = {v.vertex_id: v for v in first.vertices}
    if before.keys() != {v.vertex_id for v in last.vertices}:
        return False
    for v in last.vertices:
        old = before[v.vertex_id]
        if old.parallelism != v.parallelism:
            return False
        for a, b in (
            (old.read_records, v.read_records),
            (old.write_records, v.write_records),
        ):
            if a is not None and b is not None and b < a:
                return False
    return True


def _named(v: VertexSample) -> str:
    return v.name or v.vertex_id


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value) and value >= 0


def _delta(before: float | None, after: float | None) -> float:
    return (after or 0.0) - (before or 0.0)


def _unusable(old: VertexSample | None, new: VertexSample) -> str | None:
    if old is None:
        return "not in the earlier sample"
    if old.parallelism != new.parallelism or not new.parallelism or new.parallelism < 1:
        return f"parallelism {old.parallelism} then {new.parallelism}: not one run of its tasks"
    counters = ("read_records", "write_records", "busy_ms")
    for name in counters:
        a, b = getattr(old, name), getattr(new, name)
        if a is None or b is None:
            return f"no {name} reported"
        if not (_finite(a) and _finite(b)):
            return f"{name} is {a} then {b}: not a count"
        if b < a and name != "busy_ms":  # busy time: same_run's doc
            return f"{name} went back from {a} to {b}: the tasks restarted"
    return None


def decide(
    loads: Sequence[Load],
    config: PolicyConfig,
    state: PolicyState,
    now_ms: int,
    restart_ms: int | None = None,
    *,
    recent: Sequence[Load] = (),
    skews: Mapping[str, Mapping[int, float]] | None = None,
) -> tuple[Decision, PolicyState]:
    """The decision for one job over one window (`window`'s loads, topological order),
    and the state to decide the next one with if it is not sent (`sent` gives the state
    if it is). `restart_ms`: the downtime of this job's recorded restarts (None:
    `config.restart_ms`); `recent`: the loads over the window's last
    `config.scale_up_window_ms` (module doc, "A rise"; none: the window alone); `skews`:
    per vertex, its busiest subtask's skew at each parallelism the job ran at (`skews`;
    module doc, "The busiest subtask at another parallelism")."""
    downtime = config.restart_ms if restart_ms is None else restart_ms
    if not loads:
        return Decision(False, "no usable window of samples"), state
    if state.last_sent_ms is not None and now_ms - state.last_sent_ms < config.stabilization_ms:
        wait = config.stabilization_ms - (now_ms - state.last_sent_ms)
        return Decision(False, f"stabilizing after the last rescale: {wait} ms more"), state
    sources = [load for load in loads if not load.inputs]
    if not sources:
        return Decision(False, "no source vertex: the input rate is unknown"), state
    emitted = sum(s.records_out for s in sources) / sources[0].seconds
    known = [s.backlog for s in sources]
    backlog = sum(b for b in known if b is not None) if any(b is not None for b in known) else None
    rate_in = input_rate(sources)
    rising = input_rate([x for x in recent if not x.inputs]) if config.scale_up_window_ms else 0.0
    rise = ""
    if rising > rate_in:
        seconds = next(x.seconds for x in recent)
        rise = f" (input {rising:.1f} rec/s over the last {seconds:.0f} s, {rate_in:.1f} over the window)"
        rate_in = rising
    # nothing arrived and nothing is behind, both known: an idle vertex is sized for 0
    quiet = rate_in <= 0 and backlog is not None and backlog <= 0
    catch_up_s = config.catch_up_ms / 1000
    # what clears the backlog, and what a restart's downtime adds to it, within catch-up
    extra = ((backlog or 0.0) + rate_in * downtime / 1000) / catch_up_s
    targets_out: dict[str, float] = {}
    decided: list[VertexDecision] = []
    lower_since = dict(state.lower_since_ms)
    for load in loads:
        if load.inputs:
            rate = sum(targets_out.get(u, 0.0) for u in load.inputs)
        else:
            share = load.records_out / (emitted * load.seconds) if emitted > 0 else 1 / len(sources)
            rate = (rate_in + extra) * share
        targets_out[load.vertex_id] = rate * load.selectivity
        vertex = _vertex(load, rate, config, (skews or {}).get(load.vertex_id, {}), quiet)
        if vertex.target < vertex.current:
            since = lower_since.setdefault(load.vertex_id, now_ms)
            if now_ms - since < config.scale_down_delay_ms:
                left = config.scale_down_delay_ms - (now_ms - since)
                vertex = replace(
                    vertex,
                    target=vertex.current,
                    reason=f"{vertex.reason}; scale-down to {vertex.target} waits {left} ms more",
                )
        else:
            lower_since.pop(load.vertex_id, None)
        decided.append(vertex)
    changed = [v for v in decided if v.target != v.current]
    moves = ", ".join(f"{_vname(v)} {v.current} -> {v.target}" for v in changed)
    reason = f"rescale: {moves}{rise}" if changed else "every vertex keeps its parallelism"
    decision = Decision(bool(changed), reason, tuple(decided), rate_in, backlog, downtime)
    return decision, PolicyState(state.last_sent_ms, lower_since)


def input_rate(sources: Sequence[Load]) -> float:
    """What arrived per second on the sources' topics where every source has the broker's
    count of it (module doc, "Arrivals"), else what they emitted per second plus how fast
    their backlog grew (0: none)."""
    if not sources:
        return 0.0
    seconds = sources[0].seconds
    arrived = [s.arrivals for s in sources]
    if all(a is not None for a in arrived):
        return sum(a for a in arrived if a is not None) / seconds
    emitted = sum(s.records_out for s in sources)
    growth = sum(s.backlog_growth for s in sources if s.backlog_growth is not None)
    return max((emitted + growth) / seconds, 0.0)


def sent(state: PolicyState, now_ms: int) -> PolicyState:
    """The state after a decision was sent at `now_ms`: the stabilization interval starts,
    and every vertex's wait for a lower target starts again."""
    return PolicyState(now_ms, {})


def sustained(vertices: Sequence[VertexDecision], parallelism: Mapping[str, int]) -> float | None:
    """The input rate the job keeps up with at `parallelism` (by vertex; the decision's
    own `current` where it names none): its bottleneck's capacity over the share of the
    job's target rate that vertex takes. None: no vertex's capacity was measured."""
    total = sum(v.target_rate for v in vertices if v.capacity is not None)
    rates = [
        v.capacity * parallelism.get(v.vertex_id, v.current) / v.target_rate * total
        for v in vertices
        if v.capacity is not None and v.target_rate > 0
    ]
    return min(rates) if rates and total > 0 else None


def worth(decision: Decision, config: PolicyConfig) -> str | None:
    """Why a decision to rescale costs more than it gains (None: it does not): a rescale
    stops the job for `decision.restart_ms`, whose arrivals join the backlog.

    - Up, while the job keeps up at its current parallelism with a backlog to clear: worth
      it only if the backlog clears sooner with the downtime first than without the rescale.
      A job falling behind, or up for headroom with nothing behind, is always worth it.
    - Down: worth it only if it frees a slot, and the lower parallelism still keeps up
      and catches up what arrives in the downtime, and the backlog, within the catch-up
      time. A job's vertices share one slot-sharing group unless it says otherwise
      (Flink's default), which takes as many slots as its widest vertex: lowering a
      narrower one restarts the job and frees nothing (the benchmark's steps trace: the
      source 2 -> 1 beside `Work` at 8, by both autoscalers)."""
    if not decision.send:
        return None
    up = any(v.target > v.current for v in decision.vertices)
    widest = max(v.current for v in decision.vertices)
    if not up and max(v.target for v in decision.vertices) >= widest:
        return (  # whatever was measured: the benchmark's idle tail sent the source down
            f"it frees no slot: the job's slots are its widest vertex's ({widest}), "
            "which keeps its parallelism"
        )
    if decision.input_rate is None:
        return None
    rate, backlog = decision.input_rate, decision.backlog or 0.0
    down_s = (decision.restart_ms or 0) / 1000
    current = sustained(decision.vertices, {})
    target = sustained(decision.vertices, decision.targets)
    if current is None or target is None:
        return None  # no capacity measured: nothing to weigh with
    if up:
        return _costly_up(rate, backlog, down_s, current, target)
    return _costly_down(rate, backlog + rate * down_s, target, config.catch_up_ms / 1000)


def _costly_up(
    rate: float, backlog: float, down_s: float, current: float, target: float
) -> str | None:
    if current <= rate or backlog <= 0:
        return None  # falling behind, or up for headroom with nothing behind
    now_s = backlog / (current - rate)
    behind = backlog + rate * down_s
    after_s = down_s + behind / (target - rate) if target > rate else math.inf
    if after_s < now_s:
        return None
    return (
        f"the backlog of {backlog:.0f} clears in {now_s:.0f} s as it runs; "
        f"with the rescale's {down_s:.0f} s downtime first, in {after_s:.0f} s"
    )


def _costly_down(rate: float, behind: float, target: float, catch_up_s: float) -> str | None:
    if target <= rate:
        return f"{target:.1f} rec/s at the lower parallelism would not keep up with {rate:.1f}"
    after_s = behind / (target - rate)
    if after_s <= catch_up_s:
        return None
    return (
        f"the lower parallelism would take {after_s:.0f} s to catch up the backlog and the "
        f"downtime's arrivals, more than the catch-up time ({catch_up_s:.0f} s)"
    )


def _vname(v: VertexDecision) -> str:
    return v.name or v.vertex_id


def _vertex(
    load: Load,
    rate: float,
    config: PolicyConfig,
    skew_by_p: Mapping[int, float],
    quiet: bool = False,
) -> VertexDecision:
    """One vertex's target parallelism for `rate` records a second; `skew_by_p`: its
    busiest subtask's skew at the parallelisms the job ran at (`skews`); `quiet`: nothing
    arrived on the job's sources over the window and none of it is behind (module doc,
    "An idle job")."""
    aggregator = config.busy_time_aggregator
    capacity = load.capacity_by(aggregator)
    base = VertexDecision(
        load.vertex_id,
        load.name,
        load.parallelism,
        load.parallelism,
        rate,
        capacity,
        load.share(aggregator),
        "",
    )
    bounds = [b for b in (load.max_parallelism, config.max_parallelism, load.partitions) if b]
    upper = min(bounds) if bounds else None
    groups = load.partitions or (load.max_parallelism if load.keyed else None)
    if capacity is None or capacity <= 0:
        if quiet and rate <= 0 and load.records_in <= 0 and load.parallelism > 1:
            why = "idle: nothing arrived and nothing is behind, sized for a rate of 0: 1"
            return _limited(replace(base, target=1, reason=why), config, groups, upper)
        return replace(base, reason="idle: no busy time to measure its capacity by")
    needed = math.ceil(rate / (capacity * config.target_utilization) - 1e-9)
    target = max(1, min(needed, upper) if upper else needed)
    busy = rate / (capacity * load.parallelism)  # at the target rate
    skew = ""
    if aggregator == MAX and load.busiest is not None and load.busiest > load.busy:
        skew = f" (its busiest subtask {load.busiest:.0%} busy, {load.busy:.0%} on average)"
    if abs(busy - config.target_utilization) <= config.utilization_boundary:
        return replace(
            base,
            reason=f"busy {busy:.0%} at {rate:.1f} rec/s: within the target's boundary{skew}",
        )
    capped = ""
    if target < needed:
        capped = " (its partitions)" if target == load.partitions else " (capped)"
    why = f"needs {rate:.1f} rec/s at {capacity:.1f} rec/s a subtask{skew}: {target}{capped}"
    spread = aligned(target, load.parallelism, groups, upper, config.adjust_mode)
    if spread != target:
        kind = "partitions" if load.partitions else "key groups"
        why = f"{why}, {spread} for its {groups} {kind}"
    known = {p: s for p, s in skew_by_p.items() if p != load.parallelism}
    if aggregator == MAX and known and load.busiest is not None and load.capacity and load.busy:
        at = dict(known) | {load.parallelism: load.share(MAX) / load.busy}
        top = upper or max(spread, load.parallelism)
        fit = _by_skew(rate, load, skew=at, config=config, groups=groups, upper=top)
        rise = spread > load.parallelism  # never lowered by skews read elsewhere
        if fit is not None and fit[0] != spread and not (rise and fit[0] < load.parallelism):
            spread, busiest = fit
            why = (
                f"{why}; {spread} by its busiest subtask at {spread}, "
                f"{skew_near(at, spread):.2f} times the average"
                f"{' as recorded' if spread in known else ''}: {busiest:.0%} busy"
            )
    return _limited(replace(base, target=spread, reason=why), config, groups, upper)


def _limited(
    v: VertexDecision, config: PolicyConfig, groups: int | None, upper: int | None
) -> VertexDecision:
    """`v` with a lower target no lower than its parallelism less `max_scale_down_factor`
    of it (rounded up, as the operator does), aligned again (module doc, "A fall")."""
    least = math.ceil(v.current * (1 - config.max_scale_down_factor) - 1e-9)
    if v.target >= least:
        return v
    held = aligned(max(least, 1), v.current, groups, upper, config.adjust_mode)
    step = f"{config.max_scale_down_factor:.0%}"
    return replace(v, target=held, reason=f"{v.reason}; at most {step} lower a step: {held}")


SKEW_BUSY = 0.05
"""Less busy than this on average, a window's busiest subtask says nothing of how the
records spread (a few records, or the tasks starting)."""
SKEW_READINGS = 60
"""The readings `remember` keeps per vertex and parallelism, the newest."""

Readings = Mapping[str, Mapping[int, tuple[float, ...]]]
"""Per vertex and parallelism the job ran at: its busiest subtask's share of busy time
over the average, window by window (`remember`)."""


def skew_of(load: Load) -> float | None:
    """How many times as busy as their average the vertex's busiest subtask was over the
    window (None: no gauge reported, or too idle to say: under SKEW_BUSY)."""
    if load.busiest is None or load.busy < SKEW_BUSY:
        return None
    return max(1.0, load.busiest / load.busy)


def remember(readings: Readings, loads: Sequence[Load], keep: int = SKEW_READINGS) -> Readings:
    """`readings` with each load's skew added at its parallelism (the newest `keep`)."""
    found = {v: dict(at) for v, at in readings.items()}
    for load in loads:
        skew = skew_of(load)
        if skew is not None:
            at = found.setdefault(load.vertex_id, {})
            at[load.parallelism] = (*at.get(load.parallelism, ()), skew)[-keep:]
    return found


def recorded(
    samples: Sequence[Sample], keep: int = SKEW_READINGS, readings: Readings | None = None
) -> Readings:
    """`readings` (none: empty) with those of a job's samples (time order) added: a window
    between each two consecutive samples of one run."""
    found: Readings = readings or {}
    for first, last in itertools.pairwise(samples):
        if same_run(first, last):
            loads, problems = window(first, last)
            if not problems:
                found = remember(found, loads, keep)
    return found


def skews(readings: Readings) -> dict[str, dict[int, float]]:
    """Per vertex and parallelism, the median of its readings: what `decide` takes."""
    return {
        v: {p: statistics.median(values) for p, values in at.items() if values}
        for v, at in readings.items()
    }


def skew_near(skew: Mapping[int, float], parallelism: int) -> float:
    """The skew at `parallelism`: where it was recorded, else at the nearest parallelism
    recorded (the higher of two as near)."""
    nearest = min(skew, key=lambda p: (abs(p - parallelism), -p))
    return skew[nearest]


def _by_skew(
    rate: float,
    load: Load,
    *,
    skew: Mapping[int, float],
    config: PolicyConfig,
    groups: int | None,
    upper: int,
) -> tuple[int, float] | None:
    """The least aligned parallelism at which the busiest subtask, as skewed as recorded
    there (`skew_near`), is within the utilization target at `rate`, with how busy;
    the widest allowed where none is (None: no capacity measured)."""
    average = load.capacity  # records per busy second of one subtask, on average
    if not average:
        return None
    found = None
    for p in range(1, upper + 1):
        q = aligned(p, load.parallelism, groups, upper, config.adjust_mode)
        busiest = rate / q * skew_near(skew, q) / average
        found = (q, busiest)
        if busiest <= config.target_utilization:
            return found
    return found


def aligned(target: int, current: int, groups: int | None, upper: int | None, mode: str) -> int:
    """`target` raised to spread `groups` (key groups or partitions; None: not spread)
    evenly over the subtasks (EVENLY_SPREAD: a divisor) or to the next parallelism that
    lowers the most any subtask holds (MAXIMIZE_UTILISATION), at most `upper` and, for a
    lower target, at most `current` (module doc). Unchanged when none is found."""
    if not groups or target == current:
        return target
    top = min(groups, upper or groups)
    if target < current:
        top = min(top, current)
    for p in range(target, top + 1):
        if groups % p == 0 or (mode == MAXIMIZE_UTILISATION and groups // p < groups // target):
            return p
    return target
