"""Downtime per rescale: stabilization in WaitingForResources (before FLINK-33092)
versus in Executing (FLINK-33092), on the embedded cluster, in real time.

    .venv/bin/scalefold local run --run-dir .run/study -- .venv/bin/python -m bench.downtime_study

Two identical jobs run side by side on one stack (scheduler + actuator with the
embedded cluster): each wants 4 slots and gets a single-slot TaskManager every
--interval seconds. Job A runs with `scalefold.rescale.stabilization:
waiting-for-resources`, job B with `executing`; both use the same stabilization
timeout S (the submission key for A's WaitingForResources, the executing key
for B) and the same cooldown. Downtime of a rescale is the time its spans spent
outside Executing (Restarting + WaitingForResources + CreatingExecutionGraph),
read from the rescale records.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from bench.scheduler_bench import fresh
from services.actuator.control import post
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts import jobconfig as c
from services.contracts.events import JobSubmitted, VertexSpec, to_record
from services.contracts.kafka import producer_config
from tests.integration.scheduler_support import (
    ActuatorProcess,
    SchedulerProcess,
    consume_records,
    latest_by_uuid,
)

PLACEMENTS = {"old": "waiting-for-resources", "new": "executing"}


def job_config(placement: str, stabilization: str, cooldown: str) -> tuple[tuple[str, str], ...]:
    return tuple(
        sorted(
            {
                c.RUNTIME_MODE: "external",
                c.STABILIZATION_PLACEMENT: placement,
                c.SUBMISSION_STABILIZATION: stabilization,
                c.EXECUTING_STABILIZATION: stabilization,
                c.COOLDOWN: cooldown,
            }.items()
        )
    )


def downtime(record: dict[str, Any]) -> int:
    return sum(
        s["durationInMillis"] or 0 for s in record["schedulerStates"] if s["state"] != "Executing"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--taskmanagers", type=int, default=4)
    parser.add_argument("--interval", type=float, default=25.0, help="seconds between TaskManagers")
    parser.add_argument("--stabilization", default="20 s")
    parser.add_argument("--cooldown", default="10 s")
    args = parser.parse_args()

    settings = fresh(Settings(bootstrap_servers=os.environ["SCALEFOLD_BOOTSTRAP_SERVERS"]))
    codec = Codec(SchemaRegistry.load())
    data = Path(tempfile.mkdtemp())
    scheduler = SchedulerProcess(settings, data / "scheduler").start()
    actuator = ActuatorProcess(settings, data / "actuator").start()
    try:
        scheduler.wait_ready()
        actuator.wait_ready()
        producer = Producer(producer_config(settings))
        vertices = (VertexSpec("source", "Source", "default", "default", args.taskmanagers, None),)
        jobs = {name: f"study-{name}" for name in PLACEMENTS}
        for name, job in jobs.items():
            submitted = JobSubmitted(
                job,
                int(time.time() * 1000),
                job,
                vertices,
                None,
                job_config(PLACEMENTS[name], args.stabilization, args.cooldown),
            )
            producer.produce(
                settings.topics.job_events,
                key=job.encode(),
                value=codec.encode(*to_record(submitted)),
            )
        producer.flush(10)
        started = time.monotonic()
        for n in range(args.taskmanagers):
            time.sleep(max(0.0, started + n * args.interval - time.monotonic()))
            for job in jobs.values():
                post(actuator.port, "/taskmanagers", job=job, count=1, slots=1)
            print(
                f"  t+{time.monotonic() - started:5.1f}s TaskManager {n + 1} joined both jobs",
                flush=True,
            )

        def settled(records: list[dict[str, Any]]) -> bool:
            latest = latest_by_uuid(records).values()
            done = [r for r in latest if r["terminalState"] == "COMPLETED"]
            return all(
                any(
                    all(v["postRescaleParallelism"] == args.taskmanagers for v in r["vertices"])
                    for r in done
                    if r["jobId"] == job
                )
                for job in jobs.values()
            )

        records = latest_by_uuid(consume_records(codec, settings, settled, timeout=300)).values()
    finally:
        actuator.stop()
        scheduler.stop()
    report(records, jobs, args)


def report(records: Any, jobs: dict[str, str], args: argparse.Namespace) -> None:
    labels = {
        "old": "in WaitingForResources (before FLINK-33092)",
        "new": "in Executing (FLINK-33092)",
    }
    print(
        f"\nstabilization {args.stabilization}, cooldown {args.cooldown}, one single-slot "
        f"TaskManager every {args.interval:g} s up to {args.taskmanagers}:"
    )
    print(
        "| stabilization | rescales | parallelism reached | downtime of each (s) | median (s) | total (s) | full parallelism after (s) |"
    )
    print("|---|---:|---|---|---:|---:|---:|")
    for name, job in jobs.items():
        done = sorted(
            (r for r in records if r["jobId"] == job and r["terminalState"] == "COMPLETED"),
            key=lambda r: r["startTimestampInMillis"],
        )
        submitted = done[0]["startTimestampInMillis"]
        rescales = done[1:]  # the initial schedule is not a rescale of a running job
        downs = [downtime(r) / 1000 for r in rescales]
        reached = " -> ".join(str(r["vertices"][0]["postRescaleParallelism"]) for r in done)
        full = next(
            r["endTimestampInMillis"]
            for r in done
            if r["vertices"][0]["postRescaleParallelism"] == args.taskmanagers
        )
        print(
            f"| {labels[name]} | {len(rescales)} | {reached} | {', '.join(f'{d:.1f}' for d in downs)} | "
            f"{statistics.median(downs):.1f} | {sum(downs):.1f} | {(full - submitted) / 1000:.1f} |"
        )


if __name__ == "__main__":
    main()
