"""`scalefold replay`: fold a JSON-lines event log through the scheduler core offline.

The log format is described (and read) in `services.contracts.eventlog`.
"""

from __future__ import annotations

import argparse
import difflib
import statistics
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from services.contracts import Codec
from services.contracts.eventlog import LogError, read_log
from services.contracts.events import Event
from services.scheduler.core.config import ConfigError
from services.scheduler.core.driver import Replay, replay
from services.scheduler.core.effects import Decision, Effect, RescaleUpdated
from services.scheduler.core.enums import DecisionKind
from services.scheduler.core.fold import Defaults, config_of
from services.scheduler.core.model import JobState
from services.scheduler.output import dumps, seconds, text


def parse_defines(pairs: Sequence[str] | None) -> Defaults:
    """`-D key=value` pairs, Flink style, as scheduler defaults."""
    result = {}
    for pair in pairs or ():
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"-D {pair!r} is not key=value")
        result[key.strip()] = value.strip()
    defaults = tuple(sorted(result.items()))
    config_of(defaults, (), False)  # invalid values are an error now, not mid-replay
    return defaults


@dataclass(frozen=True)
class JobSummary:
    job: str
    state: str
    outcomes: Counter[str]
    reasons: Counter[str]
    restarts: int
    downtimes: tuple[int, ...]
    parallelism: str

    def lines(self) -> list[str]:
        total = sum(self.downtimes)
        median = statistics.median(self.downtimes) if self.downtimes else 0
        outcomes = ", ".join(f"{n} {k.lower()}" for k, n in sorted(self.outcomes.items())) or "none"
        reasons = ", ".join(f"{k} {n}" for k, n in sorted(self.reasons.items())) or "-"
        return [
            f"job {self.job}: {self.state}, running {self.parallelism or '-'}",
            f"  rescales  {outcomes}",
            f"  reasons   {reasons}",
            f"  restarts  {self.restarts}",
            f"  downtime  {total / 1000:.3f} s in all, median {median / 1000:.3f} s per rescale",
        ]


def summarize(run: Replay, effects: Sequence[Effect]) -> list[JobSummary]:
    latest: dict[str, dict[str, Any]] = {}
    for effect in effects:
        if isinstance(effect, RescaleUpdated):
            latest[effect.rescale_uuid] = effect.record
    summaries = []
    last = run.last_states()
    for job_id, kept in sorted(run.jobs.items()):
        job = last.get(job_id)
        records = [rec for rec in latest.values() if rec["jobId"] == job_id]
        outcomes = Counter(rec["terminalState"] or "IN_PROGRESS" for rec in records)
        reasons = Counter(rec["terminatedReason"] for rec in records if rec["terminatedReason"])
        downtimes = tuple(downtime(rec) for rec in records if rec["terminalState"] == "COMPLETED")
        graph = job.state.graph if job else None
        parallelism = (
            ", ".join(
                f"{v.id}={p}" for v, p in zip(job.info.vertices, graph.parallelism, strict=True)
            )
            if job and graph
            else ""
        )
        summaries.append(
            JobSummary(
                job_id,
                _state(job) + (" (released)" if kept is None and job is not None else ""),
                outcomes,
                reasons,
                job.num_restarts if job else 0,
                downtimes,
                parallelism,
            )
        )
    return summaries


def _state(job: JobState | None) -> str:
    """The job's state, with how it ended once Finished (`Finished FAILED`)."""
    if job is None:
        return "never created"
    status = job.state.job_status
    return f"{job.state.name} {status}" if status is not None else str(job.state.name)


def downtime(record: Mapping[str, Any]) -> int:
    """Time outside Executing in a rescale's scheduler-state spans."""
    return sum(
        span["durationInMillis"] or 0
        for span in record["schedulerStates"]
        if span["state"] != "Executing"
    )


def timeline_lines(effects: Sequence[Effect]) -> list[str]:
    """The compact story used by --compare: transitions and finished rescales."""
    lines = []
    for effect in effects:
        if isinstance(effect, Decision) and effect.kind is DecisionKind.STATE_TRANSITION:
            lines.append(f"{seconds(effect.at)} {effect.job_id} {effect.message.split(':')[0]}")
        elif isinstance(effect, RescaleUpdated) and effect.record["terminalState"]:
            rec = effect.record
            lines.append(
                f"{seconds(effect.at)} {effect.job_id} rescale {rec['triggerCause']} "
                f"{rec['terminatedReason']} downtime {downtime(rec) / 1000:.3f}s"
            )
    return lines


def emit(effects: Sequence[Effect], fmt: str, out: IO[str]) -> None:
    for effect in effects:
        out.write((dumps(effect) if fmt == "json" else text(effect)) + "\n")


def run_command(args: argparse.Namespace, codec: Codec, out: IO[str] = sys.stdout) -> int:
    try:
        events = read_log(Path(args.log), codec)
        defaults = parse_defines(args.define)
        if args.compare is not None:
            return compare(events, defaults, args.compare, args.until, out)
    except (LogError, ConfigError, OSError) as error:
        print(f"scalefold replay: {error}", file=sys.stderr)
        return 2
    run, effects = replay(events, defaults, until=args.until, drain=not args.no_drain)
    selected = [e for e in effects if args.job is None or e.job_id == args.job]
    if args.summary:
        for summary in summarize(run, selected):
            out.write("\n".join(summary.lines()) + "\n")
    else:
        emit([e for e in selected if _wanted(e, args.only)], args.format, out)
    return 0


def _wanted(effect: Effect, only: str | None) -> bool:
    if only is None:
        return True
    if only == "rescales":
        return isinstance(effect, RescaleUpdated)
    if only == "transitions":
        return isinstance(effect, Decision) and effect.kind is DecisionKind.STATE_TRANSITION
    return isinstance(effect, Decision)


def compare(
    events: list[Event], base: Defaults, spec: Sequence[str], until: int | None, out: IO[str]
) -> int:
    """Run the log under two configurations and show what changes (a what-if)."""
    left_args, right_args = _split(spec)
    left = tuple(sorted({**dict(base), **dict(parse_defines(left_args))}.items()))
    right = tuple(sorted({**dict(base), **dict(parse_defines(right_args))}.items()))
    runs = [replay(events, d, until=until) for d in (left, right)]
    labels = [" ".join(f"{k}={v}" for k, v in d) or "defaults" for d in (left, right)]
    out.write(f"A: {labels[0]}\nB: {labels[1]}\n\n")
    for a, b in zip(summarize(*runs[0]), summarize(*runs[1]), strict=True):
        for line_a, line_b in zip(a.lines(), b.lines(), strict=True):
            marker = " " if line_a == line_b else "*"
            out.write(f"{marker} A {line_a}\n{marker} B {line_b}\n")
        out.write("\n")
    diff = difflib.unified_diff(
        timeline_lines(runs[0][1]), timeline_lines(runs[1][1]), "A", "B", lineterm="", n=2
    )
    out.write("\n".join(diff) + "\n")
    return 0


def _split(spec: Sequence[str]) -> tuple[list[str], list[str]]:
    """`-D a=1 -- -D b=2` into the two sides' key=value lists."""
    parts = list(spec)
    cut = parts.index("--") if "--" in parts else len(parts)
    return _defines(parts[:cut]), _defines(parts[cut + 1 :])


def _defines(tokens: Sequence[str]) -> list[str]:
    values: list[str] = []
    tokens_iter: Iterator[str] = iter(tokens)
    for token in tokens_iter:
        if token == "-D":
            values.append(next(tokens_iter, ""))
        elif token.startswith("-D"):
            values.append(token[2:])
        else:
            raise ConfigError(f"--compare takes -D key=value options, not {token!r}")
    return values
