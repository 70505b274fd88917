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
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import pairwise
from typing import IO, Any

import msgspec

from services.contracts import Codec, DecodeError, Settings
from services.contracts import records as r
from services.contracts.events import ConfigurationUpdated, Event, JobSubmitted, TimerFired
from services.contracts.events import from_record as event_of
from services.scheduler.core.config import ConfigError
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import RescaleUpdated
from services.scheduler.core.fold import Defaults
from services.scheduler.core.model import JobState
from services.scheduler.core.serde import STATE_FORMAT, StateFormatError, loads
from services.scheduler.replay import downtime, parse_defines

SHOWN_JOBS = 10
"""How many known jobs an unknown job's message lists."""


class WhatIfError(ValueError):
    """A what-if that cannot run: the job is not known, or names several."""


@dataclass(frozen=True)
class Start:
    """A job's state from job-snapshots: the scheduler's fold of its inputs through the
    job-events `offset`, where a fold starts once the job's first inputs are gone."""

    offset: int
    job: JobState


@dataclass(frozen=True)
class Recorded:
    """The recorded inputs of some jobs (log order, per key) and Flink's own records of
    them (the latest revision of each, by start), with every key the topic holds. A job in
    `starts` is folded from that snapshot, its inputs being the ones after it; a job in
    `gone` has lost its first inputs to job-events' retention with no snapshot after them."""

    inputs: Mapping[str, Sequence[Event]]
    flink: Mapping[str, Sequence[Mapping[str, Any]]]
    known: frozenset[str]
    starts: Mapping[str, Start] = field(default_factory=dict)
    gone: frozenset[str] = frozenset()

    def start_of(self, job: str) -> JobState | None:
        start = self.starts.get(job)
        return None if start is None else start.job

    def events_of(self, job: str) -> Sequence[Event]:
        """The job's inputs to fold (after its start); WhatIfError if its first ones are gone."""
        if job in self.gone:
            raise WhatIfError(
                f"job {job}'s first inputs have left job-events (kept "
                f"{_retention_days()} days) and no snapshot on job-snapshots follows them"
            )
        events = self.inputs.get(job, ())
        if not events and job not in self.starts:
            raise WhatIfError(f"job {job} has no input the scheduler could fold")
        return events


def _retention_days() -> int:
    from services.contracts.topics import JOB_EVENTS

    return JOB_EVENTS.retention_ms // 86_400_000


def fold_start(
    inputs: Sequence[tuple[int, Event]], snapshots: Sequence[Start], log_start: int
) -> tuple[Start | None, list[Event]] | None:
    """Where a job's fold starts, and the inputs it folds: from the first input if the log
    still holds the job's submission (or all its partition ever held: `log_start` 0),
    else from the oldest snapshot whose successors the log holds all of (its offset at or
    after `log_start` - 1, the first offset the job's partition still holds). None:
    neither, the job's earlier inputs are gone."""
    if log_start == 0 or (inputs and isinstance(inputs[0][1], JobSubmitted)):
        return None, [event for _, event in inputs]
    usable = [s for s in snapshots if s.offset >= log_start - 1]
    if not usable:
        return None if snapshots or inputs else (None, [])
    start = min(usable, key=lambda s: s.offset)
    return start, [event for offset, event in inputs if offset > start.offset]


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


def tally(events: Sequence[Event], defaults: Defaults, start: JobState | None = None) -> Tally:
    """Fold a job's inputs (one job's; from its snapshot `start` if given) and sum up the
    rescales the fold recorded."""
    run, effects = replay(events, defaults, start=start)
    latest: dict[str, Mapping[str, Any]] = {}
    for effect in effects:
        if isinstance(effect, RescaleUpdated):
            latest[effect.rescale_uuid] = effect.record
    jobs = run.last_states().values()
    return Tally(
        tuple(sorted(latest.values(), key=_start)),
        sum(job.num_restarts for job in jobs) - (start.num_restarts if start else 0),
        max(horizon(events), start.now if start else 0),
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
    start: JobState | None = None,
) -> list[Side]:
    """Flink's records (where there are some), the fold as recorded, the fold pinned; from
    the job's snapshot `start` if given (then only what Flink recorded since it, and the
    what-if's keys pinned over the snapshot's configuration)."""
    since = start.now if start is not None else None
    flink = [rec for rec in flink if since is None or (rec["startTimestampInMillis"] or 0) > since]
    out = [Side(FLINK, flink_tally(flink, events))] if flink else []
    out.append(Side("recorded", tally(pinned(events, {}), defaults, start)))
    pinned_start = None if start is None else pinned_state(start, overrides)
    out.append(Side("what-if", tally(pinned(events, overrides), defaults, pinned_start)))
    return out


def pinned_state(job: JobState, overrides: Mapping[str, str]) -> JobState:
    """A stored state with the user's keys over its configuration (as `pinned` does to a
    submission): a what-if from a snapshot changes the settings from there on."""
    if not overrides:
        return job
    own = {k: v for k, v in job.settings if k not in overrides}
    return msgspec.structs.replace(job, settings=tuple(sorted({**own, **overrides}.items())))


FLINK = "Flink"
"""The side of Flink's own records."""


def _when(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


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


def report(
    job: str,
    shown: Sequence[Side],
    inputs: int,
    overrides: Mapping[str, str],
    since: JobState | None = None,
) -> list[str]:
    """One job's what-if as lines: a table of the sides, `*` where the what-if differs
    from the run as recorded, then each rescale of each side in order. `since`: the
    snapshot the folds started from, the job's earlier inputs being gone."""
    pins = ", ".join(f"{k}={v}" for k, v in sorted(overrides.items()))
    first = "" if since is None else f" since its snapshot at {_when(since.now)}"
    lines = [f"job {job}: {inputs} recorded inputs{first}; what-if: {pins}", ""]
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
    """Every recorded input of the keys `wanted(key)` accepts (after each job's snapshot
    where its first inputs are gone: `fold_start`), and Flink's records of them, read from
    the beginning of the topics to their ends as of now. An input the scheduler could not
    have folded (undecodable: it went to the dead letters) is left out, as the scheduler
    left it out. `key`: one job's exact key, whose partition alone is read (Kafka's
    default partitioner's, where the scheduler folds it and the bridge writes it; the
    scheduler dead-letters an input on another), not the whole topics: a forecast's read
    then grows with a sixth of the topics, not all of them."""
    reader = _Reader(settings, codec, wanted, timeout, None if key is None else [key])
    found, known = reader.inputs()
    snapshots = reader.snapshots()
    inputs: dict[str, list[Event]] = {}
    starts: dict[str, Start] = {}
    gone: set[str] = set()
    for job in found.keys() | snapshots.keys():
        taken = snapshots.get(job, [])
        partition = reader.partition_of.get(job, taken[0][0] if taken else 0)
        chosen = fold_start(found.get(job, []), [s for _, s in taken], reader.log_start(partition))
        if chosen is None:
            gone.add(job)
            continue
        start, inputs[job] = chosen
        if start is not None:
            starts[job] = start
    return Recorded(
        inputs, reader.flink(), frozenset(known | snapshots.keys()), starts, frozenset(gone)
    )


class _Reader:
    """read_recorded's reads of the three topics, each from its beginning to its end."""

    def __init__(
        self, settings: Settings, codec: Codec, wanted: Any, timeout: float, only: Any
    ) -> None:
        self.settings, self.codec, self.wanted = settings, codec, wanted
        self.timeout, self.only = timeout, only
        self.group = settings.topics.own("cli") + "-whatif"
        self.first: dict[int, int] = {}  # the first offset read of each partition
        self.held: dict[int, int] = {}  # each partition's first offset held, once read
        self.partition_of: dict[str, int] = {}

    def _read(self, topic: str, **kwargs: Any) -> Iterator[tuple[str, Any]]:
        from services.contracts.kafka import read_to_end

        for message in read_to_end(
            self.settings, topic, self.group, timeout=self.timeout, keys=self.only, **kwargs
        ):
            yield (message.key() or b"").decode("utf-8", "replace"), message

    def log_start(self, partition: int) -> int:
        """The first offset of a job-events partition the read holds all from: the log's
        start (what lies between it and the first record read is no record: transaction
        markers), or the first record read if retention deleted more while reading."""
        starts = [o[partition] for o in (self.first, self.held) if partition in o]
        return min(starts, default=0)

    def inputs(self) -> tuple[dict[str, list[tuple[int, Event]]], set[str]]:
        """The wanted jobs' inputs with their offsets, and every key the topic holds."""
        found: dict[str, list[tuple[int, Event]]] = {}
        known: set[str] = set()
        topic = self.settings.topics.job_events
        for key, message in self._read(topic, log_starts=self.held):
            self.first.setdefault(message.partition(), message.offset())
            known.add(key)
            if not self.wanted(key):
                continue
            try:
                decoded = self.codec.decode(message.value() or b"", expected=r.INPUT_EVENTS)
                event = event_of(decoded.schema, decoded.record)
            except (DecodeError, KeyError, TypeError, ValueError):
                continue
            if event.job_id == key:
                found.setdefault(key, []).append((message.offset(), event))
                self.partition_of[key] = message.partition()
        return found, known

    def snapshots(self) -> dict[str, list[tuple[int, Start]]]:
        """The wanted jobs' snapshots with their partitions; one this reader cannot read
        (another state format, a damaged record) is left out."""
        found: dict[str, list[tuple[int, Start]]] = {}
        for key, message in self._read(self.settings.topics.job_snapshots):
            if not self.wanted(key):
                continue
            try:
                record = self.codec.decode(
                    message.value() or b"", expected=frozenset({r.JOB_SNAPSHOT})
                ).record
                if record["stateFormat"] != STATE_FORMAT or record["jobId"] != key:
                    continue
                start = Start(record["offset"], loads(record["state"]))
            except (DecodeError, StateFormatError):
                continue
            found.setdefault(key, []).append((record["partition"], start))
        return found

    def flink(self) -> dict[str, list[Mapping[str, Any]]]:
        """Flink's records of the wanted jobs, the latest revision of each rescale."""
        flink: dict[str, dict[str, Mapping[str, Any]]] = {}
        for key, message in self._read(self.settings.topics.flink_rescales):
            if not self.wanted(key):
                continue
            try:
                record = self.codec.decode(
                    message.value() or b"", expected=frozenset({r.FLINK_RESCALE})
                ).record
            except DecodeError:
                continue
            kept = flink.setdefault(key, {})
            known_revision = kept.get(record["rescaleUuid"])
            if known_revision is None or record["revision"] >= known_revision["revision"]:
                kept[record["rescaleUuid"]] = record
        return {k: list(v.values()) for k, v in flink.items()}


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
            events = recorded.events_of(key)
            start = recorded.start_of(key)
            shown = sides(events, recorded.flink.get(key, ()), overrides, defaults, start)
            lines = report(key, shown, len(events), overrides, since=start)
        else:
            if not recorded.inputs:
                raise WhatIfError(f"no recorded inputs of {_scope(args)}")
            lines = fleet_report(
                [
                    (
                        key,
                        sides(
                            events,
                            recorded.flink.get(key, ()),
                            overrides,
                            defaults,
                            recorded.start_of(key),
                        ),
                    )
                    for key, events in sorted(recorded.inputs.items())
                ]
            )
            if recorded.gone:
                lines.append(
                    f"{len(recorded.gone)} jobs left out: their first inputs have left "
                    "job-events and no snapshot follows them"
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
