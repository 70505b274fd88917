"""The Flink demo's agreement with Flink, run after run on a busy machine (issue 47; not a test).

    .venv/bin/python -m bench.demo_agreement --runs 12 --hogs 2 [--json] [-v]

Runs `scalefold demo --flink` (services/tools/flinkdemo.py) `--runs` times, one after the
other, beside `--hogs` busy processes (bench/load.py) started once for the whole bench.
Each run's output goes to `.run/demo-agreement/run-K.log` (Flink's JobManager log to
`run-K.jobmanager.log`, the history's tables to `run-K.tables`); from its verdict (`flink compare --strict`'s last lines) it
takes the pairs, the ambiguous ones, and the fields each decidable pair disagrees in
(`pair N disagrees: <field> Flink ... / scalefold ...`; `rescale` when only one side has
the rescale). The 1-minute load average is sampled every 5 s during each run. At the
end: a row per run, the runs where every decidable pair agreed, the share of ambiguous
pairs, the agreement per field over decidable pairs, and the load range. Issue 47's target: every decidable pair agrees in >= 19 of 20 runs at a
load >= 6, and fewer than 1 pair in 10 is ambiguous. Exits 1 when a run failed.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field

from bench.load import hogs, load_average
from services.history.conformance import FIELDS
from services.localstack.layout import PROJECT_ROOT, RUN_ROOT

LOG_DIR = RUN_ROOT / "demo-agreement"
DEMO_DIR = RUN_ROOT / "demo-flink"
DEMO = [str(PROJECT_ROOT / ".venv" / "bin" / "scalefold"), "demo", "--flink"]
RUN_LIMIT_S = 1800.0
"""A hang guard for one run: the demo bounds its own steps (4 min each, Spark 10 min)."""

AMBIGUOUS = re.compile(r"^\s*pair (\d+): ambiguous at this observation resolution", re.M)
DISAGREES = re.compile(r"^\s*pair (\d+) disagrees: (\S+) Flink", re.M)
APART = re.compile(r"^\s*pair (\d+) spans apart: \S+ Flink (.*) / scalefold (.*) \(more", re.M)
TALLY = re.compile(
    r"decidable pairs: (\d+) of (\d+) agree; all pairs: (\d+) of (\d+) \((\d+) ambiguous\)"
)


@dataclass
class Run:
    """One run of the demo: its status, length, load, and its verdict's counts."""

    number: int
    status: int
    seconds: float
    load_min: float
    load_max: float
    pairs: int | None = None  # None: the story broke before the verdict
    decidable: int = 0
    decidable_agreeing: int = 0
    ambiguous: int = 0
    disagreements: dict[int, list[str]] = field(default_factory=dict)  # pair: fields
    apart: dict[int, str] = field(default_factory=dict)  # pair: its spans further apart
    log: str = ""
    commit: str = ""  # main's HEAD when the run started (the demo runs the code on disk)

    @property
    def agreed(self) -> bool:
        """Whether the run reached its verdict and every decidable pair agreed."""
        return self.pairs is not None and self.decidable_agreeing == self.decidable


def parse(number: int, status: int, seconds: float, loads: list[float], text: str) -> Run:
    run = Run(number, status, round(seconds), min(loads, default=0.0), max(loads, default=0.0))
    tallies = TALLY.findall(text)
    if tallies:  # the last verdict is the demo's
        agreeing, decidable, _, pairs, ambiguous = (int(n) for n in tallies[-1])
        run.pairs, run.decidable, run.ambiguous = pairs, decidable, ambiguous
        run.decidable_agreeing = agreeing
        verdict = text[max(0, text.rfind("$ scalefold flink compare")) :]
        for pair, name in DISAGREES.findall(verdict):
            run.disagreements.setdefault(int(pair), []).append(name)
        for pair, flink, ours in APART.findall(verdict):
            run.apart[int(pair)] = f"{flink} / {ours}"
    return run


class LoadSampler(threading.Thread):
    """The 1-minute load average every `every_s` seconds until `stop`."""

    def __init__(self, every_s: float = 5.0) -> None:
        super().__init__(name="load", daemon=True)
        self.every, self.samples, self.stopping = every_s, list[float](), threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            self.samples.append(load_average())
            self.stopping.wait(self.every)


def one_run(number: int, verbose: bool) -> Run:
    log = LOG_DIR / f"run-{number}.log"
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, check=False
    )
    sampler = LoadSampler()
    sampler.start()
    started = time.monotonic()
    with log.open("w") as out:
        try:
            status = subprocess.run(
                DEMO,
                check=False,
                cwd=PROJECT_ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                timeout=RUN_LIMIT_S,
            ).returncode
        except subprocess.TimeoutExpired:
            status = -1
    sampler.stopping.set()
    sampler.join()
    run = parse(number, status, time.monotonic() - started, sampler.samples, log.read_text())
    run.log = str(log.relative_to(PROJECT_ROOT))
    run.commit = head.stdout.decode().strip()
    jobmanager = DEMO_DIR / "flink" / "jobmanager.log"  # the next run deletes it
    if jobmanager.exists():
        shutil.copyfile(jobmanager, LOG_DIR / f"run-{number}.jobmanager.log")
    tables = DEMO_DIR / "history" / "tables"  # both sides' records, to study offline
    if tables.is_dir():
        shutil.copytree(tables, LOG_DIR / f"run-{number}.tables", dirs_exist_ok=True)
    if verbose:
        for line in log.read_text().splitlines():
            if AMBIGUOUS.match(line) or DISAGREES.match(line) or TALLY.search(line):
                print(f"  {line.strip()}", file=sys.stderr)
    return run


def row(run: Run) -> str:
    if run.pairs is None:
        verdict = "no verdict (the story broke)"
    else:
        verdict = f"{run.decidable_agreeing}/{run.decidable} decidable agree, {run.ambiguous} amb."
        if run.disagreements:
            verdict += "; " + "; ".join(
                f"pair {p}: {', '.join(f)}" for p, f in sorted(run.disagreements.items())
            )
        if run.apart:
            verdict += "; spans apart: " + "; ".join(
                f"pair {p}: {spans}" for p, spans in sorted(run.apart.items())
            )
    return (
        f"| {run.number} | {run.commit} | {run.status} | {run.seconds:.0f} | "
        f"{run.load_min:.1f}-{run.load_max:.1f} | {run.pairs if run.pairs is not None else '-'} "
        f"| {verdict} |"
    )


def summary(runs: list[Run]) -> dict[str, object]:
    judged = [run for run in runs if run.pairs is not None]
    decidable = sum(run.decidable for run in judged)
    names = [*FIELDS, "rescale"]
    against = {name: 0 for name in names}
    for run in judged:
        for fields in run.disagreements.values():
            for name in set(fields):
                against[name] = against.get(name, 0) + 1
    return {
        "runs": len(runs),
        "runs_all_decidable_agree": sum(run.agreed for run in runs),
        "runs_exit_0": sum(run.status == 0 for run in runs),
        "pairs": sum(run.pairs or 0 for run in judged),
        "ambiguous": sum(run.ambiguous for run in judged),
        "decidable": decidable,
        "pairs_spans_apart": sum(len(run.apart) for run in judged),
        "field_agreement": {name: decidable - n for name, n in against.items()},
        "load_min": min((run.load_min for run in runs), default=0.0),
        "load_max": max((run.load_max for run in runs), default=0.0),
    }


def table(runs: list[Run], totals: dict[str, object]) -> str:
    lines = [
        "| run | main | exit | s | load (1 min) | pairs | verdict |",
        "|----:|------|-----:|--:|-------------:|------:|---------|",
        *(row(run) for run in runs),
    ]
    agreement = totals["field_agreement"]
    assert isinstance(agreement, dict)
    decidable = totals["decidable"]
    lines += [
        "",
        f"runs where every decidable pair agreed: {totals['runs_all_decidable_agree']} of "
        f"{totals['runs']} (exit 0: {totals['runs_exit_0']})",
        f"ambiguous pairs: {totals['ambiguous']} of {totals['pairs']}",
        f"decidable pairs whose spans lay further apart than the observation allows "
        f"(a disagreement since 2026-12-03's stop 58): {totals['pairs_spans_apart']}",
        "agreement per field over decidable pairs: "
        + ", ".join(f"{name} {n}/{decidable}" for name, n in agreement.items()),
        f"load (1 min) during the runs: {totals['load_min']:.1f} to {totals['load_max']:.1f}",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Each run takes about 2 minutes on a quiet machine, 3 to 5 beside two hogs.",
    )
    parser.add_argument("--runs", type=int, default=20, help="demo runs, one after the other")
    parser.add_argument(
        "--hogs", type=int, default=2, help="busy processes for the whole bench (0: none)"
    )
    parser.add_argument("--json", action="store_true", help="runs and totals as JSON")
    parser.add_argument("-v", "--verbose", action="store_true", help="each run's verdict lines")
    args = parser.parse_args(argv)
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    runs: list[Run] = []
    with hogs(args.hogs, args.runs * RUN_LIMIT_S):
        for number in range(1, args.runs + 1):
            run = one_run(number, args.verbose)
            runs.append(run)
            print(f"demo_agreement: {row(run)}", file=sys.stderr, flush=True)
    totals = summary(runs)
    if args.json:
        print(json.dumps({"hogs": args.hogs, "runs": [asdict(r) for r in runs], **totals}))
    else:
        print(f"{args.runs} runs of `scalefold demo --flink` beside {args.hogs} hogs\n")
        print(table(runs, totals))
    return 0 if all(run.status == 0 for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
