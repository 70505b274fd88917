"""Benchmark of the stored job state's encoding (not a test): why msgspec.

    .venv/bin/python -m bench.serde_bench [--jobs 1000] [--events 100000] [--repeat 5]

Folds the core bench's workload, then encodes (and decodes) every final job
state with each candidate, in states per CPU second (the machines are shared):

- msgspec JSON, the states as `array_like` Structs (what `serde` stores);
- msgspec MessagePack, the same Structs;
- orjson, with a `default` hook turning each Struct into its field list;
- the standard library's json with the same hook (the shape of the former
  hand-written encoder: Python code visits every value).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import msgspec
import orjson

from bench.core_bench import run, workload
from services.scheduler.core.model import JobState
from services.scheduler.core.serde import dumps, loads

T = TypeVar("T")


def _fields(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.astuple(value)
    raise TypeError(type(value).__name__)


def _json_default(value: Any) -> Any:
    if isinstance(value, msgspec.Struct):
        return msgspec.structs.astuple(value)
    return msgspec.to_builtins(value)  # the contracts' Profile dataclass


def rate(items: Sequence[T], call: Callable[[T], object], repeat: int) -> float:
    """`call`s per CPU second over `items`, the median of `repeat` passes."""
    rates = []
    for _ in range(repeat):
        start = time.process_time()
        for item in items:
            call(item)
        rates.append(len(items) / (time.process_time() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    *_, final = run(workload(args.jobs, args.events), store=False)
    states = [job for job in final.values() if job is not None]

    packer, unpacker = msgspec.msgpack.Encoder(), msgspec.msgpack.Decoder(JobState)
    stdlib: Callable[[JobState], bytes] = lambda s: json.dumps(  # noqa: E731
        s, default=_json_default, separators=(",", ":")
    ).encode()
    orj: Callable[[JobState], bytes] = lambda s: orjson.dumps(s, default=_fields)  # noqa: E731
    candidates: list[tuple[str, Callable[[JobState], bytes], Callable[[bytes], object] | None]] = [
        ("msgspec JSON, array_like Structs (stored)", dumps, loads),
        ("msgspec MessagePack, array_like Structs", packer.encode, unpacker.decode),
        ("orjson + default hook", orj, None),
        ("stdlib json + default hook", stdlib, None),
    ]
    print(f"{len(states):,} job states; states per CPU second, median of {args.repeat}\n")
    print("| encoding | encode/s | decode/s | bytes/job (median) |")
    print("|---|---:|---:|---:|")
    for name, encode, decode in candidates:
        encoded = [encode(s) for s in states]
        decoded = "needs a hand-written decoder"
        if decode is not None:
            assert all(decode(e) == s for e, s in zip(encoded, states, strict=True))
            decoded = f"{rate(encoded, decode, args.repeat):,.0f}"
        size = statistics.median(len(e) for e in encoded)
        print(f"| {name} | {rate(states, encode, args.repeat):,.0f} | {decoded} | {size:,.0f} |")


if __name__ == "__main__":
    main()
