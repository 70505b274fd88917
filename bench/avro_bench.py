"""Benchmark of the scheduler service's output encoding (not a test): Avro per record.

    .venv/bin/python -m bench.avro_bench [--events 20000] [--jobs 1000] [--repeat 3]
    .venv/bin/python -m bench.avro_bench --candidate cavro   # after `pip install cavro`

Folds the core bench's workload and encodes the two records the service sends
for it, as it sends them: every rescale revision (`rescales`) and one
SchedulerDecisions record per folded input (`decisions`), with the project's
`Codec` (fastavro, single-object encoding). Records per CPU second (the
machines are shared), the median of --repeat passes, and the cost per input
event. With --candidate, the same records through another Avro writer, beside
fastavro's, after checking that it writes every record's body byte for byte as
fastavro does.

Then what the records hold (values per record: unions, those not null,
primitives, records) and what a union costs fastavro: records of 20 fields
written as plain `long`s, as `["null", "long"]` holding a long, None, or the
long in fastavro's tuple notation (`("long", v)`, which names the branch), and
as `["null", "string"]`. fastavro picks a union's branch by validating the
value against each branch in turn; these rows show what that costs.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import statistics
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from fastavro import parse_schema, schemaless_writer

from bench.core_bench import workload
from bench.serde_bench import rate
from services.contracts import records as r
from services.contracts.codec import Codec
from services.contracts.events import Event
from services.contracts.schemas import SchemaRegistry, SchemaVersion
from services.scheduler.adapters.processor import decisions_record
from services.scheduler.core import handle
from services.scheduler.core.effects import RescaleUpdated
from services.scheduler.core.model import JobState

Record = dict[str, Any]


def outputs(
    events: list[Event], start: dict[str, JobState | None] | None = None, first_offset: int = 0
) -> dict[str, list[Record]]:
    """The output records of folding `events` (from the `start` states, the events at
    offsets from `first_offset`) by record name, made as the service's processor makes them."""
    states = dict(start or {})
    produced: dict[str, list[Record]] = {r.RESCALE: [], r.SCHEDULER_DECISIONS: []}
    for offset, event in enumerate(events, first_offset):
        step = handle(states.get(event.job_id), event)
        states[event.job_id] = step.job
        for effect in step.effects:
            if isinstance(effect, RescaleUpdated):
                produced[r.RESCALE].append(effect.record)
        at = step.job.now if step.job is not None else event.timestamp
        decisions = decisions_record(step.effects, event.job_id, at, offset)
        if decisions is not None:
            produced[r.SCHEDULER_DECISIONS].append(decisions)
    return produced


def fastavro_body(version: SchemaVersion) -> Callable[[Record], bytes]:
    def encode(record: Record) -> bytes:
        out = io.BytesIO()
        schemaless_writer(out, version.parsed, record)
        return out.getvalue()

    return encode


def single_object(codec: Codec, full_name: str) -> Callable[[Record], bytes]:
    """What the service calls: header and body, through the project's Codec."""
    return lambda record: codec.encode(full_name, record)


def candidate_body(name: str, version: SchemaVersion) -> Callable[[Record], bytes]:
    """Another library's writer of a record body (no single-object header)."""
    try:
        cavro = importlib.import_module("cavro")
    except ImportError:
        raise SystemExit("cavro is not installed: pip install cavro") from None
    schema = cavro.Schema(json.dumps(json.loads(version.path.read_text())))
    encode: Callable[[Record], bytes] = schema.binary_encode
    return encode


def shape(schema: Any, datum: Any, counts: Counter[str], named: dict[str, Any]) -> None:
    """Count into `counts` the values `datum` holds, by how `schema` (raw JSON) types them."""
    if isinstance(schema, str) and schema in named:
        shape(named[schema], datum, counts, named)
    elif isinstance(schema, list):
        counts["unions"] += 1
        if datum is not None:
            counts["unions not null"] += 1
            branch = next(b for b in schema if b != "null")  # the project's unions: null + one
            shape(branch, datum, counts, named)
    elif isinstance(schema, dict) and isinstance(schema["type"], dict | list):
        shape(schema["type"], datum, counts, named)
    elif isinstance(schema, dict) and schema["type"] == "record":
        named[schema["name"]] = named[schema.get("namespace", "") + "." + schema["name"]] = schema
        counts["records"] += 1
        for field in schema["fields"]:
            shape(field["type"], datum.get(field["name"]), counts, named)
    elif isinstance(schema, dict) and schema["type"] == "array":
        for item in datum:
            shape(schema["items"], item, counts, named)
    elif isinstance(schema, dict) and schema["type"] == "map":
        for value in datum.values():
            shape(schema["values"], value, counts, named)
    else:
        counts["primitives"] += 1  # enums and fixed too


UNION_CASES: tuple[tuple[str, Any, Any], ...] = (
    ("long", "long", 1_700_000_000_000),
    ('["null", "long"], a long', ["null", "long"], 1_700_000_000_000),
    ('["null", "long"], None', ["null", "long"], None),
    ('["null", "long"], tuple notation', ["null", "long"], ("long", 1_700_000_000_000)),
    ("string", "string", "Executing"),
    ('["null", "string"], a string', ["null", "string"], "Executing"),
    ('["null", "string"], tuple notation', ["null", "string"], ("string", "Executing")),
)
FIELDS = 20


def union_costs(repeat: int, records: int = 5_000) -> None:
    """µs per record of `FIELDS` fields of each case, and per field beyond the plain type."""
    print(f"\n| {FIELDS} fields of | µs/record | µs per field beyond the plain type |")
    print("|---|---:|---:|")
    plain = 0.0
    out = io.BytesIO()
    for label, avro_type, value in UNION_CASES:
        schema = parse_schema(
            {
                "type": "record",
                "name": "Probe",
                "fields": [{"name": f"f{i}", "type": avro_type} for i in range(FIELDS)],
            }
        )
        record = {f"f{i}": value for i in range(FIELDS)}

        def write(_: int, schema: Any = schema, record: Record = record) -> None:
            out.seek(0)
            schemaless_writer(out, schema, record)

        us = 1e6 / rate(range(records), write, repeat)
        if isinstance(avro_type, str):
            plain = us  # the rows after it compare with this one
        print(f"| {label} | {us:.1f} | {(us - plain) / FIELDS:+.2f} |")


def print_shapes(registry: SchemaRegistry, produced: Mapping[str, list[Record]]) -> None:
    print("\n| record | values per record: unions (not null) | primitives | records |")
    print("|---|---:|---:|---:|")
    for full_name, records in produced.items():
        raw = json.loads(registry.latest(full_name).text)
        counts: Counter[str] = Counter()
        for record in records:
            shape(raw, record, counts, {})
        n = max(1, len(records))
        print(
            f"| {full_name.rsplit('.', 1)[-1]} | {counts['unions'] / n:.1f} "
            f"({counts['unions not null'] / n:.1f}) | {counts['primitives'] / n:.1f} | "
            f"{counts['records'] / n:.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--candidate", choices=("cavro",), help="another Avro writer beside fastavro"
    )
    args = parser.parse_args()
    registry = SchemaRegistry.load()
    codec = Codec(registry)
    folded = workload(args.jobs, args.events)
    inputs, produced = len(folded), outputs(folded)
    print(
        f"{inputs:,} inputs folded ({args.jobs:,} jobs); records per CPU second, median of "
        f"{args.repeat}\n"
    )
    print(
        "| record | writer | records | per input | bytes (median) | records/CPU s | µs/record "
        "| µs per input |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for full_name, records in produced.items():
        version = registry.latest(full_name)
        writers: list[tuple[str, Callable[[Record], bytes]]] = [
            ("fastavro (Codec.encode)", single_object(codec, full_name))
        ]
        if args.candidate:
            theirs, ours = candidate_body(args.candidate, version), fastavro_body(version)
            differing = sum(theirs(rec) != ours(rec) for rec in records)
            if differing:
                raise SystemExit(
                    f"{args.candidate} writes {differing} {full_name} records "
                    "differently from fastavro"
                )
            writers.append((f"{args.candidate} (body only, byte-identical)", theirs))
        size = statistics.median(len(codec.encode(full_name, rec)) for rec in records)
        for writer, encode in writers:
            per_s = rate(records, encode, args.repeat)
            print(
                f"| {full_name.rsplit('.', 1)[-1]} | {writer} | {len(records):,} | "
                f"{len(records) / inputs:.2f} | {size:,.0f} | {per_s:,.0f} | {1e6 / per_s:.1f} | "
                f"{1e6 / per_s * len(records) / inputs:.1f} |"
            )
    print_shapes(registry, produced)
    union_costs(args.repeat)


if __name__ == "__main__":
    main()
