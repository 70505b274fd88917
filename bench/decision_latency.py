"""Decision latency: from a rescale record on Kafka to its scaling command on Kafka (not a test).

    make up      # or: scalefold local up --run-dir DIR, then --run-dir DIR
    .venv/bin/python -m bench.decision_latency [--probes 20] [--hogs 6] [--fleet] [--json]

Each probe produces one rescale record of a new job (`bench-decision-<n>`) to the
rescales topic: a rescale in progress whose open span, WaitingForResources, was entered
ten minutes before (event time), with none of the one slot it needs at least, so the
planner's provisioning rule holds as soon as the planner has the record. Time zero is
the record's Kafka timestamp (its producer's clock), the end the command's (the history
service's producer), on one machine's clock. Probes start at random moments, so they
sample the planner's trigger evenly.

It runs the probes twice on the same stack: quiet, then under load, with `--hogs`
busy processes (bench/load.py) and, with `--fleet`, the example logs produced as new
jobs every two seconds beside them (the history busy with other jobs' records, as a
fleet keeps it). Reported for each: p50, p95 and max of the latency, and the 1-minute
load average at the end.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.load import Fleet, hogs, load_average
from bench.reading_bench import percentile
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts import records as r
from services.contracts.kafka import librdkafka_config, producer_config
from services.history import synthetic
from services.localstack.layout import RUN_ROOT

WAITED_MS = 600_000


def probe_record(job_id: str, now_ms: int) -> dict[str, Any]:
    """A rescale waiting for resources since ten minutes, 0 of 1 slot: provisioned at once."""
    entered = now_ms - WAITED_MS
    return synthetic.rescale(
        job_id,
        str(uuid.uuid4()),
        spans=[("Created", entered - 5, entered), ("WaitingForResources", entered, None)],
        groups=[synthetic.Group(desired=2, minimal=1)],
        available_slots=0,
        trigger="INITIAL_SCHEDULE",
    )


class Probe:
    """Produces probe records and reads the commands topic for their commands."""

    def __init__(self, settings: Settings) -> None:
        from confluent_kafka import Consumer, Producer

        self.codec = Codec(SchemaRegistry.load(settings.schemas_dir))
        self.settings = settings
        self.producer = Producer(producer_config(settings))
        self.consumer = Consumer(
            librdkafka_config(
                settings,
                **{
                    "group.id": f"bench-decision-{uuid.uuid4().hex}",
                    "auto.offset.reset": "latest",
                    "enable.auto.commit": False,
                },
            )
        )
        self.consumer.subscribe([settings.topics.commands])
        deadline = time.monotonic() + 60
        while not self.consumer.assignment() and time.monotonic() < deadline:
            self.consumer.poll(0.2)

    def once(self, job_id: str, timeout: float) -> float | None:
        """Seconds from the record's Kafka timestamp to its command's, or None (timeout)."""
        sent: dict[str, int] = {}

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                sent["at"] = message.timestamp()[1]

        record = probe_record(job_id, int(time.time() * 1000))
        value = self.codec.encode(r.RESCALE, record)
        self.producer.produce(
            self.settings.topics.rescales, key=job_id.encode(), value=value, on_delivery=delivered
        )
        self.producer.flush(30)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            message = self.consumer.poll(0.5)
            if message is None or message.error() or message.key() != job_id.encode():
                continue
            return (message.timestamp()[1] - sent["at"]) / 1000
        return None


def run_probes(probe: Probe, count: int, timeout: float, label: str) -> dict[str, Any]:
    latencies: list[float] = []
    missed = 0
    for number in range(count):
        time.sleep(random.uniform(0.5, 2.5))
        seconds = probe.once(f"bench-decision-{label}-{uuid.uuid4().hex[:8]}", timeout)
        if seconds is None:
            missed += 1
        else:
            latencies.append(seconds)
        shown = "missed" if seconds is None else f"{seconds:.2f} s"
        print(f"decision_latency: {label} probe {number + 1}: {shown}", file=sys.stderr)
    result: dict[str, Any] = {"probes": count, "missed": missed, "load_1min": load_average()}
    if latencies:
        result |= {
            "p50_s": round(statistics.median(latencies), 2),
            "p95_s": round(percentile(latencies, 0.95), 2),
            "max_s": round(max(latencies), 2),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=RUN_ROOT / "local")
    parser.add_argument("--probes", type=int, default=20)
    parser.add_argument("--hogs", type=int, default=6, help="busy processes for the loaded run")
    parser.add_argument("--fleet", action="store_true", help="the example logs beside the hogs")
    parser.add_argument("--settle", type=float, default=60.0, help="seconds of load first")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    bootstrap = (args.run_dir / "bootstrap").read_text().strip()
    settings = Settings().with_overrides(bootstrap_servers=bootstrap)
    probe = Probe(settings)
    results = {"quiet": run_probes(probe, args.probes, args.timeout, "quiet")}
    with ExitStack() as load:
        load.enter_context(hogs(args.hogs, args.settle + args.probes * (args.timeout + 3)))
        fleet = load.enter_context(Fleet(settings)) if args.fleet else None
        time.sleep(args.settle)
        results["loaded"] = run_probes(probe, args.probes, args.timeout, "loaded")
        results["loaded"] |= {"hogs": args.hogs, "fleet_jobs": fleet.jobs if fleet else 0}
    print(json.dumps(results) if args.json else json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
