"""Benchmark of `scalefold history sql` against the running stack (not a test).

    make up          # the local stack; its history service serves the SQL endpoint
    .venv/bin/python -m bench.sql_bench [--runs 20] [--query "SELECT ..."] [--json]

Each run is the whole command as a user types it (a new Python process: imports,
the Connect session, the query, the printed answer), timed from start to exit.
It fails when no history service runs for --data-dir: then the command would
time a local Spark session instead (`--fallback` times that on purpose).

Prints the median and p99 in seconds; with --json, one JSON line instead.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from services.history.cli import DEFAULT_DATA_DIR
from services.history.endpoint import reachable, read_url

DEFAULT_QUERY = "SELECT job_id, total, completed, duration_p50_ms FROM job_summary"


def history_sql(data_dir: Path, query: str) -> tuple[float, float]:
    """Seconds one `scalefold history sql` takes from start to exit, and the CPU seconds
    its process used (user + system: what a busy machine stretches the first by)."""
    command = [sys.executable, "-m", "services.cli", "history", "sql", "--data-dir", str(data_dir)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([*command, "--format", "csv", query], check=True, capture_output=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile (p99 of fewer than 100 runs is their maximum)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--query", default=DEFAULT_QUERY)
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument("--fallback", action="store_true", help="time the local-Spark fallback")
    parser.add_argument("--json", action="store_true", help="one JSON line of results")
    args = parser.parse_args()

    url = read_url(args.data_dir)
    served = url is not None and reachable(url)
    if served == args.fallback:
        want = "no running history service" if args.fallback else "a running history service"
        print(f"sql_bench: needs {want} for {args.data_dir} (make up / make down)", file=sys.stderr)
        return 2
    history_sql(args.data_dir, args.query)  # warm-up: the OS's file cache, the server's JIT
    measured = [history_sql(args.data_dir, args.query) for _ in range(args.runs)]
    seconds = [elapsed for elapsed, _ in measured]
    result = {
        "bench": "history_sql",
        "path": "fallback" if args.fallback else "endpoint",
        "query": args.query,
        "runs": args.runs,
        "median_s": round(statistics.median(seconds), 3),
        "p99_s": round(percentile(seconds, 0.99), 3),
        "max_s": round(max(seconds), 3),
        "client_cpu_median_s": round(statistics.median(cpu for _, cpu in measured), 3),
        "load_average_1m": round(os.getloadavg()[0], 1),
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"history sql via the {result['path']}: {args.runs} runs, ", end="")
        print(f"median {result['median_s']:.2f} s, p99 {result['p99_s']:.2f} s ", end="")
        print(
            f"(client CPU {result['client_cpu_median_s']:.2f} s, load {result['load_average_1m']})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
