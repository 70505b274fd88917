"""Benchmark (not a test): a month of a fleet through the local stack, in compressed time.

    .venv/bin/python -m bench.month_bench --out .run/month.jsonl          # 30 days of 60 s
    .venv/bin/python -m bench.month_bench --days 3 --day-seconds 20 --jobs 50   # a look

Its own broker and the three services as `local up` runs them (each under its supervisor),
in `--run-dir`; nothing else of the machine's.

**The fleet.** `--jobs` live jobs, each a source and a map (parallelism 4, max 8, one
slot-sharing group) on TaskManagers of 2 slots, checkpointing every `--checkpoint-seconds`.
Every day each job gets a new TaskManager (it scales up) and loses one of those it had
(it fails over and scales down), one in three has its requirements changed, one in five a
recoverable task failure; `--end-share` of the jobs are cancelled and as many new ones
submitted. Each event is dated when it is sent (the wall clock, as the scheduler's timers
are). The scheduler is SIGKILLed on day 10 and the history on day 20 (`--kill`); their
supervisors start them again.

**The clock.** A day is `--day-seconds` of wall time; every horizon counted in days is
divided by the same factor (1,440 at 60 s): every topic's `retention.ms` and `segment.ms`,
the scheduler's compacted changelogs' too (the broker checks every 5 s),
`jobstore.expiration-time` (3,600 s -> 3 s), the actuator's `--snapshot-minutes` (60 ->
2.5 s) and `--command-memory-hours` (15 days -> 15 min), and the scheduler's
`--snapshot-hours` (24 -> 60 s). A topic kept
7 days then holds 7 days of the fleet's records, as it would: the rate and the horizon
are scaled alike, so the bytes a horizon holds, the jobs a worker keeps and the rows the
history reads carry over. What does not scale is what the wall clock paces: the history's
micro-batches (one per 10 s whatever the day's length), its compaction (`--optimize-minutes`,
1: once a day) and VACUUM's retention (`--vacuum-minutes`, 2: it must outlast the longest
batch write, `history run --short-retention`); the jobs' own timings (cooldown,
stabilization) stay Flink's defaults. File counts are therefore those of these batches:
docs/operations.md says how they extend to a real day.

**Every day** a JSON line: disk per topic, per table (bytes, Parquet files, files under
10 KB, Delta log files), the streaming checkpoints, the scheduler's RocksDB, each service's
RSS (with its children: the history's JVM), and the wall time of `history summary` and of
a `history sql` count. **At the end** every live job is cancelled (so the log comes to rest),
and the loss check: a replay of the whole month's job-events (the bench's own copy, read
as the topic is written: the topic keeps 14 days) through the scheduler's Processor vs
the history's table, per job, and every rescale the rescales topic still holds (its
retention, 7 days, trims the rest) in the table at its latest revision; the dead letters by
reason; per day the jobs the embedded cluster checkpointed (a restarted actuator that
forgot a job stops checkpointing it); and what a what-if still reaches from the topics:
the jobs it folds from their first input, from a snapshot on job-snapshots (and whether
every rescale that fold gives is the whole replay's), and those it refuses.
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import os
import random
import re
import signal
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from bench.proc import children, tree_rss_mib
from services.contracts import Codec, DecodeError, SchemaRegistry, Settings
from services.contracts import records as r
from services.contracts import topics as t
from services.contracts.events import (
    RUNTIME_CHECKPOINT_IDS,
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    VertexSpec,
    to_record,
)
from services.contracts.jobconfig import JOB_STORE_EXPIRATION, RUNTIME_MODE
from services.contracts.kafka import ensure_topics, librdkafka_config, producer_config
from services.history.sinklog import DELTA_LOG, data_files
from services.localstack import ports, stack
from services.localstack.broker import LocalBroker
from services.localstack.jars import kafka_jars
from services.localstack.layout import cache_dir
from services.localstack.processes import ServiceProcess
from tests.history.support import read_topic
from tests.integration.robustness_support import (
    history_revisions,
    latest_rescales,
    quiescent_snapshot,
    replay_log,
)
from tests.kafka_support import Received

DAY_S = 86_400
SMALL = 10 * 1024
VERTICES = (
    VertexSpec("source", "Source", "g", "default", 4, 8),
    VertexSpec("map", "Map", "g", "default", 4, 8),
)
BROKER_EXTRA = "log.retention.check.interval.ms=5000\nlog.segment.delete.delay.ms=1000\n"
SCALEFOLD = Path(sys.executable).with_name("scalefold")
EXTERNAL = ((RUNTIME_MODE, "external"),)  # the local stack's scheduler: the actuator runs jobs


@dataclass(frozen=True)
class Clock:
    """A simulated day of `day_s` wall seconds; horizons divided by `factor`."""

    day_s: float

    @property
    def factor(self) -> float:
        return DAY_S / self.day_s

    def scaled_ms(self, real_ms: int) -> int:
        return max(1_000, round(real_ms / self.factor))


# -- the fleet (pure: a day's plan from its state and a seeded generator) -------------------


@dataclass(frozen=True)
class Shape:
    """What every job of the fleet shares, and the day's length and churn."""

    day_s: float
    end_share: float
    config: tuple[tuple[str, str], ...]
    checkpoint_ms: int


@dataclass
class Job:
    job_id: str
    tms: list[str] = field(default_factory=list)


@dataclass
class FleetState:
    live: list[Job] = field(default_factory=list)
    made: int = 0
    tm_made: int = 0

    def new_tm(self) -> str:
        self.tm_made += 1
        return f"tm-{self.tm_made}"


def submit(state: FleetState, at: float, shape: Shape) -> list[tuple[float, Event]]:
    """A new job at `at` (s into the day) with two TaskManagers just after."""
    state.made += 1
    job = Job(f"month-{state.made}")
    state.live.append(job)
    planned: list[tuple[float, Event]] = [
        (at, JobSubmitted(job.job_id, 0, job.job_id, VERTICES, shape.checkpoint_ms, shape.config))
    ]
    for step in (0.1, 0.2):
        tm = state.new_tm()
        job.tms.append(tm)
        planned.append((at + step, TaskManagerRegistered(job.job_id, 0, tm, 2, None)))
    return planned


def plan_day(state: FleetState, rng: random.Random, shape: Shape) -> list[tuple[float, Event]]:
    """The day's events as (seconds into the day, event with timestamp 0: dated when sent)."""
    planned: list[tuple[float, Event]] = []
    ending = [job for job in state.live if rng.random() < shape.end_share]
    for job in ending:
        planned.append(
            (rng.uniform(0, shape.day_s * 0.9), JobLifecycle(job.job_id, 0, JobEventKind.CANCEL))
        )
        state.live.remove(job)
    for job in state.live:
        tm = state.new_tm()
        planned.append(
            (rng.uniform(0, shape.day_s * 0.9), TaskManagerRegistered(job.job_id, 0, tm, 2, None))
        )
        if len(job.tms) >= 2:
            gone = job.tms.pop(rng.randrange(len(job.tms)))
            planned.append(
                (
                    rng.uniform(0, shape.day_s * 0.9),
                    TaskManagerLost(job.job_id, 0, gone, "month bench"),
                )
            )
        job.tms.append(tm)
        if rng.random() < 1 / 3:
            upper = rng.randint(2, 8)
            wanted = tuple(Requirement(v.id, 1, upper) for v in VERTICES)
            planned.append(
                (rng.uniform(0, shape.day_s * 0.9), RequirementsUpdated(job.job_id, 0, wanted))
            )
        if rng.random() < 1 / 5:
            planned.append(
                (
                    rng.uniform(0, shape.day_s * 0.9),
                    JobLifecycle(job.job_id, 0, JobEventKind.TASK_FAILURE),
                )
            )
    for _ in ending:  # after the others' plans: a new job's first day is its submission
        planned += submit(state, rng.uniform(0, shape.day_s * 0.5), shape)
    return planned


class Archive:
    """The bench's own copy of job-events, read as it is written: the topic keeps 14
    (scaled) days, and the loss check replays the whole month."""

    def __init__(self, settings: Settings) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        self._settings, self._topic = settings, settings.topics.job_events
        self._consumer = Consumer(
            librdkafka_config(settings, **{"group.id": f"{settings.topics.own('bench')}-archive"})
        )
        partitions = range(t.JOB_EVENTS.partitions)
        self._consumer.assign(
            [TopicPartition(self._topic, p, OFFSET_BEGINNING) for p in partitions]
        )
        self._log: list[Received] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="archive", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            for message in self._consumer.consume(1000, 0.5):
                if message.error() is None:
                    received = Received(
                        message.key(),
                        message.value() or b"",
                        message.partition() or 0,
                        message.offset() or 0,
                    )
                    with self._lock:
                        self._log.append(received)

    def read(self) -> list[Received]:
        """Everything written so far: waits until the copy holds each partition's end."""
        from confluent_kafka import Consumer, TopicPartition

        asking = Consumer(librdkafka_config(self._settings, **{"group.id": "archive-ends"}))
        try:
            ends = {
                p: asking.get_watermark_offsets(TopicPartition(self._topic, p), timeout=30)[1]
                for p in range(t.JOB_EVENTS.partitions)
            }
        finally:
            asking.close()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with self._lock:
                log = list(self._log)
            held: dict[int, int] = {}
            for message in log:
                held[message.partition] = message.offset + 1
            if all(held.get(p, 0) >= end for p, end in ends.items() if end > 0):
                return log
            time.sleep(0.5)
        raise RuntimeError(f"the archive of {self._topic} did not reach {ends} in 300 s")

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)
        self._consumer.close()


class Sender:
    """Sends planned events when their time comes, each dated then (never before the
    job's previous one), from a thread: the day's measurements never delay them."""

    def __init__(self, settings: Settings, codec: Codec) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(producer_config(settings, **{"linger.ms": 5}))
        self._topic, self._codec = settings.topics.job_events, codec
        self._queue: list[tuple[float, int, Event]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._last: dict[str, int] = {}
        self._count = 0
        self.sent = 0
        self._thread = threading.Thread(target=self._run, name="sender", daemon=True)
        self._thread.start()

    def add(self, origin: float, planned: list[tuple[float, Event]]) -> None:
        with self._lock:
            for offset, event in planned:
                self._count += 1
                heapq.heappush(self._queue, (origin + offset, self._count, event))

    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.time()
            with self._lock:
                due = []
                while self._queue and self._queue[0][0] <= now:
                    due.append(heapq.heappop(self._queue)[2])
            for event in due:
                stamp = max(int(time.time() * 1000), self._last.get(event.job_id, 0) + 1)
                self._last[event.job_id] = stamp
                dated = replace(event, timestamp=stamp)
                value = self._codec.encode(*to_record(dated))
                self._producer.produce(self._topic, key=event.job_id.encode(), value=value)
                self.sent += 1
            self._producer.poll(0)
            self._stop.wait(0.05)

    def close(self) -> None:
        while self.pending():
            time.sleep(0.2)
        self._stop.set()
        self._thread.join(10)
        self._producer.flush(60)


# -- the stack ---------------------------------------------------------------------------


def start_broker(run_dir: Path) -> LocalBroker:
    """A fresh broker of the bench's own, checking retention every 5 s."""
    broker = LocalBroker(run_dir / "broker", kafka_jars(cache_dir(os.environ)))
    broker.start(fresh=True, progress=lambda _: None)
    broker.stop(progress=lambda _: None)
    broker.config.write_text(broker.config.read_text() + BROKER_EXTRA)
    broker.start(progress=lambda _: None)
    return broker


def scale_topics(settings: Settings, clock: Clock) -> dict[str, dict[str, str]]:
    """Every topic of the stack's (scalefold's and the scheduler's changelogs) gets its
    retention and segment time divided by the clock's factor: a compacted changelog is
    compacted only once its segment rolls (an unbounded topic stays unbounded). Returns
    what was set."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient(librdkafka_config(settings))
    prefix, specs = settings.topics.prefix, {spec.suffix: spec for spec in t.ALL}
    week_ms = 7 * DAY_S * 1000  # Kafka's default segment.ms
    chosen: dict[str, dict[str, str]] = {}
    resources = []
    for name in sorted(admin.list_topics(timeout=30).topics):
        if not name.startswith(prefix):
            continue
        spec = specs.get(name.removeprefix(prefix))
        segment_ms = spec.segment_ms if spec is not None and spec.segment_ms else week_ms
        values = {"segment.ms": str(clock.scaled_ms(segment_ms))}
        if spec is not None and spec.retention_ms != t.INFINITE:
            values["retention.ms"] = str(clock.scaled_ms(spec.retention_ms))
        chosen[name.removeprefix(prefix)] = values
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET)
            for k, v in values.items()
        ]
        resources.append(ConfigResource(ResourceType.TOPIC, name, incremental_configs=entries))
    for future in admin.incremental_alter_configs(resources).values():
        future.result(30)
    return chosen


def services(
    root: Path, optimize_minutes: float, vacuum_minutes: float, clock: Clock
) -> dict[str, ServiceProcess]:
    scheduler_port, actuator_port = ports.free_ports(2)
    history = (
        *("--optimize-minutes", str(optimize_minutes)),
        *("--retention-hours", f"{vacuum_minutes / 60:.4f}", "--short-retention"),
    )
    return {
        "scheduler": stack.scheduler_process(
            root, scheduler_port, "--snapshot-hours", f"{clock.scaled_ms(t.DAY_MS) / 3_600_000:.6f}"
        ),
        "actuator": stack.actuator_process(
            root,
            actuator_port,
            "--snapshot-minutes",
            f"{clock.scaled_ms(3_600_000) / 60_000:.4f}",
            "--command-memory-hours",
            f"{clock.scaled_ms(t.COMMAND_OUTCOMES.retention_ms) / 3_600_000:.6f}",
        ),
        "history": stack.history_process(root, *history),
    }


# -- measuring --------------------------------------------------------------------------


def _du(path: Path) -> tuple[int, int]:
    """Bytes on disk (allocated blocks: Kafka's index files are sparse) and files under `path`."""
    sizes = (
        [f.stat().st_blocks * 512 for f in path.rglob("*") if f.is_file()] if path.exists() else []
    )
    return sum(sizes), len(sizes)


def topic_bytes(data: Path, prefix: str) -> dict[str, int]:
    found: Counter[str] = Counter()
    for directory in data.iterdir() if data.exists() else ():
        name, _, partition = directory.name.rpartition("-")
        if directory.is_dir() and partition.isdigit():
            found[name.removeprefix(prefix)] += _du(directory)[0]
    return dict(found)


def table_shape(path: Path) -> dict[str, int]:
    parquet = [f.stat().st_size for f in data_files(path)]
    log = path / DELTA_LOG
    return {
        "bytes": _du(path)[0],
        "parquet": len(parquet),
        "small": sum(1 for size in parquet if size < SMALL),
        "log_files": sum(1 for _ in log.iterdir()) if log.exists() else 0,
    }


def timed(*args: str) -> float | None:
    """Wall seconds of a scalefold command; None if it failed."""
    began = time.monotonic()
    done = subprocess.run([str(SCALEFOLD), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"  {' '.join(args[:2])} failed: {done.stderr.strip()[-300:]}", file=sys.stderr)
        return None
    return round(time.monotonic() - began, 2)


@dataclass
class Stack:
    """The bench's broker and services, in `root`."""

    root: Path
    broker: LocalBroker
    settings: Settings
    procs: dict[str, ServiceProcess] = field(default_factory=dict)

    def alive(self) -> None:
        """Every service running (a supervisor may be starting one again: 30 s grace)."""
        down = [name for name, p in self.procs.items() if p.pid() is None]
        if down:
            time.sleep(30)
            down = [name for name, p in self.procs.items() if p.pid() is None]
        assert not down, f"not running: {down}"

    def stop(self) -> None:
        for process in reversed(list(self.procs.values())):
            process.stop()
        self.broker.stop(progress=lambda _: None)


def rocksdb_memory_mib(port: int) -> dict[str, float]:
    """The scheduler's RocksDB memory per kind (its /metrics, over both tables), in MiB;
    empty while it is not answering (a restart)."""
    pattern = re.compile(r'rocksdb_memory_bytes\{table="\w+",kind="(\w+)"\} (\d+)')
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
            text = answer.read().decode()
    except OSError:
        return {}
    totals: dict[str, float] = {}
    for kind, value in pattern.findall(text):
        totals[kind] = totals.get(kind, 0.0) + int(value) / MIB
    return totals


def measure(day: int, running: Stack, state: FleetState, sender: Sender) -> dict[str, Any]:
    history = running.root / "history"
    tables = history / "tables"
    tree = children()
    procs = running.procs
    rss = {name: tree_rss_mib(p.pid(), tree) for name, p in procs.items()}
    broker = running.broker.status()
    rss["broker"] = tree_rss_mib(broker.pid if broker else None, tree)
    shapes = {d.name: table_shape(d) for d in sorted(tables.iterdir())} if tables.exists() else {}
    data_dir = ("--data-dir", str(history))
    return {
        "day": day,
        "load": round(os.getloadavg()[0], 1),
        "live_jobs": len(state.live),
        "jobs_made": state.made,
        "events_sent": sender.sent,
        "topics_bytes": topic_bytes(running.broker.data, running.settings.topics.prefix),
        "tables": shapes,
        "history_files": _du(history)[1],
        "checkpoints_bytes": _du(history / "checkpoints")[0],
        "scheduler_state_bytes": _du(running.root / "scheduler")[0],
        "rss_mib": rss,
        "scheduler_rocksdb_mib": rocksdb_memory_mib(stack.web_port(procs["scheduler"])),
        "restarts": {name: p.restarts().count for name, p in procs.items()},
        "summary_s": timed("history", "summary", *data_dir),
        "sql_s": timed("history", "sql", *data_dir, "SELECT count(*) AS n FROM rescales"),
    }


# -- the loss check ---------------------------------------------------------------------


def checkpointed_per_day(
    codec: Codec, log: list[Received], origin_ms: int, day_ms: int
) -> list[int]:
    """Per day, the jobs the embedded runtime checkpointed (its own checkpoint ids): a
    restarted actuator that lost a job's interval stops checkpointing it."""
    jobs: dict[int, set[str]] = {}
    for message in log:
        try:
            decoded = codec.decode(message.value, expected=frozenset({r.JOB_LIFECYCLE_EVENT}))
        except DecodeError:
            continue
        record = decoded.record
        own = (record.get("checkpointId") or 0) >= RUNTIME_CHECKPOINT_IDS
        if record["kind"] == JobEventKind.CHECKPOINT_COMPLETED and own:
            day = (record["timestamp"] - origin_ms) // day_ms + 1
            jobs.setdefault(day, set()).add(record["jobId"])
    return [len(jobs.get(day, ())) for day in range(1, max(jobs, default=0) + 1)]


def loss_check(
    settings: Settings,
    codec: Codec,
    history: Path,
    alive: Any,
    days: tuple[int, int],
    *,
    archive: Archive,
) -> dict[str, Any]:
    """`days`: the first day's start and a day's length (wall ms); `archive`: the bench's
    copy of job-events (the topic itself keeps 14 days)."""
    snapshot = quiescent_snapshot(settings, timeout=900, alive=alive, read_log=archive.read)
    replayed = replay_log(codec, settings.topics.job_events, snapshot.log, EXTERNAL)
    held, on_topic = history_covers(settings, codec, history, replayed.rescales, alive)

    def per_job(rescales: dict[str, dict[str, Any]]) -> Counter[str]:
        return Counter(record["jobId"] for record in rescales.values())

    replay_jobs = per_job(replayed.rescales)
    job_of = {uuid: record["jobId"] for uuid, record in replayed.rescales.items()}
    history_jobs = Counter(job_of.get(uuid, "?") for uuid in held)
    jobs = set(replay_jobs) | set(history_jobs)
    reach = whatif_reach(settings, codec, replayed.rescales)
    letters = read_topic(settings, settings.topics.dead_letters, timeout=60)
    reasons: Counter[str] = Counter()
    for message in letters:
        try:
            reasons[codec.decode(message.value or b"").record["errorClass"]] += 1
        except Exception:  # a count of what is there, whatever it is
            reasons["undecodable"] += 1
    return {
        "job_events": len(snapshot.log),
        "rescales_replay": sum(replay_jobs.values()),
        "rescales_topic": len(on_topic),
        "rescales_history": len(held),
        "revisions_equal": set(held) == set(replayed.rescales)
        and all(held[u] == revision for u, revision in on_topic.items())
        and all(held[u] >= record["revision"] for u, record in replayed.rescales.items()),
        "jobs": len(jobs),
        "jobs_equal": sum(1 for j in jobs if replay_jobs[j] == history_jobs[j]),
        "dead_letters": dict(reasons),
        "jobs_checkpointed_per_day": checkpointed_per_day(codec, snapshot.log, *days),
        **reach,
    }


def whatif_reach(
    settings: Settings, codec: Codec, replayed: dict[str, dict[str, Any]]
) -> dict[str, int]:
    """Which jobs a what-if still folds, from what the topics hold at the end: from their
    first input, from a snapshot (their first inputs gone), or not at all; and for those
    from a snapshot, whether every rescale the fold from it gives is, at its last revision,
    the one the whole month's replay gives."""
    from services.scheduler.core.driver import replay
    from services.scheduler.core.effects import RescaleUpdated
    from services.scheduler.whatif import pinned, read_recorded

    recorded = read_recorded(settings, codec, lambda key: True, timeout=60)
    equal = 0
    for job, start in recorded.starts.items():
        _, effects = replay(pinned(recorded.inputs[job], {}), EXTERNAL, start=start.job)
        latest = {e.rescale_uuid: e.record for e in effects if isinstance(e, RescaleUpdated)}
        equal += all(replayed.get(uuid) == record for uuid, record in latest.items())
    return {
        "whatif_from_first_input": len(recorded.inputs) - len(recorded.starts),
        "whatif_from_snapshot": len(recorded.starts),
        "whatif_from_snapshot_equal": equal,
        "whatif_gone": len(recorded.gone),
    }


def history_covers(
    settings: Settings,
    codec: Codec,
    history: Path,
    replayed: dict[str, dict[str, Any]],
    alive: Any,
    *,
    timeout: float = 900,
) -> tuple[dict[str, int], dict[str, int]]:
    """Poll until the history's table holds every rescale of the replay and, at its
    latest revision, every one the rescales topic still holds (or the deadline); return
    (what the table holds, what the topic holds). The topic is read at every look: the
    loop goes on after the log came to rest (the history's planner still asks)."""
    deadline = time.monotonic() + timeout
    while True:
        alive()
        on_topic = {
            uuid: record["revision"]
            for uuid, record in latest_rescales(
                codec, read_topic(settings, settings.topics.rescales)
            ).items()
        }
        held = history_revisions(history)
        covered = all(held.get(u, -1) >= r["revision"] for u, r in replayed.items())
        if covered and all(held.get(u) == n for u, n in on_topic.items()):
            return held, on_topic
        if time.monotonic() > deadline:
            return held, on_topic
        time.sleep(1)


# -- the run ----------------------------------------------------------------------------


def start(args: argparse.Namespace, clock: Clock, emit: Any) -> Stack:
    """A fresh run directory, the broker, the topics scaled to `clock`, the services."""
    root = Path(args.run_dir).resolve()
    if root.exists():
        subprocess.run(["rm", "-rf", str(root)], check=True)
    root.mkdir(parents=True)
    broker = start_broker(root)
    running = broker.status()
    assert running is not None
    up = Stack(root, broker, Settings(bootstrap_servers=running.bootstrap))
    try:
        ensure_topics(up.settings, up.settings.topics.all())
        up.procs = services(root, args.optimize_minutes, args.vacuum_minutes, clock)
        for process in up.procs.values():
            stack.start(process, up.settings)
        for process in up.procs.values():
            stack.wait_ready(process)
        emit({"scaled": scale_topics(up.settings, clock), "factor": clock.factor})
    except BaseException:
        up.stop()
        raise
    return up


def month(args: argparse.Namespace, up: Stack, clock: Clock, emit: Any) -> None:
    """The days, each measured at its end; then every job cancelled, and the loss check."""
    codec = Codec(SchemaRegistry.load())
    rng = random.Random(args.seed)
    expiration = max(1, round(3_600 / clock.factor))
    shape = Shape(
        args.day_seconds,
        args.end_share,
        ((JOB_STORE_EXPIRATION, str(expiration)),),
        args.checkpoint_seconds * 1000,
    )
    state = FleetState()
    archive = Archive(up.settings)
    sender = Sender(up.settings, codec)
    origin = time.time()
    first = [submit(state, rng.uniform(0, args.day_seconds / 2), shape) for _ in range(args.jobs)]
    sender.add(origin, [planned for job in first for planned in job])
    kills = dict(item.split(":") for item in args.kill)
    for day in range(1, args.days + 1):
        began = origin + (day - 1) * args.day_seconds
        if day > 1:
            sender.add(began, plan_day(state, rng, shape))
        pid = up.procs[kills[str(day)]].pid() if str(day) in kills else None
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            emit({"day": day, "killed": kills[str(day)], "pid": pid})
        time.sleep(max(0.0, began + args.day_seconds - time.time()))
        emit(measure(day, up, state, sender))
    sender.add(
        time.time(), [(0.0, JobLifecycle(j.job_id, 0, JobEventKind.CANCEL)) for j in state.live]
    )
    sender.close()
    days = (round(origin * 1000), round(args.day_seconds * 1000))
    checked = loss_check(up.settings, codec, up.root / "history", up.alive, days, archive=archive)
    emit({"loss_check": checked})
    archive.close()
    emit({**measure(args.days + 1, up, state, sender), "after": True})


def run(args: argparse.Namespace) -> list[dict[str, Any]]:
    clock = Clock(args.day_seconds)
    rows: list[dict[str, Any]] = []
    with contextlib.ExitStack() as closing:
        out = closing.enter_context(Path(args.out).open("w")) if args.out else None

        def emit(row: dict[str, Any]) -> None:
            rows.append(row)
            print(json.dumps(row), flush=True)
            if out is not None:
                out.write(json.dumps(row) + "\n")
                out.flush()

        up = start(args, clock, emit)
        closing.callback(up.stop)
        month(args, up, clock, emit)
    return rows


MIB = 2**20
CHANGELOGS = "-changelog"


def _mib(value: float | None) -> str:
    return "" if value is None else f"{value / MIB:,.1f}"


TOPICS_SHOWN = ("job-events", "job-snapshots", "rescales", "decisions")


def report(rows: list[dict[str, Any]]) -> list[str]:
    """The days as a Markdown table (docs/operations.md), then the loss check."""
    lines = [
        "| day | load | job-events | job-snapshots | rescales | decisions | changelogs | tables "
        "| Parquet (< 10 KB) | Delta log | scheduler (RocksDB) | actuator | history | broker "
        "| summary | sql |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for row in rows:
        if "tables" not in row:
            continue
        topics, tables, rss = row["topics_bytes"], row["tables"].values(), row["rss_mib"]
        changelogs = sum(v for k, v in topics.items() if k.endswith(CHANGELOGS))
        cells = [
            "after" if row.get("after") else str(row["day"]),
            f"{row['load']:.1f}",
            *(_mib(topics.get(name)) for name in TOPICS_SHOWN),
            _mib(changelogs),
            _mib(sum(t["bytes"] for t in tables)),
            f"{sum(t['parquet'] for t in tables)} ({sum(t['small'] for t in tables)})",
            str(sum(t["log_files"] for t in tables)),
            f"{rss.get('scheduler') or 0:.0f} ({sum(row.get('scheduler_rocksdb_mib', {}).values()):.0f})",
            *(f"{rss.get(name) or 0:.0f}" for name in ("actuator", "history", "broker")),
            *(f"{row[key]:.1f}" if row[key] is not None else "-" for key in ("summary_s", "sql_s")),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", *growth(rows)]
    lines += [f"\n{json.dumps(row['loss_check'])}" for row in rows if "loss_check" in row]
    return lines


MEMORY_DAY = -(-t.COMMAND_OUTCOMES.retention_ms // t.DAY_MS)
"""The first day past the services' horizons: the actuator's command memory (15 days)."""


def horizon_day(spec: t.TopicSpec) -> int:
    """The first day a topic's oldest segment has gone: retention plus a segment's time."""
    return -(-(spec.retention_ms + (spec.segment_ms or t.SEGMENT_MS)) // t.DAY_MS)


def growth(rows: list[dict[str, Any]]) -> list[str]:
    """Each curve's slope per day from its horizon's day on (least squares, with its
    standard error: a slope within two of them is not told apart from flat by these days)."""
    days = [row for row in rows if "tables" in row and not row.get("after")]

    def rss(name: str) -> Callable[[dict[str, Any]], float]:
        return lambda row: row["rss_mib"].get(name) or 0.0

    def topic(name: str) -> Callable[[dict[str, Any]], float]:
        return lambda row: row["topics_bytes"].get(name, 0) / MIB

    def tables(key: str) -> Callable[[dict[str, Any]], float]:
        return lambda row: sum(table[key] for table in row["tables"].values())

    specs = {spec.suffix: spec for spec in t.ALL}
    curves: dict[str, tuple[int, Callable[[dict[str, Any]], float]]] = {
        **{f"{name} (MiB)": (horizon_day(specs[name]), topic(name)) for name in TOPICS_SHOWN},
        "tables (MiB)": (MEMORY_DAY, lambda row: tables("bytes")(row) / MIB),
        "Parquet files": (MEMORY_DAY, tables("parquet")),
        "Delta log files": (MEMORY_DAY, tables("log_files")),
        **{
            f"{name} RSS (MiB)": (MEMORY_DAY, rss(name))
            for name in ("scheduler", "actuator", "history")
        },
        "scheduler RSS less RocksDB (MiB)": (
            MEMORY_DAY,
            lambda row: rss("scheduler")(row) - sum(row.get("scheduler_rocksdb_mib", {}).values()),
        ),
    }
    lines = ["Growth a day after each curve's horizon (from day: slope ± its standard error):", ""]
    for label, (since, value) in curves.items():
        after = [row for row in days if row["day"] >= since]
        if len(after) >= 3:
            slope, error = _slope(
                [float(row["day"]) for row in after], [value(row) for row in after]
            )
            lines.append(f"- {label} (from day {since}): {slope:+.2f} ± {error:.2f}")
    return lines


def _slope(x: list[float], y: list[float]) -> tuple[float, float]:
    slope, intercept = statistics.linear_regression(x, y)
    residual = sum((b - (slope * a + intercept)) ** 2 for a, b in zip(x, y, strict=True))
    spread = sum((a - statistics.fmean(x)) ** 2 for a in x)
    return slope, (residual / (len(x) - 2) / spread) ** 0.5


def picture(rows: list[dict[str, Any]], path: Path) -> None:
    """Four panels over the days: disk per topic and table, files, memory, latency."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    days = [row for row in rows if "tables" in row]
    x = [row["day"] for row in days]
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    disk, files, memory, latency = axes[0][0], axes[0][1], axes[1][0], axes[1][1]
    for name in TOPICS_SHOWN:
        disk.plot(x, [row["topics_bytes"].get(name, 0) / MIB for row in days], label=name)
    disk.plot(
        x,
        [sum(t["bytes"] for t in row["tables"].values()) / MIB for row in days],
        label="history tables",
    )
    disk.set_title("disk (MiB)", fontsize=9)
    for key, label in (
        ("parquet", "Parquet files"),
        ("small", "under 10 KB"),
        ("log_files", "Delta log files"),
    ):
        files.plot(x, [sum(t[key] for t in row["tables"].values()) for row in days], label=label)
    files.plot(x, [row["history_files"] for row in days], label="all history files")
    files.set_title("files under the history", fontsize=9)
    for name in ("scheduler", "actuator", "history", "broker"):
        memory.plot(x, [row["rss_mib"].get(name) or 0 for row in days], label=name)
    memory.set_title("RSS (MiB, with children)", fontsize=9)
    for key, label in (("summary_s", "history summary"), ("sql_s", "history sql")):
        latency.plot(x, [row[key] for row in days], marker=".", label=label)
    latency.set_title("command wall time (s)", fontsize=9)
    for ax in (disk, files, memory, latency):
        ax.legend(fontsize=7)
    for ax in (memory, latency):
        ax.set_xlabel("simulated day")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=80)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--days", type=int, default=30, help="simulated days (default 30)")
    parser.add_argument(
        "--day-seconds", type=float, default=60.0, help="wall seconds per day (default 60)"
    )
    parser.add_argument("--jobs", type=int, default=1_000, help="live jobs (default 1000)")
    parser.add_argument(
        "--end-share", type=float, default=0.03, help="share of jobs ending a day (default 0.03)"
    )
    parser.add_argument(
        "--checkpoint-seconds", type=int, default=60, help="the jobs' checkpoint interval (60)"
    )
    parser.add_argument(
        "--optimize-minutes", type=float, default=1.0, help="the history's compaction cadence (1)"
    )
    parser.add_argument(
        "--vacuum-minutes", type=float, default=2.0, help="the history's VACUUM retention (2)"
    )
    parser.add_argument(
        "--kill",
        action="append",
        default=None,
        metavar="DAY:SERVICE",
        help="SIGKILL a service on that day (default 10:scheduler and 20:history)",
    )
    parser.add_argument("--seed", type=int, default=49)
    parser.add_argument("--run-dir", default=".run/month", help="wiped first (default .run/month)")
    parser.add_argument("--out", help="also write the JSON lines here")
    parser.add_argument("--picture", metavar="PNG", help="draw the days here")
    parser.add_argument(
        "--report",
        metavar="JSONL",
        help="run nothing: print the table (and --picture) of an earlier run's --out",
    )
    args = parser.parse_args(argv)
    if args.kill is None:
        args.kill = ["10:scheduler", "20:history"]
    if args.report:
        rows = [json.loads(line) for line in Path(args.report).read_text().splitlines()]
    else:
        # A SIGTERM stops the stack it started, as Ctrl-C does (a shell's background job
        # ignores SIGINT): the exit unwinds `run`'s ExitStack.
        signal.signal(signal.SIGTERM, lambda number, _: sys.exit(128 + number))
        rows = run(args)
    print("\n".join(report(rows)))
    if args.picture:
        picture(rows, Path(args.picture))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
