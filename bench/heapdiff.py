"""What grew in a worker's heap: the first and the last of its snapshots compared.

    .venv/bin/python -m bench.heapdiff DIR [--top 25]

DIR holds the snapshots a worker wrote with `SCALEFOLD_HEAP_SNAPSHOTS=DIR`
(services/scheduler/adapters/heap.py)."""

from __future__ import annotations

import argparse
import tracemalloc
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--top", type=int, default=25, help="sites to print (25)")
    parser.add_argument("--first", type=int, default=0, help="index of the baseline (0)")
    args = parser.parse_args(argv)
    paths = sorted(args.directory.glob("heap-*.tracemalloc"))
    if len(paths) < 2:
        parser.error(f"{args.directory}: fewer than two snapshots")
    first = tracemalloc.Snapshot.load(str(paths[args.first]))
    last = tracemalloc.Snapshot.load(str(paths[-1]))
    total = sum(s.size for s in last.statistics("filename"))
    print(f"{paths[args.first].name} -> {paths[-1].name}: {total / 2**20:.1f} MiB traced now")
    for stat in last.compare_to(first, "traceback")[: args.top]:
        print(f"\n{stat.size_diff / 2**10:+,.0f} KiB in {stat.count_diff:+,} blocks")
        for line in stat.traceback.format(limit=6):
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
