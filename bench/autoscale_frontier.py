"""What any schedule of `Work`'s parallelism could have done on a trace, in hindsight: can
the side-by-side goal of issue 50 be met at all, and by what (not a test).

    .venv/bin/python -m bench.autoscale_frontier --schedule "steps peer 225=4 355=8" \\
        [--schedule "steps scalefold 201=8" ...] [--results .run/autoscale-bench/results.json]

The goal (bench/autoscale_bench.py's table) asks for fewer rescales than the peer at no
more backlog p99 and no more slot-seconds. Whether a schedule with fewer rescales does
that is a question about the trace and the job, not about a policy, and it is answered
here by trying every one, in a model of the benchmark's job:

- `Work` at parallelism p takes at most its **ceiling**: a subtask's records a second
  (`--capacity`) times the load's keys over the keys its busiest subtask holds
  (bench/key_skew.py, Flink's routing; 64 keys: 432, 762 and 1,067 records a second at
  2, 4 and 8);
- the **backlog** grows by what arrives beyond the ceiling and drains by what the
  ceiling leaves over, every `--step` seconds; nothing arrives in the tail; a rescale
  costs no time (Flink's were 0.1-0.3 s);
- **slot-seconds**: p over the run (the job's one slot-sharing group).

A given schedule (measured: the parallelism `Work` ran at from the start, and when each
rescale took it where) is put through the same model, so a candidate is compared with
the model of the peer's run, not with its measured numbers (the model's p99 runs 7-29 %
under the measured one: docs/benchmarks.md). Candidates: every schedule of fewer
rescales than the run made, over the parallelisms that divide the key groups (as both
autoscalers align a keyed vertex), a move every `--every` seconds. One that dominates
is **fair** when it obeys the settings both autoscalers were given at least as well as
the run did: no longer at a parallelism its load keeps busier than the utilization
target plus its boundary (with a wider one to go to) than the run stayed, and never
lowered before the lower parallelism's ceiling has taken the load for the scale-down
interval. A dominating schedule that is not fair wins by a bet on the trace's future
the settings forbid (staying small through a peak, lowering right after the last one).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path

from bench.autoscale_bench import (
    KEYS,
    MAX_PARALLELISM,
    SETTINGS,
    START_PARALLELISM,
    percentile,
)
from bench.key_skew import ceiling
from services.contracts.jobconfig import duration_ms
from services.history.parallelism import (
    SCALE_DOWN_DELAY,
    TARGET_UTILIZATION,
    UTILIZATION_BOUNDARY,
)
from services.tools.load import SHAPES, Trace, shape

START = START_PARALLELISM


@dataclass(frozen=True)
class Schedule:
    """`Work`'s parallelism: `start` from 0 s, then each (second, parallelism) move."""

    moves: tuple[tuple[float, int], ...]
    start: int = START

    def label(self) -> str:
        steps, p = [], self.start
        for at, q in self.moves:
            steps.append(f"{p}->{q}@{at:.0f}" if q != p else f"(another vertex)@{at:.0f}")
            p = q
        return " ".join(steps) or f"{self.start} throughout"


@dataclass(frozen=True)
class Outcome:
    p99: float
    slot_seconds: float
    over_s: float = 0.0
    """The longest time it stayed at a parallelism busier than the settings' bound (the
    arriving rate over its ceiling above the utilization target plus its boundary),
    with a wider one to go to (never at the widest)."""
    early_down: bool = False
    """Whether it lowered the parallelism before the lower one's ceiling had taken the
    load for the scale-down interval: what no policy under that setting does."""


@dataclass(frozen=True)
class Run:
    """A measured run: its trace, who scaled, `Work`'s schedule, its rescales (of any
    vertex: a source's leaves `Work` as it was) and, from a results file, its numbers."""

    trace: str
    name: str
    schedule: Schedule
    rescales: int
    measured: Outcome | None = None


@dataclass(frozen=True)
class Model:
    """The benchmark's job on one trace (module doc)."""

    rates: tuple[float, ...]
    """Records arriving in each step of `step_s` seconds, the tail's none."""
    ceilings: dict[int, float]
    step_s: float
    scale_down_s: float = 300.0
    busy_bound: float = 0.9

    def run(self, schedule: Schedule) -> Outcome:
        backlog, backlogs, slots = 0.0, [], 0.0
        over = longest = 0.0
        early = False
        widest = max(self.ceilings)
        moves, p, index = schedule.moves, schedule.start, 0
        for n, arriving in enumerate(self.rates):
            at = n * self.step_s
            while index < len(moves) and moves[index][0] <= at:
                q = moves[index][1]
                if q != p:
                    over = 0.0
                if q < p:
                    early = early or not self._held(q, n)
                p, index = q, index + 1
            most = self.ceilings[p] * self.step_s
            busy = arriving > most * self.busy_bound and p < widest
            over = over + self.step_s if busy else 0.0
            longest = max(longest, over)
            backlog = max(0.0, backlog + arriving - most)
            backlogs.append(backlog)
            slots += p * self.step_s
        return Outcome(percentile(backlogs, 0.99), slots, longest, early)

    def _held(self, p: int, n: int) -> bool:
        """Whether `p`'s ceiling took what arrived in each of the scale-down interval's
        steps before step `n` (a run shorter than the interval: never)."""
        span = round(self.scale_down_s / self.step_s)
        if n < span:
            return False
        bound = self.ceilings[p] * self.step_s
        return all(arriving <= bound for arriving in self.rates[n - span : n])


def model(
    trace: Trace,
    *,
    tail_s: float,
    ceilings: dict[int, float],
    step_s: float,
    scale_down_s: float,
    busy_bound: float,
) -> Model:
    steps = int((trace.duration + tail_s) / step_s)
    rates = tuple(
        trace.records_by(min((n + 1) * step_s, trace.duration))
        - trace.records_by(min(n * step_s, trace.duration))
        for n in range(steps)
    )
    return Model(rates, ceilings, step_s, scale_down_s, busy_bound)


def candidates(levels: list[int], moves: int, length_s: float, every_s: float) -> list[Schedule]:
    """Every schedule from START with exactly `moves` rescales (each to another level) at
    instants `every_s` apart, in order."""
    instants = [n * every_s for n in range(int(length_s / every_s))]
    found: list[Schedule] = []

    def extend(prefix: tuple[tuple[float, int], ...], p: int, after: int) -> None:
        if len(prefix) == moves:
            found.append(Schedule(prefix))
            return
        for i in range(after, len(instants)):
            for q in levels:
                if q != p:
                    extend((*prefix, (instants[i], q)), q, i + 1)

    extend((), START, 0)
    return found


def peak_need(trace: Trace, ceilings: dict[int, float]) -> int:
    """The least parallelism whose ceiling takes the trace's peak (none: the widest)."""
    peak = max(rate for _, rate in trace.points)
    enough = [p for p, c in sorted(ceilings.items()) if c >= peak]
    return enough[0] if enough else max(ceilings)


def dominating(
    run: Run, m: Model, levels: list[int], every_s: float
) -> list[tuple[Outcome, Schedule]]:
    """Every schedule of fewer rescales than `run`'s with no more p99 and slot-seconds in
    the model than its schedule there."""
    bar = m.run(run.schedule)
    length = len(m.rates) * m.step_s
    found = []
    for moves in range(run.rescales):
        for candidate in candidates(levels, moves, length, every_s):
            out = m.run(candidate)
            if out.p99 <= bar.p99 and out.slot_seconds <= bar.slot_seconds:
                found.append((out, candidate))
    return found


def parse_schedule(text: str) -> Run:
    """`TRACE NAME SECONDS=P ...`: a measured run's rescales from START, `Work`'s
    parallelism after each (unchanged: another vertex's)."""
    trace, name, *moves = text.split()
    pairs = tuple((float(at), int(p)) for at, p in (m.split("=") for m in moves))
    return Run(trace, name, Schedule(pairs), len(pairs))


def from_results(path: Path) -> list[Run]:
    """The runs of a bench results file: the widest vertex's parallelism as sampled while
    every task ran, and the run's rescales and measured p99 and slot-seconds."""
    runs = []
    for result in json.loads(path.read_text()):
        samples = [s for s in result["samples"] if s["parallelism"] and s["running"]]
        if not samples:
            continue
        start = max(samples[0]["parallelism"].values())
        moves, p = [], start
        for sample in samples:
            q = max(sample["parallelism"].values())
            if q != p:
                moves.append((sample["at_s"], q))
                p = q
        runs.append(
            Run(
                result["trace"],
                result["controller"],
                Schedule(tuple(moves), start),
                max(result["rescales"], len(moves)),
                Outcome(result["backlog_p99"], result["slot_seconds"]),
            )
        )
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--schedule",
        action="append",
        default=[],
        metavar="'TRACE NAME SECONDS=P ...'",
        help="a measured run's rescales of Work from parallelism 2 (repeatable)",
    )
    parser.add_argument(
        "--results",
        type=Path,
        action="append",
        default=[],
        help="a bench results file: its runs' schedules, measured numbers beside",
    )
    parser.add_argument(
        "--peak", type=float, default=1_200.0, help="the trace's peak, records a second"
    )
    parser.add_argument("--duration", type=float, default=720.0, help="the trace's seconds")
    parser.add_argument("--tail", type=float, default=60.0, help="seconds after it, no load")
    parser.add_argument("--keys", type=int, default=KEYS, help="the load's keys")
    parser.add_argument(
        "--key-groups", type=int, default=MAX_PARALLELISM, help="Work's max parallelism"
    )
    parser.add_argument(
        "--capacity",
        type=float,
        default=240.0,
        help="records a second one subtask takes (the bench's 4 ms a record: 250 at most; "
        "the ramp run's backtest measured 238.7)",
    )
    parser.add_argument(
        "--scale-down",
        type=float,
        default=(duration_ms(SETTINGS[SCALE_DOWN_DELAY]) or 0) / 1000,
        metavar="SECONDS",
        help="the scale-down interval both autoscalers are given (the bench's)",
    )
    parser.add_argument(
        "--busy-bound",
        type=float,
        default=float(SETTINGS[TARGET_UTILIZATION]) + float(SETTINGS[UTILIZATION_BOUNDARY]),
        help="the busy share over which both autoscalers are to scale up: the bench's "
        "utilization target plus its boundary",
    )
    parser.add_argument("--step", type=float, default=2.0, help="the model's step, seconds")
    parser.add_argument(
        "--every", type=float, default=10.0, help="seconds between a candidate's possible rescales"
    )
    args = parser.parse_args(argv)
    runs = [parse_schedule(text) for text in args.schedule]
    for path in args.results:
        runs += from_results(path)
    if not runs:
        parser.error("give a --schedule or --results")
    unknown = sorted({r.trace for r in runs} - set(SHAPES))
    if unknown:
        parser.error(f"not a built-in trace: {', '.join(unknown)}")
    levels = [p for p in range(1, args.key_groups + 1) if args.key_groups % p == 0]
    ceilings = {p: ceiling(args.keys, args.key_groups, p, args.capacity) for p in levels}
    shown = ", ".join(f"{c:.0f} at {p}" for p, c in ceilings.items())
    print(f"Work's ceilings (records a second): {shown}")
    for trace_name in dict.fromkeys(r.trace for r in runs):
        trace = shape(trace_name, args.peak, args.duration)
        m = model(
            trace,
            tail_s=args.tail,
            ceilings=ceilings,
            step_s=args.step,
            scale_down_s=args.scale_down,
            busy_bound=args.busy_bound,
        )
        need = peak_need(trace, ceilings)
        print(
            f"\n{trace_name}: the peak ({args.peak:.0f} records a second) needs {need} "
            f"(its ceiling {ceilings[need]:.0f})"
        )
        print(
            f"{'schedule':<44} {'p99 model':>10} {'slot-s model':>13} {'over s':>7}"
            f" {'p99 run':>9} {'slot-s run':>11}"
        )
        mine = [r for r in runs if r.trace == trace_name]
        for run in mine:
            out, measured = m.run(run.schedule), run.measured
            numbers = f" {measured.p99:>9.0f} {measured.slot_seconds:>11.0f}" if measured else ""
            print(
                f"{run.name + ' ' + run.schedule.label():<44} {out.p99:>10.0f}"
                f" {out.slot_seconds:>13.0f} {out.over_s:>7.0f}{numbers}"
            )
        for run in mine:
            report(run, m, dominating(run, m, levels, args.every))
    return 0


def report(run: Run, m: Model, found: list[tuple[Outcome, Schedule]]) -> None:
    """Print `dominating`'s schedules, the fair ones apart (module doc)."""
    over = m.run(run.schedule).over_s
    fair = [d for d in found if d[0].over_s <= over and not d[0].early_down]
    longer = [d for d in found if d[0].over_s > over]
    early = [d for d in found if d[0].over_s <= over and d[0].early_down]
    print(
        f"  {run.name}: {len(found)} schedules of fewer rescales than its {run.rescales} at no"
        f" more p99 and slot-seconds; {len(fair)} fair: over the busy bound no longer than it"
        f" ({over:.0f} s), lowering only after the scale-down interval"
    )
    groups = (
        ("fair", fair),
        ("longer over the bound", longer),
        ("down before the interval", early),
    )
    for title, group in groups:
        if group:
            cheapest = min(group, key=lambda d: (d[0].slot_seconds, d[0].p99))
            lowest = min(group, key=lambda d: (d[0].p99, d[0].slot_seconds))
            print(f"    {title}: the cheapest {_shown(cheapest)}; the lowest p99 {_shown(lowest)}")


def _shown(found: tuple[Outcome, Schedule]) -> str:
    out, schedule = found
    early = ", down early" if out.early_down else ""
    return (
        f"{schedule.label()} ({out.p99:.0f}, {out.slot_seconds:.0f} slot-s, "
        f"{out.over_s:.0f} s over{early})"
    )


if __name__ == "__main__":
    sys.exit(main())
