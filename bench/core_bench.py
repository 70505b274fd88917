"""Benchmark of the scheduler core (not a test): events per second through the fold,
for one job and for many jobs, and bytes of stored state per job.

    .venv/bin/python -m bench.core_bench [--events 100000] [--jobs 10000] [--repeat 5]

The workload is a realistic mix per job: a submission, TaskManagers joining and
leaving, checkpoints every 10 s, occasional failures and requirement updates.
"Fold" is `handle` alone; "fold + store" also serializes the new state after
every event, as the scheduler service does for its table's changelog (it reads
a stored state back only when it recovers). Medians
of `--repeat` runs; machines here are shared, so read the ratios.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import time
from collections.abc import Iterator

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
)
from services.scheduler.core import handle
from services.scheduler.core.model import JobState
from services.scheduler.core.serde import dumps, loads

VERTICES = (
    VertexSpec("source", "Source: events", "default", "default", 8, None),
    VertexSpec("enrich", "Enrich", "default", "default", 8, None),
    VertexSpec("sink", "Sink", "sinks", "sinks", 4, None),
)
CONFIG = (("jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling", "20 s"),)


def job_events(job_id: str, count: int, seed: int) -> Iterator[Event]:
    """`count` events of one job, 1 to 10 s apart."""
    rng = random.Random(seed)
    now = 0
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


def workload(jobs: int, events: int) -> list[Event]:
    """`events` in all, spread over `jobs` jobs and interleaved by time."""
    per_job = max(2, events // jobs)
    streams = [list(job_events(f"job-{j}", per_job, j)) for j in range(jobs)]
    merged = [e for stream in streams for e in stream]
    merged.sort(key=lambda e: (e.timestamp, e.job_id))
    return merged


def run(events: list[Event], store: bool) -> tuple[float, dict[str, JobState | None]]:
    jobs: dict[str, JobState | None] = {}
    changelog: dict[str, bytes] = {}
    gc.collect()
    start = time.perf_counter()
    for event in events:
        step = handle(jobs.get(event.job_id), event)
        jobs[event.job_id] = step.job
        if store and step.job is not None:
            changelog[event.job_id] = dumps(step.job)
    rate = len(events) / (time.perf_counter() - start)
    for job_id, data in changelog.items():  # what was stored is what recovery reads back
        assert loads(data) == jobs[job_id]
    return rate, jobs


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()

    rows = []
    for jobs in (1, args.jobs):
        events = workload(jobs, args.events)
        for store in (False, True):
            rates = []
            for attempt in range(args.repeat):
                rate, final = run(events, store)
                rates.append(rate)
                print(
                    f"  {jobs} job(s), store={store}, run {attempt + 1}: {rate:,.0f} events/s",
                    flush=True,
                )
            sizes = sorted(len(dumps(j)) for j in final.values() if j is not None)
            rows.append(
                (jobs, len(events), store, statistics.median(rates), min(rates), max(rates), sizes)
            )

    print(
        "\n| jobs | events | per event | events/s (median) | min | max "
        "| state bytes/job median (p99) |"
    )
    print("|---:|---:|---|---:|---:|---:|---|")
    for jobs, count, store, median, low, high, sizes in rows:
        p99 = sizes[min(len(sizes) - 1, int(len(sizes) * 0.99))]
        what = "fold + store state" if store else "fold"
        print(
            f"| {jobs:,} | {count:,} | {what} | {median:,.0f} | {low:,.0f} | {high:,.0f} | "
            f"{statistics.median(sizes):,.0f} ({p99:,}) |"
        )


if __name__ == "__main__":
    main()
