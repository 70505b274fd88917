"""scalefold's autoscaler beside the Flink Kubernetes Operator's (issue 50, item 5; not a test).

    .venv/bin/scalefold local run --run-dir .run/autoscale -- \\
        .venv/bin/python -m bench.autoscale_bench [--traces steps,burst,sine] [--duration 420]

One Flink 2.3.0 session cluster (Flink's default adaptive-scheduler waits, two
TaskManagers of four slots: the cap is 8 slots for both), the workload job
(deploy/flink/workload: Kafka source on 6 partitions, `Work` keyed by the load's `--keys`
(64; bench/key_skew.py: how they fall onto its subtasks), 4 ms a record spent
waiting (`--cost-mode wait`: 250 records a second a subtask whatever the machine's
cores), started at parallelism 2, at most 8), and for each trace (services/tools/load.py's
shapes, `--peak` records a second over `--duration` seconds) two runs, each on a fresh
topic, consumer group and job:

- **peer**: the operator's standalone autoscaler (`--peer-jar`, its own JVM; found by
  itself over REST, it PUTs requirements: FLIP-291);
- **scalefold**: the bridge (signals every 10 s), the history service with
  `--autoscaler scale` and the actuator with the cluster as its Flink backend (it PUTs
  the requirements the history's SET_PARALLELISM commands ask), on a topic prefix of
  the run's own.

With `--together` each controller gets a cluster of its own (the same configuration) and
the two runs of a trace go at once: a busy minute of this shared machine then falls on
both, not on one of them (the bench itself adds about one core's load).

Both get the same policy settings where their keys mean the same (SETTINGS); each keeps
its own defaults otherwise (the peer aligns a vertex's parallelism to its key groups or
partitions; scalefold weighs a rescale's downtime and asks its core first). Every second
the bench samples the job's backlog (what the topic holds beyond the workload consumer
group's committed offsets: Flink commits them on each 2 s checkpoint), its vertices'
parallelism and whether every task runs. Per run: rescales (changes of the parallelism),
downtime (seconds sampled with a task not running), backlog p50/p99/max, the time to
catch up after each rise of the trace (backlog back under `--caught-up` seconds of the
trace's rate then: Flink commits offsets on its checkpoints, so a job keeping up shows a
backlog of a few seconds' records),
slot-seconds (the largest vertex's parallelism: one slot-sharing group), decisions sent
per hour, and from when after the trace every vertex ran at 1 to the run's end. The
sampling goes on `--tail` seconds after the trace; with `--settle`, until each run's job
has run at 1 for HOLD_S (both runs of a trace, with `--together`), at most `--tail`: a
whole cycle, the scale-downs with it, whoever lowers later. A table (markdown) and
`--picture` (backlog and parallelism over time, the peer above scalefold, one column a
trace) at the end; `--json` writes every sample.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from services.contracts import Settings
from services.contracts.flinkrest import FlinkRest
from services.localstack.layout import PROJECT_ROOT, RUN_ROOT
from services.tools.load import Trace, shape

OUT = RUN_ROOT / "autoscale-bench"
PEER_JAR = PROJECT_ROOT.parent / "shared" / "peers" / "flink-autoscaler-standalone-1.15.0.jar"
SLOTS, TASKMANAGERS, MAX_PARALLELISM, START_PARALLELISM = 4, 2, 8, 2
COST_US = 4_000
KEYS = 64
"""The load's keys (`--keys`)."""
HOLD_S = 30.0
"""--settle: how long a job runs at parallelism 1 after the trace before it counts as
settled (with no load, nothing raises it from there)."""
SETTINGS = {
    "job.autoscaler.utilization.target": "0.7",
    "job.autoscaler.target.utilization.boundary": "0.2",
    "job.autoscaler.metrics.window": "1 min",
    "job.autoscaler.stabilization.interval": "1 min",
    "job.autoscaler.catch-up.duration": "5 min",
    "job.autoscaler.restart.time": "30 s",
    "job.autoscaler.scale-down.interval": "5 min",
    "job.autoscaler.vertex.max-parallelism": str(MAX_PARALLELISM),
    "job.autoscaler.metrics.busy-time.aggregator": "MAX",
}
"""The policy settings both autoscalers get, by the operator's keys."""
DEFAULTS_APART = ("job.autoscaler.scale-down.max-factor",)
"""Keys both read alike whose defaults differ (the operator's 0.6, scalefold's 1): each
keeps its own unless `--set` gives both one."""
PEER_ONLY = {
    "autoscaler.standalone.control-loop.interval": "10 s",
    "job.autoscaler.enabled": "true",
    "job.autoscaler.scaling.enabled": "true",
}


@dataclass
class Sample:
    at_s: float
    rate: float
    backlog: int | None
    parallelism: dict[str, int]
    running: bool


@dataclass
class Result:
    trace: str
    controller: str
    rescales: int
    downtime_s: float
    """Flink's own: each completed rescale's time outside Executing (its scheduler states)."""
    backlog_p50: float
    backlog_p99: float
    backlog_max: float
    catch_up_s: list[float | None]
    slot_seconds: float
    decisions: int
    decisions_per_hour: float
    stalled_s: float = 0.0
    """Seconds the bench's samples saw a task not running (REST caches a job's graph for
    a few seconds: a lower bound)."""
    samples: list[Sample] = field(default_factory=list)
    story: list[str] = field(default_factory=list)
    """What happened, a line an event: each decision recorded (scalefold's), each of
    Flink's rescales."""
    settled_s: float | None = None
    """From when, after the trace, every vertex ran at 1 to the run's end (None: not
    within the run)."""


def say(line: str) -> None:
    print(f"autoscale-bench: {line}", file=sys.stderr, flush=True)


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def rises(trace: Trace) -> list[float]:
    """The instants the trace's rate steps up (two points at one instant), or starts."""
    found = [0.0]
    for (t0, r0), (t1, r1) in pairwise(trace.points):
        if t0 == t1 and r1 > r0:
            found.append(t1)
    return found


def catch_up(samples: list[Sample], since: float, until: float, limit: float) -> float | None:
    """Seconds from `since` until the backlog is under `limit` seconds of the rate for good
    (before `until`)."""
    after = [s for s in samples if since <= s.at_s < until and s.backlog is not None]
    for i, s in enumerate(after):
        if all(x.backlog is not None and x.backlog <= limit * x.rate for x in after[i:]):
            return s.at_s - since
    return None


def settled_at(samples: list[Sample], after_s: float) -> float | None:
    """When the job's last stretch of samples (after `after_s`) at the floor began: every
    vertex at parallelism 1 and running, to the last sample. None: the last sample is not
    there. With no load after the trace, nothing raises a job from there."""

    def floor(s: Sample) -> bool:
        return s.running and bool(s.parallelism) and max(s.parallelism.values()) == 1

    since = None
    for s in samples:
        if s.at_s < after_s:
            continue
        since = (s.at_s if since is None else since) if floor(s) else None
    return since


def downtime_ms(details: dict[str, Any]) -> int:
    """A completed rescale's downtime as Flink recorded it: its time outside Executing."""
    spans = details.get("schedulerStates") or []
    return sum(int(s.get("durationInMillis") or 0) for s in spans if s.get("state") != "Executing")


def summarize(
    name: str,
    controller: str,
    trace: Trace,
    samples: list[Sample],
    *,
    decisions: int,
    limit: float,
    downtime: float = 0.0,
) -> Result:
    backlogs = [float(s.backlog) for s in samples if s.backlog is not None]
    shapes = [tuple(sorted(s.parallelism.items())) for s in samples if s.parallelism]
    changes = sum(1 for a, b in pairwise(shapes) if a != b)
    down, slots = 0.0, 0.0
    for a, b in pairwise(samples):
        dt = b.at_s - a.at_s
        down += dt if not a.running else 0.0
        slots += dt * max(a.parallelism.values(), default=0)
    starts = rises(trace)
    ends = [*starts[1:], samples[-1].at_s if samples else trace.duration]
    hours = (samples[-1].at_s if samples else trace.duration) / 3600
    return Result(
        name,
        controller,
        changes,
        downtime,
        percentile(backlogs, 0.5),
        percentile(backlogs, 0.99),
        max(backlogs, default=0.0),
        [catch_up(samples, s, e, limit) for s, e in zip(starts, ends, strict=True)],
        slots,
        decisions,
        decisions / hours if hours else 0.0,
        down,
        samples,
        settled_s=settled_at(samples, trace.duration),
    )


class Cluster:
    """The session cluster the runs share (its TaskManagers stay; each run's job goes)."""

    def __init__(self, directory: Path) -> None:
        from services.localstack.flink import FlinkCluster
        from services.localstack.flinkconf import FlinkConfig, Waits
        from services.localstack.flinkdist import flink_home, workload_job
        from services.localstack.layout import cache_dir
        from services.localstack.ports import free_ports

        cache = cache_dir(os.environ)
        home = flink_home(cache)
        self.jar = workload_job(cache, home)
        self.cluster = FlinkCluster(directory, home)
        rest_port, rpc_port = free_ports(2)
        config = FlinkConfig(rest_port, rpc_port, slots_per_taskmanager=SLOTS, waits=Waits())
        self.cluster.configure(config)
        with (self.cluster.conf_dir / "config.yaml").open("a") as conf:
            # the same for both: in-flight data bounded to about a second of throughput
            conf.write("taskmanager.network.memory.buffer-debloat.enabled: true\n")
        self.port = rest_port

    def __enter__(self) -> Cluster:
        self.cluster.start_jobmanager()
        self.cluster.wait_rest(timeout=180)
        ids = self.cluster.add_taskmanagers(TASKMANAGERS)
        self.cluster.wait_registered(ids, timeout=180)
        self.rest: FlinkRest = self.cluster.rest(timeout=30.0)
        self.jar_id = self.rest.upload_jar(self.jar.name, self.jar.read_bytes())
        return self

    def __exit__(self, *_: object) -> None:
        self.cluster.stop(progress=lambda _: None)

    @property
    def url(self) -> str:
        return self.rest.base_url

    def submit(self, settings: Settings, topic: str, group: str) -> str:
        arguments = [
            *("--max-parallelism", str(MAX_PARALLELISM)),
            *("--parallelism", str(START_PARALLELISM), "--checkpoint-interval", "2000"),
            *("--bootstrap-servers", settings.bootstrap_servers, "--topic", topic),
            *("--group", group, "--cost-us", str(COST_US), "--cost-mode", "wait"),
        ]
        jid = self.rest.run_jar(self.jar_id, arguments)
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if running(self.rest, jid)[1]:
                return jid
            time.sleep(1)
        raise RuntimeError(f"job {jid} not running within 180 s")

    def cancel(self, jid: str) -> None:
        self.rest.cancel(jid)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.rest.job(jid)["state"] in {"CANCELED", "FAILED", "FINISHED"}:
                return
            time.sleep(1)


def running(rest: FlinkRest, jid: str) -> tuple[dict[str, int], bool]:
    """Each vertex's parallelism (by name) and whether every task of the job runs."""
    job = rest.job(jid)
    vertices = job.get("vertices") or []
    shapes = {v["name"]: int(v["parallelism"]) for v in vertices}
    every = job.get("state") == "RUNNING" and all(v.get("status") == "RUNNING" for v in vertices)
    return shapes, every


def backlog(consumer: Any, topic: str, partitions: int, group_offsets: Any) -> int | None:
    """What the topic holds beyond the group's committed offsets (None: not known)."""
    from confluent_kafka import TopicPartition

    try:
        wanted = [TopicPartition(topic, p) for p in range(partitions)]
        committed = {tp.partition: tp.offset for tp in group_offsets(wanted)}
        total = 0
        for p in range(partitions):
            end = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=5)[1]
            total += end - max(committed.get(p, 0), 0)
        return total
    except Exception:  # the broker busy: a gap in the samples, not the end of the run
        return None


class Sampler(threading.Thread):
    """A sample of the run every second, until `stop`."""

    def __init__(
        self, settings: Settings, rest: FlinkRest, jid: str, *, topic: str, group: str, trace: Trace
    ) -> None:
        super().__init__(daemon=True)
        self.settings, self.rest, self.jid = settings, rest, jid
        self.topic, self.group, self.trace = topic, group, trace
        self.samples: list[Sample] = []
        self.stop = threading.Event()
        self.started = time.monotonic()

    def run(self) -> None:
        from confluent_kafka import Consumer

        from services.contracts.kafka import librdkafka_config
        from services.contracts.topics import WORKLOAD

        ends = Consumer(librdkafka_config(self.settings, **{"group.id": f"{self.group}-bench"}))
        own = Consumer(librdkafka_config(self.settings, **{"group.id": self.group}))
        try:
            while not self.stop.is_set():
                at = time.monotonic() - self.started
                try:
                    shapes, every = running(self.rest, self.jid)
                except Exception:
                    shapes, every = {}, False
                lag = backlog(
                    ends, self.topic, WORKLOAD.partitions, lambda tps: own.committed(tps, timeout=5)
                )
                rate = (
                    self.trace.rate(min(at, self.trace.duration))
                    if at <= self.trace.duration
                    else 0.0
                )
                self.samples.append(Sample(round(at, 2), rate, lag, shapes, every))
                self.stop.wait(max(0.0, 1.0 - (time.monotonic() - self.started - at)))
        finally:
            ends.close()
            own.close()


class Peer:
    """The operator's standalone autoscaler, its own JVM, its log in `log`."""

    def __init__(self, jar: Path, port: int, log: Path, shared: dict[str, str]) -> None:
        options = {
            "autoscaler.standalone.fetcher.flink-cluster.host": "127.0.0.1",
            "autoscaler.standalone.fetcher.flink-cluster.port": str(port),
            **PEER_ONLY,
            **shared,
        }
        args = [
            item for key, value in options.items() for item in (f"--{key}", value.replace(" ", ""))
        ]
        self.log = log
        self.process = subprocess.Popen(
            [
                "java",
                "-cp",
                str(jar),
                "org.apache.flink.autoscaler.standalone.StandaloneAutoscalerEntrypoint",
                *args,
            ],
            stdout=log.open("wb"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def decisions(self) -> int:
        return self.log.read_text(errors="replace").count("In-place scaling triggered")

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()


class Scalefold:
    """The bridge, the history service (--autoscaler scale) and the actuator, on `prefix`."""

    def __init__(self, settings: Settings, url: str, run_dir: Path, shared: dict[str, str]) -> None:
        from services.localstack import stack
        from services.localstack.ports import free_ports

        self.run_dir = run_dir
        self.settings = settings
        defines = [item for key, value in shared.items() for item in ("-D", f"{key}={value}")]
        (web,) = free_ports(1)
        self.processes = [
            stack.bridge_process(run_dir, url, "--signals-interval", "10"),
            stack.actuator_process(run_dir, web, "--flink-rest", f"{stack.LOCAL_FLINK}={url}"),
            stack.history_process(
                run_dir,
                *("--no-commands", "--autoscaler", "scale", *defines),
                *("--no-sql-endpoint", "--rest-port", "-1"),
            ),
        ]
        for process in self.processes:
            stack.start(process, settings)
        for process in self.processes:
            stack.wait_ready(process)

    def recorded(self) -> list[dict[str, Any]]:
        """Every step the history's autoscaler recorded (`scaling_decisions`), in order."""
        from services.history.decisions import TABLE
        from services.history.lake import Lake

        lake = Lake(self.run_dir / "history")
        if not lake.committed(TABLE):
            return []
        return lake.rows("SELECT * FROM d ORDER BY decided_at_ms", {"d": TABLE})

    def decisions(self) -> int:
        return sum(1 for row in self.recorded() if row["outcome"] == "SENT")

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.stop()


class Tail:
    """The sampling after a trace: `--tail` seconds; with `--settle`, until every run of
    the trace (both, with `--together`) has run at the floor for HOLD_S, at most `--tail`
    seconds. With `--together` the runs stop within a second of each other, so each run's
    slot-seconds cover the same span."""

    def __init__(self, runs: int, *, settle: bool, most_s: float) -> None:
        self.settle, self.most_s = settle, most_s
        self.settled = [threading.Event() for _ in range(runs)]

    def wait(self, run: int, sampler: Sampler, after_s: float) -> None:
        end = time.monotonic() + self.most_s
        while time.monotonic() < end:
            if self.settle:
                samples = list(sampler.samples)
                since = settled_at(samples, after_s)
                if since is not None and samples[-1].at_s - since >= HOLD_S:
                    self.settled[run].set()
                if all(e.is_set() for e in self.settled):
                    return
            time.sleep(1.0)


def shared(args: argparse.Namespace) -> dict[str, str]:
    """SETTINGS with the run's `--set` overrides: what both autoscalers get."""
    return SETTINGS | dict(args.set)


def setting(text: str) -> tuple[str, str]:
    """`--set`'s `KEY=VALUE`, KEY one of SETTINGS' or DEFAULTS_APART (the operator's keys)."""
    key, equals, value = text.partition("=")
    keys = [*SETTINGS, *DEFAULTS_APART]
    if not equals or key not in keys:
        raise argparse.ArgumentTypeError(f"{text!r}: KEY=VALUE, KEY one of {', '.join(keys)}")
    return key, value


def one_run(
    base: Settings,
    cluster: Cluster,
    name: str,
    trace: Trace,
    *,
    controller: str,
    args: argparse.Namespace,
    tail: Tail,
    run: int = 0,
) -> Result:
    from dataclasses import replace

    from services.contracts.kafka import ensure_topics
    from services.contracts.topics import WORKLOAD
    from services.tools.load import run as produce

    tag = f"{name}-{controller}-{int(time.time())}"
    settings = replace(base, topic_prefix=f"bench-{tag}-")
    topic, group = settings.topics.workload, settings.topics.own("workload")
    ensure_topics(settings, {topic: WORKLOAD, **settings.topics.all()})
    run_dir = OUT / tag
    run_dir.mkdir(parents=True, exist_ok=True)
    jid = cluster.submit(settings, topic, group)
    say(f"{tag}: job {jid} running at {START_PARALLELISM}")
    started: Peer | Scalefold
    if controller == "peer":
        started = Peer(args.peer_jar, cluster.port, run_dir / "peer.log", shared(args))
    else:
        started = Scalefold(settings, cluster.url, run_dir, shared(args))
    sampler = Sampler(settings, cluster.rest, jid, topic=topic, group=group, trace=trace)
    sampler.start()
    wall_start_ms = int(time.time() * 1000)
    try:
        sent = produce(
            settings,
            trace,
            topic,
            args.keys,
            lambda line: say(f"{tag}: {line}"),
            size=args.size,
            every_s=60,
        )
        more = "until both settle, at most " if args.settle else ""
        say(f"{tag}: {sent} records produced; {more}{args.tail:.0f} s more")
        tail.wait(run, sampler, trace.duration)
    finally:
        sampler.stop.set()
        sampler.join(10)
        decisions = started.decisions()
        steps = started.recorded() if isinstance(started, Scalefold) else []
        rescales = cluster.rest.rescale_history(jid)
        completed = [r for r in rescales if r.get("terminalState") == "COMPLETED"]
        down_ms = sum(
            downtime_ms(cluster.rest.rescale_details(jid, r["rescaleUuid"]))
            for r in completed
            if r.get("triggerCause") != "INITIAL_SCHEDULE"
        )
        started.stop()
        cluster.cancel(jid)
    result = summarize(
        name,
        controller,
        trace,
        sampler.samples,
        decisions=decisions,
        limit=args.caught_up,
        downtime=down_ms / 1000,
    )
    # Flink's own count: a sample taken mid-restart may show a vertex's parallelism of
    # neither side (burst, 2026-12-05: Work 4, 2, 8), which the samples' count takes for two
    result.rescales = sum(1 for r in completed if r.get("triggerCause") != "INITIAL_SCHEDULE")
    result.story = story(steps, rescales, wall_start_ms)
    say(
        f"{tag}: {result.rescales} rescales, {result.downtime_s:.0f} s down, backlog p99 "
        f"{result.backlog_p99:.0f}, {result.slot_seconds:.0f} slot-s, {decisions} decisions"
    )
    return result


def together(
    base: Settings,
    clusters: list[Cluster],
    name: str,
    trace: Trace,
    *,
    controllers: list[str],
    args: argparse.Namespace,
) -> list[Result]:
    """One run a controller, each on its own cluster, at the same time: the machine's
    load is the same for both (a busy minute falls on both runs, not on one)."""
    from concurrent.futures import ThreadPoolExecutor

    tail = Tail(len(controllers), settle=args.settle, most_s=args.tail)
    with ThreadPoolExecutor(len(controllers)) as pool:
        runs = [
            pool.submit(
                one_run, base, cluster, name, trace, controller=c, args=args, tail=tail, run=i
            )
            for i, (cluster, c) in enumerate(zip(clusters, controllers, strict=True))
        ]
        return [run.result() for run in runs]


def story(steps: list[dict[str, Any]], rescales: list[dict[str, Any]], start_ms: int) -> list[str]:
    """A line a recorded step that was not a hold, and one a rescale of Flink's, by time
    since the load began."""
    lines: list[tuple[float, str]] = []
    for row in steps:
        if row["outcome"] == "KEPT":
            continue
        cost = (
            ""
            if row["restart_ms"] is None
            else f", a rescale costs {row['restart_ms'] / 1000:.0f} s"
        )
        backlog = "" if row["backlog"] is None else f", backlog {row['backlog']:.0f}"
        rate = "" if row["input_rate"] is None else f"input {row['input_rate']:.0f}/s"
        foresight = f"; the core foresees: {row['forecast']}" if row["forecast"] else ""
        lines.append(
            (
                (row["decided_at_ms"] - start_ms) / 1000,
                f"scalefold {row['outcome']}: {row['reason']} ({rate}{backlog}{cost}){foresight}",
            )
        )
    for r in rescales:
        after = {
            v.get("jobVertexName") or k: v.get("postRescaleParallelism")
            for k, v in (r.get("vertices") or {}).items()
        }
        shown = ", ".join(f"{name} {p}" for name, p in after.items())
        lines.append(
            (
                (r["startTimestampInMillis"] - start_ms) / 1000,
                f"Flink {r['triggerCause']} rescale, {r['terminalState'] or 'in progress'}"
                + (f": {shown}" if shown else ""),
            )
        )
    return [f"{at:6.0f} s  {line}" for at, line in sorted(lines)]


def table(results: list[Result]) -> list[str]:
    lines = [
        "| trace | autoscaler | rescales | downtime s | backlog p50 | p99 | max | catch-up s after each rise | slot-s | decisions/h | at 1 from s |",
        "|---|---|---:|---:|---:|---:|---:|---|---:|---:|---:|",
    ]
    for r in results:
        catch = ", ".join("never" if c is None else f"{c:.0f}" for c in r.catch_up_s)
        lines.append(
            f"| {r.trace} | {r.controller} | {r.rescales} | {r.downtime_s:.1f} | {r.backlog_p50:.0f} "
            f"| {r.backlog_p99:.0f} | {r.backlog_max:.0f} | {catch} | {r.slot_seconds:.0f} "
            f"| {r.decisions_per_hour:.0f} | {'-' if r.settled_s is None else f'{r.settled_s:.0f}'} |"
        )
    return lines


def picture(results: list[Result], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = list(dict.fromkeys(r.trace for r in results))
    controllers = ["peer", "scalefold"]
    fig, axes = plt.subplots(
        2, len(traces), figsize=(5 * len(traces), 6), squeeze=False, sharex="col"
    )
    for col, name in enumerate(traces):
        # one backlog scale a column: the two rows compare at a glance
        top = max(
            (s.backlog or 0 for r in results if r.trace == name for s in r.samples), default=0
        )
        for row, controller in enumerate(controllers):
            ax = axes[row][col]
            found = [r for r in results if r.trace == name and r.controller == controller]
            if not found:
                continue
            samples = found[0].samples
            t = [s.at_s for s in samples]
            ax.plot(
                t, [s.backlog or 0 for s in samples], color="tab:red", label="backlog (records)"
            )
            ax.set_title(
                f"{name}: {'the operator' if controller == 'peer' else 'scalefold'}", fontsize=9
            )
            ax.set_ylabel("backlog", color="tab:red", fontsize=8)
            ax.set_ylim(0, max(top, 1) * 1.05)
            twin = ax.twinx()
            twin.step(
                t,
                [max(s.parallelism.values(), default=0) for s in samples],
                where="post",
                color="tab:blue",
                label="parallelism (Work)",
            )
            twin.plot(
                t,
                [s.rate / (1_000_000 / COST_US) for s in samples],
                color="tab:gray",
                linestyle=":",
                label="load / a subtask's capacity",
            )
            twin.set_ylim(0, MAX_PARALLELISM + 1)
            twin.set_ylabel("parallelism", color="tab:blue", fontsize=8)
            if row == len(controllers) - 1:
                ax.set_xlabel("seconds")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--traces", default="steps,burst,sine", help="load.py's shapes, comma-separated"
    )
    parser.add_argument(
        "--controllers", default="peer,scalefold", help="who scales: peer, scalefold or both"
    )
    parser.add_argument("--peak", type=float, default=1_200.0, help="records a second at the peak")
    parser.add_argument("--duration", type=float, default=420.0, help="seconds a trace lasts")
    parser.add_argument(
        "--tail",
        type=float,
        default=60.0,
        help="seconds sampled after the trace (it drains); with --settle, at most this",
    )
    parser.add_argument(
        "--settle",
        action="store_true",
        help=f"sample after the trace until every vertex has run at 1 for {HOLD_S:.0f} s "
        "(both runs of a trace, with --together: their slot-seconds then cover one span)",
    )
    parser.add_argument(
        "--together",
        action="store_true",
        help="a Flink cluster each controller, both runs of a trace at the same time",
    )
    parser.add_argument("--size", type=int, default=256, help="bytes a record")
    parser.add_argument(
        "--set",
        type=setting,
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a shared setting other than SETTINGS' (both autoscalers get it), e.g. "
        "job.autoscaler.utilization.target=0.5, or job.autoscaler.scale-down.max-factor "
        "(each keeps its own default otherwise: the operator's 0.6, scalefold's 1)",
    )
    parser.add_argument(
        "--keys",
        type=int,
        default=KEYS,
        help="the load's keys: 64 leave Work's busiest subtask 15 at 8, a ceiling of about "
        "1,070 records a second (python -m bench.key_skew)",
    )
    parser.add_argument(
        "--caught-up",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="caught up: a backlog of at most this many seconds of the current rate",
    )
    parser.add_argument(
        "--peer-jar", type=Path, default=PEER_JAR, help="the operator's standalone autoscaler"
    )
    parser.add_argument(
        "--picture", type=Path, default=PROJECT_ROOT / "docs" / "autoscaling-bench.png"
    )
    parser.add_argument("--json", type=Path, default=OUT / "results.json")
    parser.add_argument(
        "--story", action="store_true", help="print each run's decisions and Flink's rescales"
    )
    args = parser.parse_args(argv)
    if "SCALEFOLD_BOOTSTRAP_SERVERS" not in os.environ:
        print("run under `scalefold local run -- ...` (needs a broker)", file=sys.stderr)
        return 2
    if not args.peer_jar.exists() and "peer" in args.controllers:
        print(f"no peer at {args.peer_jar}", file=sys.stderr)
        return 2
    base = Settings.from_env(os.environ)
    results: list[Result] = []
    OUT.mkdir(parents=True, exist_ok=True)
    controllers = args.controllers.split(",")
    with ExitStack() as stack:
        # --together: a cluster each, the same configuration, the runs of a trace at once
        clusters = [
            stack.enter_context(Cluster(OUT / (f"flink-{c}" if args.together else "flink")))
            for c in (controllers if args.together else controllers[:1])
        ]
        for cluster in clusters:
            say(f"Flink at {cluster.url}: {TASKMANAGERS} TaskManagers of {SLOTS} slots")
        for name in args.traces.split(","):
            trace = shape(name, args.peak, args.duration)
            if args.together:
                results += together(base, clusters, name, trace, controllers=controllers, args=args)
            else:
                for controller in controllers:
                    tail = Tail(1, settle=args.settle, most_s=args.tail)
                    results.append(
                        one_run(
                            base,
                            clusters[0],
                            name,
                            trace,
                            controller=controller,
                            args=args,
                            tail=tail,
                        )
                    )
            args.json.write_text(json.dumps([asdict(r) for r in results]))
    for result in results:
        if args.story and result.story:
            print(f"{result.trace}, {result.controller}:")
            print("\n".join(result.story) + "\n")
    print("\n".join(table(results)))
    picture(results, args.picture)
    say(f"picture: {args.picture}; samples: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
