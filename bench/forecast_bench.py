"""A forecast's read against the age of a fleet's log (issues 49 and 50; not a test).

    .venv/bin/scalefold local run --run-dir .run/forecast -- \\
        .venv/bin/python -m bench.forecast_bench [--jobs 1000] [--days 30] [--rounds 7]

Before the history's autoscaler sends a decision it asks what the adaptive scheduler will
do with it (services/scheduler/foresight.py `forecast`): the job's recorded inputs, read
from `job-events` from the first, folded with the change. This fills a fresh topic
prefix's `job-events` with `--days` of bench/month_bench.py's fleet (`--jobs` live jobs:
each day a TaskManager more and one lost, a requirements change for one in three, a task
failure for one in five, 3 % ending and as many new; dated a day apart), then, for
`--rounds` jobs picked at random, times three reads of the same job:

- **whole**: every partition of `job-events` and `flink-rescales` from the first record,
  as `forecast` read them until 2026-12-06;
- **partition**: the job's own partition of each (Kafka's partitioner's: where the
  scheduler folds it), decoded and folded: `forecast` as it is now;
- **ceiling**: the bare read of that partition (confluent-kafka, no decode, no fold).

It prints the median of each, in seconds, the topic's records and bytes, and the ratios
(partition / ceiling: what decoding and folding add; whole / partition: what reading
one partition saves). Not a claim about any one machine: a shared 2-core one is
noisy (±30 %).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any

from bench.month_bench import DAY_S, FleetState, Shape, plan_day, submit
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts.events import Event, to_record
from services.contracts.kafka import ensure_topics, producer_config, read_to_end
from services.contracts.topics import JOB_EVENTS
from services.scheduler.foresight import forecast, foresee
from services.scheduler.whatif import read_recorded

T0 = 1_790_000_000_000
"""The fleet's first day, epoch milliseconds."""


def fleet(jobs: int, days: int, seed: int) -> list[Event]:
    """`days` of the fleet's inputs in time order, each dated when planned."""
    rng = random.Random(seed)
    shape = Shape(float(DAY_S), 0.03, (), 60_000)
    state = FleetState()
    planned: list[tuple[float, Event]] = []
    for _ in range(jobs):
        planned += submit(state, rng.uniform(0, DAY_S * 0.5), shape)
    events: list[Event] = []
    for day in range(days):
        if day:
            planned = plan_day(state, rng, shape)
        planned.sort(key=lambda item: item[0])
        events += [
            replace(event, timestamp=T0 + day * DAY_S * 1000 + round(at * 1000))
            for at, event in planned
        ]
    return events


def fill(settings: Settings, codec: Codec, events: list[Event]) -> None:
    from confluent_kafka import Producer

    producer = Producer(producer_config(settings, **{"linger.ms": 20}))
    for event in events:
        value = codec.encode(*to_record(event))
        while True:
            try:
                producer.produce(settings.topics.job_events, value, event.job_id.encode())
                break
            except BufferError:  # the client's queue is full: let it send
                producer.poll(0.1)
        producer.poll(0)
    if producer.flush(120):
        raise SystemExit("forecast-bench: the broker did not take every input")


def timed(call: Callable[[], Any]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def whole(settings: Settings, codec: Codec, key: str, targets: dict[str, int], now: int) -> Any:
    """The forecast as it was until 2026-12-06: both topics read whole."""
    recorded = read_recorded(settings, codec, lambda x: x == key)
    return foresee(key, recorded.inputs.get(key, ()), targets, now)


def bare(settings: Settings, key: str) -> int:
    group = settings.topics.own("bench") + "-ceiling"
    return sum(1 for _ in read_to_end(settings, settings.topics.job_events, group, keys=[key]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.forecast_bench",
        description="Time a forecast's read of one job's inputs against a fleet's log.",
    )
    parser.add_argument("--jobs", type=int, default=1000, help="live jobs (default 1000)")
    parser.add_argument("--days", type=int, default=30, help="days of the log (default 30)")
    parser.add_argument("--rounds", type=int, default=7, help="jobs timed (default 7)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)

    base = Settings.from_env(os.environ)
    settings = base.with_overrides(topic_prefix=f"forecast{uuid.uuid4().hex[:8]}.")
    ensure_topics(settings, settings.topics.all())
    codec = Codec(SchemaRegistry.load(settings.schemas_dir))
    events = fleet(args.jobs, args.days, args.seed)
    started = time.perf_counter()
    fill(settings, codec, events)
    print(
        f"forecast-bench: {len(events)} inputs of {len({e.job_id for e in events})} jobs "
        f"over {args.days} days on {JOB_EVENTS.partitions} partitions "
        f"({time.perf_counter() - started:.1f} s to produce)",
        file=sys.stderr,
    )
    rng = random.Random(args.seed)
    keys = rng.sample(sorted({e.job_id for e in events[: args.jobs * 3]}), args.rounds)
    now = events[-1].timestamp + 60_000
    times: dict[str, list[float]] = {"whole": [], "partition": [], "ceiling": []}
    targets = {"map": 6}
    for key in keys:
        times["whole"].append(timed(partial(whole, settings, codec, key, targets, now)))
        times["partition"].append(timed(partial(forecast, settings, key, targets, now)))
        times["ceiling"].append(timed(partial(bare, settings, key)))
    medians = {name: statistics.median(values) for name, values in times.items()}
    figures = {
        "jobs": args.jobs,
        "days": args.days,
        "inputs": len(events),
        "median_s": medians,
        "partition_over_ceiling": medians["partition"] / medians["ceiling"],
        "whole_over_partition": medians["whole"] / medians["partition"],
    }
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"| read | median s ({args.rounds} jobs) |\n|---|---:|")
        for name, value in medians.items():
            print(f"| {name} | {value:.2f} |")
        print(
            f"partition / ceiling {figures['partition_over_ceiling']:.2f}, "
            f"whole / partition {figures['whole_over_partition']:.1f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
