"""`scalefold whatif`: what a job's recorded inputs would have done under other settings.

Every input the scheduler folded is on the job-events topic under the job's key (a
producer's job id, or `<cluster>.<Flink job id>` for a job the bridge observes), and what
Flink itself did is on flink-rescales under the same key. A what-if folds the job's inputs
twice through the core, as recorded and with the user's keys pinned over the job's own
configuration, and puts both beside what Flink did. Nothing here needs the JobManager:
a job that ended, on a cluster long gone, answers the same.

The pure part (`pinned`, `resolve`, `tally`, `report`) takes the recorded inputs as data;
`read_recorded` is the only part that talks to Kafka.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import IO, Any

from services.contracts import Codec, DecodeError, Settings
from services.contracts import records as r
from services.contracts.events import ConfigurationUpdated, Event, JobSubmitted, TimerFired
from services.contracts.events import from_record as event_of
from services.scheduler.core.config import ConfigError
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import RescaleUpdated
from services.scheduler.core.fold import Defaults
from services.scheduler.replay import downtime, parse_defines

SHOWN_JOBS = 10
"""How many known jobs an unknown job's message lists."""


class WhatIfError(ValueError):
    """A what-if that cannot run: the job is not known, or names several."""


@dataclass(frozen=True)
class Recorded:
    """The recorded inputs of some jobs (log order, per key) and Flink's own records of
    them (the latest revision of each, by start), with every key the topic holds."""

    inputs: Mapping[str, Sequence[Event]]
    flink: Mapping[str, Sequence[Mapping[str, Any]]]
    known: frozenset[str]


@dataclass(frozen=True)
class Tally:
    """One side of a what-if, in the terms a person compares: its rescales, in order."""

    rescales: tuple[Mapping[str, Any], ...]
    restarts: int | None  # the fold's restart count; Flink's records do not say
    horizon: int

    @property
    def outcomes(self) -> Counter[str]:
        return Counter(rec["terminalState"] or "IN_PROGRESS" for rec in self.rescales)

    @property
    def triggers(self) -> Counter[str]:
        return Counter(rec["triggerCause"] for rec in self.rescales)

    @property
    def downtime_ms(self) -> int:
        return sum(downtime(rec) for rec in self.rescales if rec["terminalState"] == "COMPLETED")

    @property
    def below_desired_ms(self) -> int:
        """Time from each completed rescale that left a vertex below its desired
        parallelism to the next completed one (or the horizon: the last recorded input)."""
        done = [rec for rec in self.rescales if rec["terminalState"] == "COMPLETED"]
        ends = [rec["endTimestampInMillis"] or rec["startTimestampInMillis"] for rec in done]
        total = 0
        for rec, (end, until) in zip(done, pairwise([*ends, self.horizon]), strict=True):
            below = any(
                (v["postRescaleParallelism"] or 0) < (v["desiredParallelism"] or 0)
                for v in rec["vertices"]
            )
            total += max(0, until - end) if below else 0
        return total

    @property
    def parallelism(self) -> dict[str, str]:
        """The last completed rescale's parallelism per vertex name."""
        done = [rec for rec in self.rescales if rec["terminalState"] == "COMPLETED"]
        if not done:
            return {}
        return {vertex_name(v): str(v["postRescaleParallelism"]) for v in done[-1]["vertices"]}


def vertex_name(vertex: Mapping[str, Any]) -> str:
    """A vertex as a person reads it: Flink's name (whole: `Source: numbers`), else its id."""
    return str(vertex.get("jobVertexName") or vertex["jobVertexId"])


def pinned(events: Iterable[Event], overrides: Mapping[str, str]) -> list[Event]:
    """The inputs with the user's keys over the job's own configuration: in its
    submission, and out of every later configuration update (the key stays pinned).
    TimerFired inputs are dropped: a replay fires the timers of its own run."""
    return [kept for event in events if (kept := _pin(event, overrides)) is not None]


def _pin(event: Event, overrides: Mapping[str, str]) -> Event | None:
    if isinstance(event, TimerFired):
        return None
    if isinstance(event, JobSubmitted) and overrides:
        own = {k: v for k, v in event.configuration if k not in overrides}
        return replace(event, configuration=tuple(sorted({**own, **overrides}.items())))
    if isinstance(event, ConfigurationUpdated) and overrides:
        entries = tuple((k, v) for k, v in event.entries if k not in overrides)
        return replace(event, entries=entries) if entries else None
    return event


def resolve(job: str, known: Iterable[str]) -> str:
    """The key a user's job id names: itself, or the one observed key (`cluster.id`) that
    ends with it (a Flink job id)."""
    keys = sorted(known)
    if job in keys:
        return job
    matches = [k for k in keys if k.endswith(f".{job}")]
    if len(matches) == 1:
        return matches[0]
    if matches:
        raise WhatIfError(f"job {job} is on several clusters: {', '.join(matches)}; name one")
    if not keys:
        raise WhatIfError(f"no recorded inputs of job {job}: the job-events topic holds none")
    more = ", ..." if len(keys) > SHOWN_JOBS else ""
    raise WhatIfError(
        f"no recorded inputs of job {job} (jobs: {', '.join(keys[:SHOWN_JOBS])}{more})"
    )


def tally(events: Sequence[Event], defaults: Defaults) -> Tally:
    """Fold a job's inputs (one job's) and sum up the rescales the fold recorded."""
    run, effects = replay(events, defaults)
    latest: dict[str, Mapping[str, Any]] = {}
    for effect in effects:
        if isinstance(effect, RescaleUpdated):
            latest[effect.rescale_uuid] = effect.record
    jobs = run.last_states().values()
    return Tally(
        tuple(sorted(latest.values(), key=_start)),
        sum(job.num_restarts for job in jobs),
        horizon(events),
    )


def flink_tally(records: Sequence[Mapping[str, Any]], events: Sequence[Event]) -> Tally:
    return Tally(tuple(sorted(records, key=_start)), None, horizon(events))


def horizon(events: Sequence[Event]) -> int:
    return max((e.timestamp for e in events), default=0)


def _start(record: Mapping[str, Any]) -> tuple[int, int]:
    return (record["startTimestampInMillis"] or 0, record.get("rescaleAttemptId") or 0)


@dataclass(frozen=True)
class Side:
    label: str
    tally: Tally


def sides(
    events: Sequence[Event],
    flink: Sequence[Mapping[str, Any]],
    overrides: Mapping[str, str],
    defaults: Defaults,
) -> list[Side]:
    """Flink's records (where there are some), the fold as recorded, the fold pinned."""
    out = [Side(FLINK, flink_tally(flink, events))] if flink else []
    out.append(Side("recorded", tally(pinned(events, {}), defaults)))
    out.append(Side("what-if", tally(pinned(events, overrides), defaults)))
    return out


FLINK = "Flink"
"""The side of Flink's own records."""


def _seconds(ms: int) -> str:
    return f"{ms / 1000:.1f} s"


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{n} {k}" for k, n in sorted(counter.items())) or "none"


ROWS: tuple[tuple[str, Any], ...] = (
    ("rescales", lambda t: str(len(t.rescales))),
    ("outcomes", lambda t: _counts(t.outcomes)),
    ("triggers", lambda t: _counts(t.triggers)),
    ("restarts", lambda t: "-" if t.restarts is None else str(t.restarts)),
    ("downtime", lambda t: _seconds(t.downtime_ms)),
    ("below desired", lambda t: _seconds(t.below_desired_ms)),
)


def report(job: str, shown: Sequence[Side], inputs: int, overrides: Mapping[str, str]) -> list[str]:
    """One job's what-if as lines: a table of the sides, `*` where the what-if differs
    from the run as recorded, then each rescale of each side in order."""
    pins = ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    lines = [f"job {job}: {inputs} recorded inputs; what-if: {pins}", ""]
    vertices = sorted({name for side in shown for name in side.tally.parallelism})
    table = [["", *(s.label for s in shown)]]
    table += [[name, *(cell(s.tally) for s in shown)] for name, cell in ROWS]
    table += [["parallelism", *("" for _ in shown)]] if vertices else []
    table += [[f"  {v}", *(s.tally.parallelism.get(v, "-") for s in shown)] for v in vertices]
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    for number, row in enumerate(table):
        changed = number > 0 and row[-1] != row[-2]
        cells = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True))
        lines.append(f"{'*' if changed else ' '} {cells}".rstrip())
    for side in shown:
        lines += ["", f"{side.label}:"]
        lines += [f"  {rescale_line(rec)}" for rec in side.tally.rescales] or ["  no rescale"]
    return lines


def rescale_line(record: Mapping[str, Any]) -> str:
    ended = record["terminatedReason"] or record["terminalState"] or "in progress"
    post = ", ".join(
        f"{vertex_name(v)}={v['postRescaleParallelism'] or '-'}" for v in record["vertices"]
    )
    return (
        f"{record['triggerCause']:<22} {ended:<28} ({post}) downtime {_seconds(downtime(record))}"
    )


def fleet_report(rows: Sequence[tuple[str, Sequence[Side]]]) -> list[str]:
    """Many jobs, one line each: every side's rescales, restarts, downtime and time below
    desired, as recorded -> pinned (and Flink's rescales where it has records)."""
    header = ["job", "flink", "rescales", "restarts", "downtime s", "below desired s"]
    table = [header]
    for job, shown in rows:
        flink = next((s.tally for s in shown if s.label == FLINK), None)
        a, b = shown[-2].tally, shown[-1].tally
        table.append(
            [
                job,
                "-" if flink is None else str(len(flink.rescales)),
                f"{len(a.rescales)} -> {len(b.rescales)}",
                f"{a.restarts} -> {b.restarts}",
                f"{a.downtime_ms / 1000:.1f} -> {b.downtime_ms / 1000:.1f}",
                f"{a.below_desired_ms / 1000:.1f} -> {b.below_desired_ms / 1000:.1f}",
            ]
        )
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    ]


def read_recorded(
    settings: Settings, codec: Codec, wanted: Any, timeout: float = 30.0, key: str | None = None
) -> Recorded:
    """Every recorded input of the keys `wanted(key)` accepts, and Flink's records of
    them, read from the beginning of both topics to their ends as of now. An input the
    scheduler could not have folded (undecodable: it went to the dead letters) is left
    out, as the scheduler left it out. `key`: one job's exact key, whose partition alone
    is read (Kafka's default partitioner's, where the scheduler folds it and the bridge
    writes it; the scheduler dead-letters an input on another), not the whole topics: a
    forecast's read then grows with a sixth of the topics, not all of them."""
    from services.contracts.kafka import read_to_end

    group = settings.topics.own("cli") + "-whatif"
    inputs: dict[str, list[Event]] = {}
    known: set[str] = set()
    only = None if key is None else [key]
    topic = settings.topics.job_events
    for message in read_to_end(settings, topic, group, timeout=timeout, keys=only):
        key = (message.key() or b"").decode("utf-8", "replace")
        known.add(key)
        if not wanted(key):
            continue
        try:
            decoded = codec.decode(message.value() or b"", expected=r.INPUT_EVENTS)
            event = event_of(decoded.schema, decoded.record)
        except (DecodeError, KeyError, TypeError, ValueError):
            continue
        if event.job_id == key:
            inputs.setdefault(key, []).append(event)
    flink: dict[str, dict[str, Mapping[str, Any]]] = {}
    topic = settings.topics.flink_rescales
    for message in read_to_end(settings, topic, group, timeout=timeout, keys=only):
        key = (message.key() or b"").decode("utf-8", "replace")
        if not wanted(key):
            continue
        try:
            record = codec.decode(
                message.value() or b"", expected=frozenset({r.FLINK_RESCALE})
            ).record
        except DecodeError:
            continue
        kept = flink.setdefault(key, {})
        known_revision = kept.get(record["rescaleUuid"])
        if known_revision is None or record["revision"] >= known_revision["revision"]:
            kept[record["rescaleUuid"]] = record
    return Recorded(inputs, {k: list(v.values()) for k, v in flink.items()}, frozenset(known))


def run_command(
    args: argparse.Namespace, settings: Settings, codec: Codec, out: IO[str] = sys.stdout
) -> int:
    """`scalefold whatif`: one job's report, or a table of a cluster's or every job."""
    from services.contracts.kafka import CLI_CONNECT_TIMEOUT, TopicReadError, connect

    try:
        overrides = dict(parse_defines(args.define))
        defaults = parse_defines(args.default)
        if not overrides:
            raise WhatIfError(f"say what to change: -D key=value (e.g. -D {EXAMPLE})")
        connect(settings, CLI_CONNECT_TIMEOUT)
        recorded = read_recorded(settings, codec, _wanted(args))
        if args.job:
            key = resolve(args.job, recorded.inputs.keys() or recorded.known)
            events = recorded.inputs.get(key)
            if not events:
                raise WhatIfError(f"job {key} has no input the scheduler could fold")
            shown = sides(events, recorded.flink.get(key, ()), overrides, defaults)
            lines = report(key, shown, len(events), overrides)
        else:
            if not recorded.inputs:
                raise WhatIfError(f"no recorded inputs of {_scope(args)}")
            lines = fleet_report(
                [
                    (key, sides(events, recorded.flink.get(key, ()), overrides, defaults))
                    for key, events in sorted(recorded.inputs.items())
                ]
            )
    except (WhatIfError, ConfigError, TopicReadError) as error:
        print(f"scalefold whatif: {error}", file=sys.stderr)
        return 2
    out.write("\n".join(lines) + "\n")
    return 0


EXAMPLE = "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling=60s"


def _wanted(args: argparse.Namespace) -> Any:
    """Which keys of the topics to decode: the job's (and `cluster.job`), a cluster's, all."""
    if args.job:
        return lambda key: key == args.job or key.endswith(f".{args.job}")
    if args.cluster:
        return lambda key: key.startswith(f"{args.cluster}.")
    return lambda key: True


def _scope(args: argparse.Namespace) -> str:
    return (
        f"cluster {args.cluster} (its jobs are <cluster>.<Flink job id>)"
        if args.cluster
        else "any job"
    )
