"""Benchmark of the scheduler core (not a test): events per second through the fold,
for one job and for many jobs, and bytes of stored state per job.

    .venv/bin/python -m bench.core_bench [--events 100000] [--jobs 10000] [--repeat 5]

The workload is a realistic mix per job: a submission, TaskManagers joining and
leaving, checkpoints every 10 s, occasional failures and requirement updates.
"Fold" is `handle` alone; "fold + store" also serializes the new state after
every event, as the scheduler service does for its table's changelog (it reads
a stored state back only when it recovers). Medians
of `--repeat` runs; machines here are shared, so read the ratios.

Each row also times every step twice in one more pass, "cold" (as the service
takes it: at many jobs a job's state has left the CPU's caches by the time its
next event comes) and "warm" (the same step again at once): the difference is the
time a step waits for memory, which faster code cannot remove.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import time
from collections.abc import Iterator
from typing import Any

from services.contracts.codec import Codec
from services.contracts.events import (
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    VertexSpec,
    from_record,
    to_record,
)
from services.contracts.records import INPUT_EVENTS
from services.contracts.schemas import SchemaRegistry
from services.scheduler.core import MODE as CORE_MODE
from services.scheduler.core import handle
from services.scheduler.core.model import JobState
from services.scheduler.core.serde import dumps, loads

VERTICES = (
    VertexSpec("source", "Source: events", "default", "default", 8, None),
    VertexSpec("enrich", "Enrich", "default", "default", 8, None),
    VertexSpec("sink", "Sink", "sinks", "sinks", 4, None),
)
CONFIG = (("jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling", "20 s"),)


def job_events(job_id: str, count: int, seed: int, start_ms: int = 0) -> Iterator[Event]:
    """`count` events of one job, 1 to 10 s apart, from `start_ms`."""
    rng = random.Random(seed)
    now = start_ms
    yield JobSubmitted(job_id, now, job_id, VERTICES, 10_000, CONFIG)
    tms: list[str] = []
    for i in range(count - 1):
        now += rng.randint(1_000, 10_000)
        roll = rng.random()
        if (roll < 0.25 and len(tms) < 6) or not tms:
            tms.append(f"tm-{i}")
            yield TaskManagerRegistered(job_id, now, tms[-1], rng.choice((1, 2, 4)), None)
        elif roll < 0.35:
            yield TaskManagerLost(job_id, now, tms.pop(rng.randrange(len(tms))), "bench")
        elif roll < 0.40:
            yield JobLifecycle(job_id, now, JobEventKind.TASK_FAILURE, exception="bench failure")
        elif roll < 0.45:
            upper = rng.randint(1, 8)
            bounds = tuple(Requirement(v.id, 1, min(upper, v.parallelism)) for v in VERTICES)
            yield RequirementsUpdated(job_id, now, bounds)
        else:
            kind = (
                JobEventKind.CHECKPOINT_COMPLETED if roll < 0.95 else JobEventKind.CHECKPOINT_FAILED
            )
            yield JobLifecycle(job_id, now, kind, checkpoint_id=i)


def workload(jobs: int, events: int, start_ms: int = 0) -> list[Event]:
    """`events` in all, spread over `jobs` jobs and interleaved by time, from `start_ms`."""
    per_job = max(2, events // jobs)
    streams = [list(job_events(f"job-{j}", per_job, j, start_ms)) for j in range(jobs)]
    merged = [e for stream in streams for e in stream]
    merged.sort(key=lambda e: (e.timestamp, e.job_id))
    return merged


def run(events: list[Event], store: bool) -> tuple[float, float, float, dict[str, JobState | None]]:
    """(events per second, per CPU second, p99 ms of one `handle` (+ store), the final jobs)."""
    jobs: dict[str, JobState | None] = {}
    changelog: dict[str, bytes] = {}
    latencies = [0] * len(events)
    clock = time.perf_counter_ns
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    for i, event in enumerate(events):
        began = clock()
        step = handle(jobs.get(event.job_id), event)
        jobs[event.job_id] = step.job
        if store and step.job is not None:
            changelog[event.job_id] = dumps(step.job)
        latencies[i] = clock() - began
    rate = len(events) / (time.perf_counter() - start)
    cpu_rate = len(events) / (time.process_time() - cpu)
    for job_id, data in changelog.items():  # what was stored is what recovery reads back
        assert loads(data) == jobs[job_id]
    latencies.sort()
    p99_ms = latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] / 1e6
    return rate, cpu_rate, p99_ms, jobs


def cold_and_warm(events: list[Event], store: bool) -> tuple[float, float]:
    """Mean µs per event of each step taken twice in a row: first as `run` takes it (at
    many jobs the job's state is cold in the CPU's caches when its event comes), then
    again at once, the state just read (warm). Both run the same code on the same
    objects (`handle` is pure), so the difference is the wait for memory. Neither
    counts freeing the state a step replaces, which `run`'s rate includes."""
    jobs: dict[str, JobState | None] = {}
    clock = time.perf_counter_ns
    cold = warm = 0
    gc.collect()
    for event in events:
        before = jobs.get(event.job_id)
        began = clock()
        step = handle(before, event)
        if store and step.job is not None:
            dumps(step.job)
        between = clock()
        step = handle(before, event)
        if store and step.job is not None:
            dumps(step.job)
        cold += between - began
        warm += clock() - between
        jobs[event.job_id] = step.job
    return cold / len(events) / 1e3, warm / len(events) / 1e3


def encoded(events: list[Event]) -> list[bytes]:
    """The events as the scheduler service receives them: Avro single-object records."""
    codec = Codec(SchemaRegistry.load())
    return [codec.encode(*to_record(event)) for event in events]


def bare_decode(data: list[bytes]) -> tuple[float, float]:
    """The ceiling: events per second (and per CPU second) of decoding the same events
    (Avro bytes -> Event, as the service does), without folding them."""
    codec = Codec(SchemaRegistry.load())
    gc.collect()
    start, cpu = time.perf_counter(), time.process_time()
    decode_all(codec, data)
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu
    return len(data) / wall, len(data) / cpu


def decode_all(codec: Codec, data: list[bytes]) -> None:
    """Decode every record into its event, as the service does."""
    for value in data:
        decoded = codec.decode(value, expected=INPUT_EVENTS)
        from_record(decoded.schema, decoded.record)


def rss_mb() -> float:
    """This process's resident set now (Linux), in MiB."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def measure(
    jobs: int, events: list[Event], repeat: int, as_json: bool, modes: tuple[bool, ...]
) -> list[dict[str, Any]]:
    """The fold and fold + store rows of one workload, beside its bare-decode ceiling."""
    data = encoded(events)
    ceilings: list[float] = []
    cpu_ceilings: list[float] = []
    rows: list[dict[str, Any]] = []
    for store in modes:
        rates, cpu_rates, p99s = [], [], []
        for attempt in range(repeat):
            ceiling, cpu_ceiling = bare_decode(data)
            ceilings.append(ceiling)
            cpu_ceilings.append(cpu_ceiling)
            rate, cpu_rate, p99_ms, final = run(events, store)
            rates.append(rate)
            cpu_rates.append(cpu_rate)
            p99s.append(p99_ms)
            if not as_json:
                print(
                    f"  {jobs} job(s), store={store}, run {attempt + 1}: {rate:,.0f} events/s",
                    flush=True,
                )
        sizes = sorted(len(dumps(j)) for j in final.values() if j is not None)
        cold_us, warm_us = cold_and_warm(events, store)
        rows.append(
            {
                "stage": "core",
                "core": CORE_MODE,
                "mode": "fold+store" if store else "fold",
                "jobs": jobs,
                "events": len(events),
                "per_s_median": round(statistics.median(rates)),
                "per_s_min": round(min(rates)),
                "per_s_max": round(max(rates)),
                "per_cpu_s_median": round(statistics.median(cpu_rates)),
                "p99_ms": round(statistics.median(p99s), 3),
                "state_bytes_per_job_median": round(statistics.median(sizes)),
                "state_bytes_per_job_p99": sizes[min(len(sizes) - 1, int(len(sizes) * 0.99))],
                "rss_mb": round(rss_mb()),
                "step_cold_us": round(cold_us, 2),
                "step_warm_us": round(warm_us, 2),
            }
        )
    ceiling, cpu_ceiling = statistics.median(ceilings), statistics.median(cpu_ceilings)
    for row in rows:
        row["ceiling"] = "bare Avro decode of the same events (codec.decode + from_record)"
        row["ceiling_per_s"] = round(ceiling)
        row["ceiling_per_cpu_s"] = round(cpu_ceiling)
        # On CPU seconds: the machines are shared, and wall-clock rates move with the load.
        row["ratio_to_ceiling"] = round(float(row["per_cpu_s_median"]) / cpu_ceiling, 3)
        row["wall_ratio_to_ceiling"] = round(float(row["per_s_median"]) / ceiling, 3)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--scaling",
        type=str,
        default="",
        help="comma-separated job counts (e.g. 1,1000,10000,100000): a scaling table of "
        "fold + store with max(--events, jobs x --events-per-job) events per row",
    )
    parser.add_argument("--events-per-job", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    args = parser.parse_args()

    if args.scaling:
        counts = [int(n) for n in args.scaling.split(",")]
        plan = [(n, max(args.events, n * args.events_per_job)) for n in counts]
        modes: tuple[bool, ...] = (True,)
    else:
        plan = [(1, args.events), (args.jobs, args.events)]
        modes = (False, True)
    rows = []
    for jobs, count in plan:
        rows.extend(measure(jobs, workload(jobs, count), args.repeat, args.json, modes))
        if args.json:
            for row in rows[-len(modes) :]:
                print(json.dumps(row), flush=True)
    if args.json:
        return
    print(
        "\n| jobs | events | per event | events/s (median) | min | max | p99 ms "
        "| per CPU s | ceiling (bare decode) per CPU s | ratio | state bytes/job median (p99) | RSS MiB "
        "| µs per step, cold / warm |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|")
    for row in rows:
        print(
            f"| {row['jobs']:,} | {row['events']:,} | {row['mode']} | {row['per_s_median']:,} "
            f"| {row['per_s_min']:,} | {row['per_s_max']:,} | {row['p99_ms']} "
            f"| {row['per_cpu_s_median']:,} | {row['ceiling_per_cpu_s']:,} | {row['ratio_to_ceiling']} "
            f"| {row['state_bytes_per_job_median']:,} ({row['state_bytes_per_job_p99']:,}) "
            f"| {row['rss_mb']:,} | {row['step_cold_us']} / {row['step_warm_us']} |"
        )


if __name__ == "__main__":
    main()
