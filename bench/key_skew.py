"""How the workload's keys fall onto a keyed vertex's subtasks, as Flink assigns them
(not a test; docs/benchmarks.md, "the ceiling at 8").

Flink routes a key to key group `murmurHash(key.hashCode()) % maxParallelism` and a key
group to subtask `keyGroup * parallelism / maxParallelism` (KeyGroupRangeAssignment,
MathUtils.murmurHash). `scalefold load` sends its keys `k0` .. `k<n-1>` in turn, so each
key carries the same share of the records and the busiest subtask, the one holding the
most keys, sets the rate the vertex keeps up with: a subtask's capacity times the keys
over the keys it holds.

    .venv/bin/python -m bench.key_skew --keys 64 --max-parallelism 8 --capacity 250

tests/flink/test_key_skew.py checks `subtask_of` against Flink's own classes.
"""

from __future__ import annotations

import argparse
from collections import Counter

_MASK = 0xFFFF_FFFF


def java_hash(text: str) -> int:
    """`String.hashCode()`, as a signed 32-bit int (text in the Basic Multilingual Plane)."""
    code = 0
    for char in text:
        code = (31 * code + ord(char)) & _MASK
    return _signed(code)


def murmur_hash(code: int) -> int:
    """Flink's `MathUtils.murmurHash(int)`: non-negative."""
    h = _mul(code, 0xCC9E2D51)
    h = _rotl(h, 15)
    h = _mul(h, 0x1B873593)
    h = _rotl(h, 13)
    h = (h * 5 + 0xE6546B64) & _MASK
    h ^= 4
    h ^= h >> 16  # bitMix: the finalizer
    h = _mul(h, 0x85EBCA6B)
    h ^= h >> 13
    h = _mul(h, 0xC2B2AE35)
    h ^= h >> 16
    signed = _signed(h)
    if signed >= 0:
        return signed
    return -signed if signed != -(2**31) else 0


def subtask_of(key: str, max_parallelism: int, parallelism: int) -> int:
    """The subtask of a vertex at `parallelism` that a String key is routed to."""
    group = murmur_hash(java_hash(key)) % max_parallelism
    return group * parallelism // max_parallelism


def keys_per_subtask(keys: int, max_parallelism: int, parallelism: int) -> list[int]:
    """How many of the keys `k0` .. `k<keys-1>` each subtask holds (by subtask index)."""
    held = Counter(subtask_of(f"k{n}", max_parallelism, parallelism) for n in range(keys))
    return [held[i] for i in range(parallelism)]


def ceiling(keys: int, max_parallelism: int, parallelism: int, capacity: float) -> float:
    """Records a second the vertex keeps up with when each key carries the same share and
    one subtask takes `capacity` records a second: its busiest subtask's bound."""
    return capacity * keys / max(keys_per_subtask(keys, max_parallelism, parallelism))


def _mul(a: int, b: int) -> int:
    return (a * b) & _MASK


def _rotl(value: int, bits: int) -> int:
    value &= _MASK
    return ((value << bits) | (value >> (32 - bits))) & _MASK


def _signed(value: int) -> int:
    return value - (1 << 32) if value & 0x8000_0000 else value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keys", type=int, default=64, help="the load's keys (`--keys`)")
    parser.add_argument("--max-parallelism", type=int, default=8, help="the vertex's key groups")
    parser.add_argument(
        "--capacity", type=float, default=None, help="records a second one subtask takes"
    )
    args = parser.parse_args(argv)
    print("parallelism  keys a subtask (busiest first)  busiest / even  ceiling rec/s")
    for p in range(1, args.max_parallelism + 1):
        held = keys_per_subtask(args.keys, args.max_parallelism, p)
        skew = max(held) / (args.keys / p)
        bound = (
            f"{ceiling(args.keys, args.max_parallelism, p, args.capacity):.0f}"
            if args.capacity
            else "-"
        )
        shown = ", ".join(str(n) for n in sorted(held, reverse=True))
        print(f"{p:>11}  {shown:<30}  {skew:>14.2f}  {bound:>13}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
