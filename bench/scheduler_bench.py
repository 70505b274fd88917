"""Benchmark of the scheduler service (not a test), against the real broker.

    .venv/bin/scalefold local run --run-dir .run/bench -- .venv/bin/python -m bench.scheduler_bench

1. Throughput: N Avro input events over many jobs are produced first; one
   worker is started and timed from its first consumed event to its last
   (read from its /metrics), median of --repeat runs.
2. Latency: with zero timeouts (cooldown, stabilizations 0), events that each
   cause a rescale are produced at a steady rate while a consumer reads the
   rescales topic; latency = when the record was consumable minus when its
   event was produced (both wall clock, ms). p50 and p99.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer

from bench.core_bench import workload
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts import jobconfig as c
from services.contracts.events import (
    Event,
    JobSubmitted,
    TaskManagerRegistered,
    VertexSpec,
    to_record,
)
from services.contracts.kafka import ensure_topics, librdkafka_config, producer_config
from tests.integration.scheduler_support import SchedulerProcess

ZERO = {
    c.COOLDOWN: "0 ms",
    c.EXECUTING_STABILIZATION: "0 ms",
    c.SUBMISSION_STABILIZATION: "0 ms",
}


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


def throughput(base: Settings, codec: Codec, events: int, jobs: int) -> float:
    settings = fresh(base)
    produce_all(settings, codec, workload(jobs, events))
    with tempfile.TemporaryDirectory() as data:
        worker = SchedulerProcess(settings, Path(data)).start()
        try:
            worker.wait_ready()
            first = last = None
            seen = 0.0
            deadline = time.monotonic() + 600
            while seen < events and time.monotonic() < deadline:
                seen = worker.metrics().get("scalefold_scheduler_events_in_total", 0)
                now = time.monotonic()
                if seen and first is None:
                    first = now
                last = now
                time.sleep(0.05)
            assert first is not None and last is not None and seen >= events, f"stalled at {seen}"
            return events / max(last - first, 1e-3)
        finally:
            worker.stop()


def latency(base: Settings, codec: Codec, rate: int, seconds: int) -> list[float]:
    settings = fresh(base)
    jobs = 50
    vertices = (VertexSpec("source", "Source", "g", "g", 1000, None),)
    defaults = tuple(sorted(ZERO.items()))
    start = int(time.time() * 1000)
    setup: list[Event] = [
        JobSubmitted(f"lat-{j}", start, "lat", vertices, None, defaults) for j in range(jobs)
    ]
    setup += [TaskManagerRegistered(f"lat-{j}", start, "tm-0", 1, None) for j in range(jobs)]
    produce_all(settings, codec, setup)
    produced: dict[tuple[str, int], float] = {}
    latencies: list[float] = []
    stop = threading.Event()

    def consume() -> None:
        consumer = Consumer(
            librdkafka_config(
                settings,
                **{
                    "group.id": f"lat-{uuid.uuid4().hex}",
                    "auto.offset.reset": "earliest",
                    "fetch.wait.max.ms": 10,
                },
            )
        )
        consumer.subscribe([settings.topics.rescales])
        while not stop.is_set():
            message = consumer.poll(0.1)
            if message is None or message.error():
                continue
            record = codec.decode(message.value() or b"").record
            sent = produced.get((record["jobId"], record["updatedAtMillis"]))
            if sent is not None and record["revision"] == 1:
                latencies.append((time.time() - sent) * 1000)
        consumer.close()

    with tempfile.TemporaryDirectory() as data:
        worker = SchedulerProcess(
            settings, Path(data), *[f"-D{k}={v}" for k, v in ZERO.items()]
        ).start()
        reader = threading.Thread(target=consume, daemon=True)
        try:
            worker.wait_ready()
            reader.start()
            time.sleep(3)  # let the consumer join its group
            producer = Producer(producer_config(settings))
            for i in range(rate * seconds):
                job = f"lat-{i % jobs}"
                ts = (
                    int(time.time() * 1000) + i
                )  # unique per event: matches the record's updatedAtMillis
                # each new single-slot TaskManager raises the job's parallelism by one, at once
                event = TaskManagerRegistered(job, ts, f"tm-{i // jobs + 1}", 1, None)
                produced[(job, ts)] = time.time()
                producer.produce(
                    settings.topics.job_events,
                    key=job.encode(),
                    value=codec.encode(*to_record(event)),
                )
                producer.poll(0)
                time.sleep(1 / rate)
            producer.flush(30)
            time.sleep(5)
        finally:
            stop.set()
            reader.join(10)
            worker.stop()
    return latencies


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rate", type=int, default=200, help="events/s for the latency run")
    parser.add_argument("--seconds", type=int, default=20)
    args = parser.parse_args()
    base = Settings(bootstrap_servers=os.environ["SCALEFOLD_BOOTSTRAP_SERVERS"])
    codec = Codec(SchemaRegistry.load())

    rates = []
    for run in range(args.repeat):
        rates.append(throughput(base, codec, args.events, args.jobs))
        print(f"  throughput run {run + 1}: {rates[-1]:,.0f} events/s", flush=True)
    lat = sorted(latency(base, codec, args.rate, args.seconds))
    p50 = statistics.median(lat)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    print("\n| measure | value |\n|---|---|")
    print(
        f"| input events/s, one worker, {args.events:,} events over {args.jobs:,} jobs (median of {args.repeat}) | {statistics.median(rates):,.0f} (min {min(rates):,.0f}, max {max(rates):,.0f}) |"
    )
    print(
        f"| produce -> rescale record consumable, {args.rate} events/s, zero timeouts: p50 | {p50:,.1f} ms |"
    )
    print(f"| same, p99 ({len(lat):,} records) | {p99:,.1f} ms |")


if __name__ == "__main__":
    main()
