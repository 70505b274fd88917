"""Benchmark of the scheduler service (not a test), against the real broker.

    .venv/bin/scalefold local run --run-dir .run/bench -- .venv/bin/python -m bench.scheduler_bench --json

1. Throughput: N Avro input events over many jobs are produced first; one
   worker is started and timed from its first consumed batch to its last
   event (read from its /metrics), median of --repeat runs. On the same topic
   and data, in the same repeat, two ceilings: a bare Faust agent
   (`bench.faust_ceiling`: the service's own Faust app settings and batches,
   doing nothing with the raw bytes) and a bare confluent-kafka consume +
   Avro decode through the project's `Codec`. The ratio of the service to the
   bare Faust agent is the headline figure: absolute rates here move ±30 %.
2. Latency: with zero timeouts (cooldown, stabilizations 0), events that each
   cause a rescale are produced at a steady rate while a consumer reads the
   rescales topic; latency = when the record was consumable minus when its
   event was produced (both wall clock, ms). p50 and p99, and the p99 of the
   events sent after the first second (each job's first rescale, a cold worker).
3. With --workers N instead: N workers in one consumer group beside one
   worker, each on a fresh topic, started before the events are produced (so
   no rebalance falls inside the timed span); the ratio of their aggregate rate
   to the one worker's is the figure.
4. With --scaling 1,1000,... instead: per job count one worker drains its own
   topic, takes a latency run while holding every job, and reports its RSS and
   the stored state per job, beside the bare Faust agent on the same topic.
5. With --restart STORE instead: kill -9 -> /health ready again.

The workload is the core bench's, dated a day ahead (see `workload`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from bench import core_bench
from bench.proc import memory_mib
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts import jobconfig as c
from services.contracts import records as r
from services.contracts.events import (
    Event,
    JobSubmitted,
    TaskManagerRegistered,
    VertexSpec,
    to_record,
)
from services.contracts.kafka import ensure_topics, librdkafka_config, producer_config
from services.localstack.ports import free_port

# The workers are processes of this environment and source tree: they run the core this
# process would (compiled when `make core` has built it; services/scheduler/core/native.py).
from services.scheduler.core import MODE as CORE_MODE
from tests.integration.scheduler_support import ROOT, SchedulerProcess

EVENTS_IN = "scalefold_scheduler_events_in_total"
DAY_MS = 86_400_000

ZERO = {
    c.COOLDOWN: "0 ms",
    c.EXECUTING_STABILIZATION: "0 ms",
    c.SUBMISSION_STABILIZATION: "0 ms",
}


def workload(jobs: int, events: int) -> list[Event]:
    """The core bench's workload dated a day ahead of the wall clock.

    The service fires a job's timers once the wall clock passes them; dated at the
    epoch, as in the core bench, every timer of every job would be overdue, and the
    worker would write and fold a `TimerFired` for each job after each batch: messages
    that are not the workload's, counted as its events, and, at 10,000 jobs and more,
    a flood that delayed the latency run's rescales by seconds. A day ahead, a timer
    runs as the core runs it, when a later event of its job passes it."""
    return core_bench.workload(jobs, events, start_ms=int(time.time() * 1000) + DAY_MS)


def fresh(base: Settings) -> Settings:
    settings = base.with_overrides(topic_prefix=f"bench{uuid.uuid4().hex[:8]}.")
    ensure_topics(settings, settings.topics.all())
    return settings


def produce_all(settings: Settings, codec: Codec, events: list) -> None:  # type: ignore[type-arg]
    producer = Producer(producer_config(settings, **{"linger.ms": 20}))
    for event in events:
        producer.produce(
            settings.topics.job_events,
            key=event.job_id.encode(),
            value=codec.encode(*to_record(event)),
        )
        producer.poll(0)
    producer.flush(60)


def metrics_of(worker: SchedulerProcess) -> dict[str, float]:
    """The worker's /metrics; a busy worker may answer late: ask again."""
    deadline = time.monotonic() + 120
    while True:
        try:
            return worker.metrics()
        except OSError:
            if time.monotonic() > deadline:
                raise


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used (all its threads)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def service_rate(settings: Settings, events: int) -> tuple[float, float]:
    """Input events/s of one scheduler worker over the topic's `events` messages,
    and the CPU microseconds it spent per event."""
    with tempfile.TemporaryDirectory() as data:
        worker = SchedulerProcess(settings, Path(data)).start()
        try:
            worker.wait_ready()
            return drain([worker], events)
        finally:
            worker.stop()


def drain(
    workers: list[SchedulerProcess], events: int, timeout: float = 1200
) -> tuple[float, float]:
    """Input events/s of ready workers until they have taken `events` in all, timed from
    their first consumed batch, and the CPU microseconds they spent per event (all
    their processes together)."""
    pids = [w.process.pid for w in workers if w.process is not None]
    first = last = None
    start_count = seen = cpu_first = cpu_last = 0.0
    deadline = time.monotonic() + timeout
    while seen < events and time.monotonic() < deadline:
        seen = sum(metrics_of(w).get(EVENTS_IN, 0) for w in workers)
        now, cpu_last = time.monotonic(), sum(cpu_seconds(pid) for pid in pids)
        if seen and first is None:
            first, start_count, cpu_first = now, seen, cpu_last  # the first batch marks the start
        last = now
        time.sleep(0.05)
    assert first is not None and last is not None, "no event consumed"
    assert seen >= events, f"stalled at {seen}"
    counted = events - start_count
    assert counted > 0, f"all {events} events came in the first batch: too few to time"
    return counted / max(last - first, 1e-3), (cpu_last - cpu_first) / counted * 1e6


def stored_state_bytes(settings: Settings, skip_prefix: str) -> list[int]:
    """The size of each job's stored state: the latest record per key of the jobs
    table's changelog (what a worker restores), sorted; jobs whose id starts with
    `skip_prefix` left out."""
    topic = f"{settings.topics.own('scheduler')}-jobs-changelog"
    consumer = Consumer(
        librdkafka_config(
            settings, **{"group.id": f"state-{uuid.uuid4().hex}", "enable.auto.commit": False}
        )
    )
    try:
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1] for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        sizes: dict[bytes, int] = {}
        left = {p for p, end in ends.items() if end > 0}
        deadline = time.monotonic() + 600
        while left and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error() is not None:
                    continue
                key, value = message.key() or b"", message.value()
                if key.startswith(skip_prefix.encode()):  # the table's keys are raw UTF-8
                    pass
                elif value is None:
                    sizes.pop(key, None)
                else:
                    sizes[key] = len(value)
                partition, offset = message.partition() or 0, message.offset() or 0
                if offset + 1 >= ends[partition]:
                    left.discard(partition)
        return sorted(sizes.values())
    finally:
        consumer.close()


def workers_rate(
    base: Settings,
    codec: Codec,
    events: list[Event],
    count: int,
) -> tuple[float, float]:
    """Input events/s of `count` scheduler workers in one consumer group (the
    topic's partitions split between them), and their CPU microseconds per event
    (all processes together). The workers are started on an empty topic and the
    events produced once every worker reports ready with its share of the
    partitions, so no rebalance falls inside the timed span; timed from the
    first consumed batch to the last event."""
    settings = fresh(base)
    with tempfile.TemporaryDirectory() as data, _group(settings, Path(data), count) as workers:
        producer = threading.Thread(target=produce_all, args=(settings, codec, events))
        producer.start()
        measured = drain(workers, len(events), timeout=600)
        producer.join()
        return measured


@contextlib.contextmanager
def _group(
    settings: Settings, data: Path, count: int, *extra: str
) -> Iterator[list[SchedulerProcess]]:
    """`count` workers in one consumer group, each on a data directory of its own under
    `data`, all ready; stopped when the block ends."""
    workers = [SchedulerProcess(settings, data / f"worker-{n}", *extra) for n in range(count)]
    try:
        for worker in workers:
            worker.start()
        _wait_all_ready(workers)
        yield workers
    finally:
        for worker in workers:
            worker.stop()


def _wait_all_ready(workers: list[SchedulerProcess], timeout: float = 180) -> None:
    """Until every worker reports ready at once (a joining worker makes the
    others rebalance: they report starting until their recovery completes)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for worker in workers:
            worker.wait_ready(max(1.0, deadline - time.monotonic()))
        time.sleep(1)  # a rebalance may just be starting
        if all(_is_ready(w) for w in workers):
            return
    raise AssertionError("the workers did not all become ready")


def _is_ready(worker: SchedulerProcess) -> bool:
    try:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{worker.port}/health", timeout=2
        ) as response:
            return bool(json.load(response)["status"] == "ready")
    except OSError:  # 503 while starting, or busy
        return False


def faust_rate(settings: Settings, events: int, stock: bool = False) -> tuple[float, float]:
    """Messages/s of a bare Faust agent (`bench.faust_ceiling`) over the same topic,
    and its CPU microseconds per message; `stock`: plain faust.App."""
    with tempfile.TemporaryDirectory() as data:
        out = Path(data) / "result.json"
        command = [
            sys.executable,
            "-m",
            "bench.faust_ceiling",
            "--topic-prefix",
            settings.topic_prefix,
            "--app-id",
            f"{settings.topic_prefix}bare-{uuid.uuid4().hex[:6]}",
            "--events",
            str(events),
            "--web-port",
            str(free_port()),
            "--out",
            str(out),
            *(["--stock"] if stock else []),
        ]
        env = {**os.environ, "SCALEFOLD_BOOTSTRAP_SERVERS": settings.bootstrap_servers}
        with (Path(data) / "faust.log").open("wb") as log:
            process = subprocess.Popen(command, env=env, cwd=ROOT, stdout=log, stderr=log)
            try:
                process.wait(600)
            finally:
                if process.poll() is None:
                    process.kill()
                    process.wait(10)
        if not out.exists():
            tail = (Path(data) / "faust.log").read_text(errors="replace")[-3000:]
            raise AssertionError(f"the bare Faust agent did not finish:\n{tail}")
        result = json.loads(out.read_text())
        counted = float(result["events"])
        return counted / max(float(result["seconds"]), 1e-3), result["cpu_seconds"] / counted * 1e6


def confluent_rate(settings: Settings, codec: Codec, events: int) -> tuple[float, float]:
    """Messages/s of a bare confluent-kafka consume + Avro decode of the same topic,
    and the CPU microseconds per message (this process, librdkafka's threads included)."""
    consumer = Consumer(
        librdkafka_config(
            settings,
            **{
                "group.id": f"bare-{uuid.uuid4().hex}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            },
        )
    )
    topic = settings.topics.job_events
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
    seen, first, start_count, cpu = 0, 0.0, 0, 0.0
    deadline = time.monotonic() + 600
    try:
        while seen < events and time.monotonic() < deadline:
            batch = consumer.consume(500, 0.5)
            for message in batch:
                if message.error() is None:
                    codec.decode(message.value() or b"", expected=r.INPUT_EVENTS)
                    seen += 1
            if seen and not first:
                first, start_count = time.monotonic(), seen  # the first batch marks the start
                cpu = time.process_time()
        assert seen >= events, f"stalled at {seen}"
        counted = events - start_count
        elapsed = time.monotonic() - first
        return counted / max(elapsed, 1e-3), (time.process_time() - cpu) / counted * 1e6
    finally:
        consumer.close()


def restart(base: Settings, codec: Codec, events: int, jobs: int, store: str) -> dict[str, float]:
    """kill -9 -> ready again: one worker folds the whole topic, is killed, and a new
    worker on the same data directory is timed from its start to /health ready."""
    settings = fresh(base)
    load = workload(jobs, events)  # at least 2 events per job: 20,000 jobs get 40,000
    produce_all(settings, codec, load)
    with tempfile.TemporaryDirectory() as data:
        worker = SchedulerProcess(settings, Path(data), "--store", store).start()
        try:
            worker.wait_ready(300)
            deadline = time.monotonic() + 1200
            metrics: dict[str, float] = {}
            while time.monotonic() < deadline:
                metrics = metrics_of(worker)
                if metrics.get(EVENTS_IN, 0) >= len(load):
                    break
                time.sleep(0.2)
            time.sleep(2)  # the last batch's table writes
            seconds, after = killed_and_ready(worker)
        finally:
            worker.stop()
    return {
        "seconds": seconds,
        "events": len(load),
        "jobs_before": metrics.get("scalefold_scheduler_jobs", 0),
        "jobs_after": after.get("scalefold_scheduler_jobs", 0),
    }


def killed_and_ready(worker: SchedulerProcess) -> tuple[float, dict[str, float]]:
    """kill -9 `worker`, then start it again as a user restarts it (the same command: its
    data directory, options and web port); the seconds until ready, and its metrics then."""
    worker.kill()
    started = time.monotonic()
    again = SchedulerProcess(
        worker.settings, worker.data_dir, *worker.extra, port=worker.port
    ).start()
    try:
        again.wait_ready(600)
        return time.monotonic() - started, metrics_of(again)
    finally:
        again.stop()


def throughput(
    base: Settings, codec: Codec, events: int, jobs: int
) -> dict[str, tuple[float, float]]:
    """One repeat: a fresh topic with the workload; the service and the ceilings on it.
    Each mode's (events/s, CPU microseconds per event)."""
    settings = fresh(base)
    load = workload(jobs, events)
    produce_all(settings, codec, load)
    return {
        "service": service_rate(settings, len(load)),
        "ceiling-faust": faust_rate(settings, len(load)),
        "ceiling-faust-stock": faust_rate(settings, len(load), stock=True),
        "ceiling-confluent": confluent_rate(settings, codec, len(load)),
    }


def scaled(
    base: Settings, codec: Codec, jobs: int, events: int, *, rate: int, seconds: int
) -> dict[str, object]:
    """One row of the scaling table: a fresh topic with `events` over `jobs` jobs; one
    worker drains it (rate, CPU per event), then, holding every job, takes a latency
    run at `rate`; its memory, the stored state per job, and a bare Faust agent on the
    same topic for the ratio."""
    settings = fresh(base)
    load = workload(jobs, events)
    produce_all(settings, codec, load)
    with tempfile.TemporaryDirectory() as data:
        worker = SchedulerProcess(settings, Path(data)).start()
        try:
            worker.wait_ready(300)
            per_s, cpu_us = drain([worker], len(load))
            assert worker.process is not None
            rss_drained, _ = memory_mib(worker.process.pid)
            drained = metrics_of(worker)
            measured = paced_rescales(settings, codec, [worker], rate, seconds)
            rss, peak = memory_mib(worker.process.pid)
        finally:
            worker.stop()
    state = stored_state_bytes(settings, skip_prefix="lat-")
    ceiling, _ = faust_rate(settings, len(load))
    lat = sorted(measured.latencies_ms)
    return {
        "stage": "scheduler-service",
        "core": CORE_MODE,
        "mode": "scaling",
        "jobs": jobs,
        "events": len(load),
        "per_s_median": round(per_s, 1),
        "cpu_us_per_event": round(cpu_us, 1),
        "ceiling": "ceiling-faust",
        "ceiling_per_s": round(ceiling, 1),
        "ratio_to_ceiling": round(per_s / ceiling, 3),
        "jobs_in_memory": int(drained.get("scalefold_scheduler_jobs", 0)),
        "timer_events_written": int(drained.get("scalefold_scheduler_timer_ticks_total", 0)),
        "dead_letters": int(drained.get("scalefold_scheduler_dead_letters_total", 0)),
        "latency_offered_per_s": rate,
        "p50_ms": round(statistics.median(lat), 1),
        "p99_ms": round(_p99(lat), 1),
        "p99_after_warm_up_ms": round(_p99(sorted(measured.warm_ms)), 1),
        "worker_cpu_share": round(measured.worker_cpu_share, 2),
        "rss_mib_drained": round(rss_drained),
        "rss_mib": round(rss),
        "rss_mib_peak": round(peak),
        "stored_jobs": len(state),
        "state_bytes_median": state[len(state) // 2] if state else None,
        "state_bytes_p99": _p99(state) if state else None,
    }


LATENCY_JOBS = 50
"""The latency run's jobs: each of its events adds a TaskManager to one of them, so at
1,000/s for 10 s each job grows to 200 TaskManagers (a rescale lists all their slots)."""

WARM_UP_S = 1.0
"""The first second of a latency run: each job's first rescale, the worker's first batches."""


@dataclass(frozen=True)
class LatencyRun:
    latencies_ms: list[float]
    warm_ms: list[float]
    """The latencies of the events sent after the first `WARM_UP_S`."""
    produced_per_s: float
    """The rate the events actually went out at (the offered rate, if the producer kept up)."""
    worker_cpu_share: float
    """The workers' CPU seconds per second while they went out (all of them together;
    one worker near 1 was saturated)."""


def latency(  # noqa: PLR0917 (the run's parameters)
    base: Settings,
    codec: Codec,
    rate: int,
    seconds: int,
    jobs: int = LATENCY_JOBS,
    workers: int = 1,
) -> LatencyRun:
    """The latency run on a fresh topic and `workers` workers of its own, in one
    consumer group (the topic's partitions split between them), all ready before
    the first event."""
    settings = fresh(base)
    zero = [f"-D{k}={v}" for k, v in ZERO.items()]
    with (
        tempfile.TemporaryDirectory() as data,
        _group(settings, Path(data), workers, *zero) as group,
    ):
        return paced_rescales(settings, codec, group, rate, seconds, jobs)


def rescale_setup(jobs: int, start_ms: int) -> list[Event]:
    """The latency run's jobs: each submitted with zero timeouts, on one single-slot
    TaskManager."""
    vertices = (VertexSpec("source", "Source", "g", "g", 1000, None),)
    zero = tuple(sorted(ZERO.items()))
    setup: list[Event] = [
        JobSubmitted(f"lat-{j}", start_ms, "lat", vertices, None, zero) for j in range(jobs)
    ]
    return setup + [
        TaskManagerRegistered(f"lat-{j}", start_ms, "tm-0", 1, None) for j in range(jobs)
    ]


def rescale_event(i: int, jobs: int, timestamp: int) -> TaskManagerRegistered:
    """The latency run's i-th event: a new single-slot TaskManager for job i % `jobs`,
    which raises its parallelism by one at once (a rescale)."""
    return TaskManagerRegistered(f"lat-{i % jobs}", timestamp, f"tm-{i // jobs + 1}", 1, None)


def paced_rescales(  # noqa: PLR0917 (the run's parameters)
    settings: Settings,
    codec: Codec,
    workers: list[SchedulerProcess],
    rate: int,
    seconds: int,
    jobs: int = LATENCY_JOBS,
) -> LatencyRun:
    """Submit `jobs` jobs with zero timeouts (each on one TaskManager) to ready workers,
    wait until they have folded them, then offer `rate` rescales per second for `seconds`
    and time each from its produce to its rescale record being consumable."""
    setup = rescale_setup(jobs, int(time.time() * 1000))
    folded = _events_in(workers) + len(setup)
    produce_all(settings, codec, setup)
    deadline = time.monotonic() + 120
    while _events_in(workers) < folded:
        assert time.monotonic() < deadline, "the latency jobs were not folded"
        time.sleep(0.1)
    produced: dict[tuple[str, int], float] = {}
    latencies: list[float] = []
    warm: list[float] = []
    first_sent = [float("inf")]  # set before the first event goes out
    stop = threading.Event()
    consumer = Consumer(
        librdkafka_config(
            settings,
            **{"group.id": f"lat-{uuid.uuid4().hex}", "fetch.wait.max.ms": 10},
        )
    )
    topic = settings.topics.rescales
    partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
    # from each partition's end: the records of the events before are not timed
    consumer.assign(
        [
            TopicPartition(
                topic, p, consumer.get_watermark_offsets(TopicPartition(topic, p), 30)[1]
            )
            for p in partitions
        ]
    )

    def consume() -> None:
        while not stop.is_set():
            message = consumer.poll(0.1)
            if message is None or message.error():
                continue
            record = codec.decode(message.value() or b"").record
            sent = produced.get((record["jobId"], record["updatedAtMillis"]))
            if sent is not None and record["revision"] == 1:
                latencies.append((time.time() - sent) * 1000)
                if sent >= first_sent[0] + WARM_UP_S:
                    warm.append(latencies[-1])

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    pids = [w.process.pid for w in workers if w.process is not None]
    producer = connected_producer(settings)
    try:
        time.sleep(1)  # the reader's first fetch, the producer's id
        began, cpu_began = time.monotonic(), sum(cpu_seconds(pid) for pid in pids)
        first_sent[0] = time.time()
        offer(producer, settings, codec, produced, count=rate * seconds, rate=rate, jobs=jobs)
        spent = time.monotonic() - began
        cpu = sum(cpu_seconds(pid) for pid in pids) - cpu_began
        time.sleep(5)
    finally:
        stop.set()
        reader.join(10)
        consumer.close()
    return LatencyRun(latencies, warm, rate * seconds / spent, cpu / spent)


def _events_in(workers: list[SchedulerProcess]) -> float:
    return sum(metrics_of(worker).get(EVENTS_IN, 0) for worker in workers)


def connected_producer(settings: Settings) -> Any:
    """A producer already connected, as a user's long-lived one is: a new one's first
    messages wait in its queue for the broker connection and the idempotent producer
    id (hundreds of ms), which is the producer's start-up, not the service's latency."""
    producer = Producer(producer_config(settings))
    producer.list_topics(settings.topics.job_events, timeout=30)
    return producer


def offer(
    producer: Any,
    settings: Settings,
    codec: Codec,
    produced: dict[tuple[str, int], float],
    *,
    count: int,
    rate: int,
    jobs: int,
) -> None:
    """Produce `count` TaskManager registrations at `rate` per second, on schedule (the
    i-th at i/rate s, not 1/rate s after the last), noting each one's send time."""
    began = time.monotonic()
    for i in range(count):
        # unique per event: matches the record's updatedAtMillis
        event = rescale_event(i, jobs, int(time.time() * 1000) + i)
        produced[(event.job_id, event.timestamp)] = time.time()
        producer.produce(
            settings.topics.job_events,
            key=event.job_id.encode(),
            value=codec.encode(*to_record(event)),
        )
        producer.poll(0)
        ahead = began + (i + 1) / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)
    producer.flush(30)


def _p99(ordered: Sequence[float]) -> float:
    return ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def row(
    mode: str,
    jobs: int,
    events: int,
    runs: list[dict[str, tuple[float, float]]],
    ceiling: str | None,
) -> dict[str, object]:
    """A throughput row: medians over the runs, and the ratio to `ceiling`'s rate
    (the median of the per-run ratios: each run's modes read the same topic)."""
    rates = [run[mode][0] for run in runs]
    result: dict[str, object] = {
        "stage": "scheduler-service",
        "core": CORE_MODE,
        "mode": mode,
        "jobs": jobs,
        "events": events,
        "repeats": len(runs),
        "per_s_median": round(statistics.median(rates), 1),
        "per_s_min": round(min(rates), 1),
        "per_s_max": round(max(rates), 1),
        "cpu_us_per_event_median": round(statistics.median(run[mode][1] for run in runs), 1),
        "ceiling": ceiling,
        "ceiling_per_s": None,
        "ratio_to_ceiling": None,
    }
    if ceiling is not None:
        result["ceiling_per_s"] = round(statistics.median(run[ceiling][0] for run in runs), 1)
        result["ratio_to_ceiling"] = round(
            statistics.median(run[mode][0] / run[ceiling][0] for run in runs), 3
        )
        result["cpu_ratio_to_ceiling"] = round(
            statistics.median(run[ceiling][1] / run[mode][1] for run in runs), 3
        )
    return result


def _restarts(args: argparse.Namespace, base: Settings, codec: Codec) -> None:
    """kill -9 -> ready again, per --restart store."""
    for store in args.restart:
        times = [restart(base, codec, args.events, args.jobs, store) for _ in range(args.repeat)]
        result = {
            "stage": "scheduler-service",
            "core": CORE_MODE,
            "mode": "restart",
            "store": store,
            "jobs": args.jobs,
            "events": times[0]["events"],
            "repeats": len(times),
            "restart_s_median": round(statistics.median(t["seconds"] for t in times), 1),
            "restart_s_all": [round(t["seconds"], 1) for t in times],
            "jobs_before": [t["jobs_before"] for t in times],
            "jobs_after": [t["jobs_after"] for t in times],
            "per_s_median": None,
            "ceiling_per_s": None,
            "ratio_to_ceiling": None,
        }
        print(json.dumps(result), flush=True)


def _scaling(args: argparse.Namespace, base: Settings, codec: Codec) -> None:
    """The scaling table, one row per job count of --scaling."""
    for jobs in (int(n) for n in args.scaling.split(",")):
        events = max(args.events, jobs * args.events_per_job)
        result = scaled(base, codec, jobs, events, rate=args.rate, seconds=args.seconds)
        print(json.dumps(result) if args.json else _scaling_line(result), flush=True)


def _workers(args: argparse.Namespace, base: Settings, codec: Codec) -> None:
    """--workers N in one group beside one worker."""
    scaled_runs: list[dict[str, tuple[float, float]]] = []
    for run in range(args.repeat):
        load = workload(args.jobs, args.events)
        scaled_runs.append(
            {
                "service-1-worker": workers_rate(base, codec, load, 1),
                f"service-{args.workers}-workers": workers_rate(base, codec, load, args.workers),
            }
        )
        shown = ", ".join(
            f"{mode} {rate:,.0f}/s ({cpu:,.0f} us CPU/event)"
            for mode, (rate, cpu) in scaled_runs[-1].items()
        )
        print(f"  run {run + 1}: {shown}", file=sys.stderr, flush=True)
    rows = [
        row(
            f"service-{args.workers}-workers",
            args.jobs,
            args.events,
            scaled_runs,
            "service-1-worker",
        ),
        row("service-1-worker", args.jobs, args.events, scaled_runs, None),
    ]
    for each in rows:
        print(json.dumps(each), flush=True)


def _scaling_line(result: dict[str, Any]) -> str:
    return (
        "jobs {jobs:,}: {events:,} events at {per_s_median:,.0f}/s ({cpu_us_per_event:,.0f} us "
        "CPU/event, {ratio_to_ceiling:.1%} of the bare Faust agent's {ceiling_per_s:,.0f}/s); "
        "at {latency_offered_per_s}/s p50 {p50_ms} ms, p99 {p99_ms} ms; RSS {rss_mib} MiB "
        "(peak {rss_mib_peak}); state {state_bytes_median} B/job (p99 {state_bytes_p99})"
    ).format(**result)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000, help="input events per run")
    parser.add_argument("--jobs", type=int, default=1_000, help="jobs the events are spread over")
    parser.add_argument("--repeat", type=int, default=3, help="runs, each on a fresh topic")
    parser.add_argument("--rate", type=int, default=200, help="events/s for the latency run")
    parser.add_argument("--seconds", type=int, default=10, help="length of the latency run")
    parser.add_argument("--no-latency", action="store_true", help="skip the latency run")
    parser.add_argument(
        "--latency-jobs",
        type=int,
        default=LATENCY_JOBS,
        help="jobs of the latency run (each event adds a TaskManager to one: fewer jobs, "
        "larger ones)",
    )
    parser.add_argument(
        "--latency-workers",
        type=int,
        default=1,
        help="workers of the latency run, in one consumer group (default 1)",
    )
    parser.add_argument("--json", action="store_true", help="one JSON object per measured row")
    parser.add_argument(
        "--restart",
        action="append",
        metavar="STORE",
        choices=("memory://", "rocksdb://"),
        help="only measure kill -9 -> ready again with this table store (repeatable)",
    )
    parser.add_argument(
        "--scaling",
        metavar="JOBS,JOBS,...",
        help="instead: a scaling table, one worker per job count (e.g. 1,1000,10000,100000) "
        "over max(--events, jobs x --events-per-job) events, with a latency run at --rate "
        "while it holds them all, its RSS and the stored state per job",
    )
    parser.add_argument(
        "--events-per-job", type=int, default=3, help="with --scaling: the events per job at least"
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=0,
        help="instead: N workers in one group beside one worker, events produced once all are ready",
    )
    args = parser.parse_args()
    if args.latency_workers < 1:
        parser.error("--latency-workers must be at least 1")
    base = Settings(bootstrap_servers=os.environ["SCALEFOLD_BOOTSTRAP_SERVERS"])
    codec = Codec(SchemaRegistry.load())
    for chosen, measure in (
        (args.restart, _restarts),
        (args.scaling, _scaling),
        (args.workers, _workers),
    ):
        if chosen:
            measure(args, base, codec)
            return

    runs: list[dict[str, tuple[float, float]]] = []
    for run in range(args.repeat):
        runs.append(throughput(base, codec, args.events, args.jobs))
        shown = ", ".join(
            f"{mode} {rate:,.0f}/s ({cpu:,.0f} us CPU/event)"
            for mode, (rate, cpu) in runs[-1].items()
        )
        print(f"  run {run + 1}: {shown}", file=sys.stderr if args.json else sys.stdout, flush=True)
    compared = (
        ("service", "ceiling-faust"),
        ("service", "ceiling-faust-stock"),
        ("service", "ceiling-confluent"),
        ("ceiling-faust", "ceiling-confluent"),
        ("ceiling-faust-stock", "ceiling-faust"),
        ("ceiling-confluent", None),
    )
    # none with --repeat 0: the latency run alone
    rows = [row(mode, args.jobs, args.events, runs, to) for mode, to in compared if runs]
    if not args.no_latency:
        measured = latency(
            base, codec, args.rate, args.seconds, args.latency_jobs, args.latency_workers
        )
        lat = sorted(measured.latencies_ms)
        p50 = statistics.median(lat)
        p99 = _p99(lat)
        rows.append(
            {
                "stage": "scheduler-service",
                "core": CORE_MODE,
                "mode": "latency",
                "workers": args.latency_workers,
                "jobs": args.latency_jobs,
                "events": len(lat),
                "offered_per_s": args.rate,
                "produced_per_s": round(measured.produced_per_s),
                "worker_cpu_share": round(measured.worker_cpu_share, 2),
                "per_s_median": None,
                "p50_ms": round(p50, 1),
                "p99_ms": round(p99, 1),
                "p99_after_warm_up_ms": round(_p99(sorted(measured.warm_ms)), 1),
                "ceiling_per_s": None,
                "ratio_to_ceiling": None,
            }
        )
    if args.json:
        for each in rows:
            print(json.dumps(each), flush=True)
        return
    print(
        f"\n{args.events:,} events over {args.jobs:,} jobs, {args.repeat} runs (medians)\n"
        "\n| mode | events/s | min | max | CPU us/event | ceiling | ratio to ceiling "
        "(rate) | (CPU) |\n|---|---:|---:|---:|---:|---|---:|---:|"
    )
    for each in rows:
        if each["mode"] == "latency":
            print(
                f"| produce -> rescale consumable at {args.rate}/s, zero timeouts, "
                f"{each['events']:,} records (sent at {each['produced_per_s']:,}/s, "
                f"{each['workers']} worker(s), CPU {each['worker_cpu_share']:.0%} of a core) "
                f"| p50 {each['p50_ms']} ms | | p99 "
                f"{each['p99_ms']} ms ({each['p99_after_warm_up_ms']} ms after the first "
                f"{WARM_UP_S:.0f} s) | | | | |"
            )
            continue
        ratio, cpu = each["ratio_to_ceiling"], each.get("cpu_ratio_to_ceiling")
        print(
            f"| {each['mode']} | {each['per_s_median']:,.0f} | {each['per_s_min']:,.0f} "
            f"| {each['per_s_max']:,.0f} | {each['cpu_us_per_event_median']:,.0f} "
            f"| {each['ceiling'] or ''} | {'' if ratio is None else f'{ratio:.0%}'} "
            f"| {'' if cpu is None else f'{cpu:.0%}'} |"
        )


if __name__ == "__main__":
    main()
