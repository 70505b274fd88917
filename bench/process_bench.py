"""Benchmark of the scheduler service's own work per event, without Kafka (not a test).

    .venv/bin/python -m bench.process_bench [--workload mix|rescales] [--events 20000]
        [--jobs 1000] [--repeat 3] [--json]

The messages are the job-events records a worker receives (Avro single-object
encoding, each with its partition and offset). Passes over the same messages,
in CPU time per event (`time.process_time`, the median of --repeat passes):

    decode    the input's Avro decoding into an event: the ceiling, a bare decode
    fold      the core's `handle` of the decoded events (states kept in memory)
    encode    the Avro encoding of what folding produced: every rescale revision
              and one SchedulerDecisions record per event that decided anything
    process   `Processor.process`, all of it as the worker calls it per message

What the worker adds around `process` (Faust's delivery, the table writes, the
broker's acknowledgements) is `bench.scheduler_bench`'s. Workloads: `mix` is the
core bench's (submissions, TaskManagers joining and leaving, checkpoints,
failures); `rescales` is the scheduler bench's latency run (each job submitted with
zero timeouts on one TaskManager, untimed; then every event a new single-slot
TaskManager, which rescales its job at once).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
from collections.abc import Callable

from bench import avro_bench, core_bench, scheduler_bench
from services.contracts import Codec, SchemaRegistry, Topics
from services.contracts import records as r
from services.contracts.events import Event, to_record
from services.contracts.kafka import partition_for
from services.contracts.topics import JOB_EVENTS
from services.scheduler.adapters.processor import Incoming, Processor, Stored
from services.scheduler.core import MODE as CORE_MODE
from services.scheduler.core import handle
from services.scheduler.core.model import JobState

Pass = Callable[[], int]


def events_of(workload: str, jobs: int, events: int) -> tuple[list[Event], list[Event]]:
    """(untimed setup, timed events) of a workload."""
    if workload == "mix":
        return [], core_bench.workload(jobs, events)
    start = 1_800_000_000_000
    timed: list[Event] = [
        scheduler_bench.rescale_event(i, jobs, start + 1 + i) for i in range(events)
    ]
    return scheduler_bench.rescale_setup(jobs, start), timed


def messages(codec: Codec, events: list[Event], first_offset: int) -> list[Incoming]:
    """The events as a worker receives them, on the partition their key belongs to."""
    out = []
    for offset, event in enumerate(events, first_offset):
        key = event.job_id.encode()
        partition = partition_for(key, JOB_EVENTS.partitions)
        out.append(Incoming("job-events", partition, offset, key, codec.encode(*to_record(event))))
    return out


def processed(processor: Processor, inputs: list[Incoming], states: dict[str, Stored]) -> int:
    """Every message through `processor`, its stored states kept in `states`."""
    for message in inputs:
        outcome = processor.process(message, states.get(processor.job_of(message) or ""))
        if outcome.stored is not None and outcome.job_id is not None:
            states[outcome.job_id] = outcome.stored
    return len(inputs)


def passes(codec: Codec, workload: str, jobs: int, events: int) -> tuple[dict[str, Pass], int, str]:
    """The timed passes over one workload (each returns how many events it took), how
    many events it has (the mix gives each job at least two), and a line on its outputs."""
    processor = Processor(codec, Topics())
    setup, timed = events_of(workload, jobs, events)
    inputs = messages(codec, timed, first_offset=len(setup))
    stored: dict[str, Stored] = {}
    processed(processor, messages(codec, setup, first_offset=0), stored)  # untimed
    start: dict[str, JobState | None] = {job: s.job for job, s in stored.items()}
    produced = [
        (name, record)
        for name, records in avro_bench.outputs(timed, start, first_offset=len(setup)).items()
        for record in records
    ]
    values = [m.value for m in inputs if m.value is not None]

    def decode() -> int:
        core_bench.decode_all(codec, values)
        return len(values)

    def fold() -> int:
        states = dict(start)
        for event in timed:
            states[event.job_id] = handle(states.get(event.job_id), event).job
        return len(timed)

    def encode() -> int:
        for name, record in produced:
            codec.encode(name, record)
        return len(timed)  # per input event

    sizes = []
    for name in (r.RESCALE, r.SCHEDULER_DECISIONS):
        lengths = [len(codec.encode(name, rec)) for n, rec in produced if n == name]
        sizes.append(
            f"{len(lengths) / len(timed):.2f} {name.rsplit('.', 1)[-1]} of "
            f"{statistics.median(lengths or [0]):,.0f} bytes"
        )
    return (
        {
            "decode": decode,
            "fold": fold,
            "encode": encode,
            "process": lambda: processed(processor, inputs, dict(stored)),
        },
        len(timed),
        "outputs per event: " + ", ".join(sizes),
    )


def cpu_us(repeat: int, run: Pass) -> float:
    """CPU µs per event of `run`, the median of `repeat` passes."""
    costs = []
    for _ in range(repeat):
        gc.collect()
        began = time.process_time()
        count = run()
        costs.append((time.process_time() - began) / count * 1e6)
    return statistics.median(costs)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("mix", "rescales"), default="mix")
    parser.add_argument("--events", type=int, default=20_000, help="timed events")
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    args = parser.parse_args()
    runs, events, about = passes(
        Codec(SchemaRegistry.load()), args.workload, args.jobs, args.events
    )
    costs = {mode: cpu_us(args.repeat, run) for mode, run in runs.items()}
    ceiling, whole = costs["decode"], costs["process"]
    if not args.json:
        print(
            f"{events:,} {args.workload} events over {args.jobs:,} jobs (core {CORE_MODE}); "
            f"CPU per event, median of {args.repeat}; {about}\n\n"
            "| pass | µs/event | events per CPU s | share of process |\n|---|---:|---:|---:|"
        )
    for mode, us in costs.items():
        row = {
            "stage": "process",
            "mode": mode,
            "workload": args.workload,
            "core": CORE_MODE,
            "jobs": args.jobs,
            "events": events,
            "cpu_us_per_event": round(us, 1),
            "per_cpu_s_median": round(1e6 / us),
            "ceiling_per_cpu_s": round(1e6 / ceiling),
            "ratio_to_ceiling": round(ceiling / us, 3),
        }
        if args.json:
            print(json.dumps(row), flush=True)
        else:
            print(f"| {mode} | {us:,.1f} | {1e6 / us:,.0f} | {us / whole:.0%} |")
    if not args.json:
        rest = whole - costs["decode"] - costs["fold"] - costs["encode"]
        print(f"| process less the three (records, checks) | {rest:,.1f} | | {rest / whole:.0%} |")


if __name__ == "__main__":
    main()
