"""Benchmark of the rescale REST API and its web page (not a test): latency at 100,000 rescales.

    .venv/bin/python -m bench.rest_bench [--jobs 1000] [--rescales-per-job 100]
        [--data DIR] [--requests 300] [--json] [--url URL]

1. Tables: `--jobs` x `--rescales-per-job` synthetic rescales (`synthetic.revisions`:
   the final revision of each, completed, with outcomes varied) are written once into
   DIR (default `.run/bench-rest`) through the history job's own decode and table
   transforms with a local Spark, then compacted (OPTIMIZE) as the service's upkeep
   keeps them. A DIR that holds them already is reused (delete it to rebuild).
2. Serve: `scalefold history serve --data-dir DIR` runs as its own process on a free
   loopback port (or `--url` names a server already running over DIR's tables); the
   first requests (which read the tables) are timed apart.
3. Requests: `--requests` times each of a random job's `/jobs/<id>/rescales/history`,
   a random rescale's `/details/<uuid>`, the job's web page `/web/jobs/<id>` and the
   timeline chart in its frame, a rescale's page, the fleet page `/web/`, one at a time
   over HTTP (urllib, a new connection each, as a browser's first visit), and reports
   p50/p95/max in ms.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from services.history import synthetic
from services.history.paths import Layout
from services.history.restapi.fixtures import write_batches
from services.history.sinklog import is_delta
from services.history.tables import LATEST_TABLE, TABLES

ROOT = Path(__file__).resolve().parents[1]
T0 = 1_795_000_000_000
REASONS = ("SUCCEEDED",) * 7 + (
    "EXCEPTION_OCCURRED",
    "NO_RESOURCES_OR_PARALLELISMS_CHANGE",
    "JOB_FAILED",
)


def records(jobs: int, per_job: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """The final revision of each synthetic rescale, job after job, outcomes varied."""
    rng = random.Random(seed)
    for job in range(jobs):
        job_id = f"job-{job:04d}"
        for number in range(per_job):
            start = T0 + number * 60_000 + job * 100
            final = synthetic.revisions(job_id, number, start, rng, 2 + (number + job) % 5)[-1]
            reason = REASONS[(number * 7 + job) % len(REASONS)]
            yield {
                **final,
                "terminatedReason": reason,
                "terminalState": synthetic.TERMINAL_STATE[reason],
                "rescaleAttemptId": number + 1,
            }


def build(data_dir: Path, jobs: int, per_job: int) -> None:
    """Write the tables with a local Spark and compact them."""
    from services.contracts import Codec, SchemaRegistry
    from services.history.spark import history_session
    from services.history.upkeep import optimize
    from services.localstack.jars import spark_connector_jars
    from services.localstack.layout import cache_dir

    spark = history_session(spark_connector_jars(cache_dir(os.environ), print), "local[2]")
    try:
        started = time.monotonic()
        written = write_batches(
            spark, Codec(SchemaRegistry.load()), records(jobs, per_job), data_dir, 25_000
        )
        layout = Layout(data_dir)
        for name in (*TABLES, LATEST_TABLE):
            optimize(spark, layout.table(name))
        print(f"wrote {written} rescales in {time.monotonic() - started:.0f} s", file=sys.stderr)
    finally:
        spark.stop()


def _get(url: str) -> tuple[float, int]:
    started = time.perf_counter()
    with urllib.request.urlopen(url, timeout=60) as answer:
        size = len(answer.read())
    return (time.perf_counter() - started) * 1000, size


def _serve(data_dir: Path, port_file: Path) -> subprocess.Popen[bytes]:
    command = [
        str(ROOT / ".venv" / "bin" / "scalefold"),
        "history",
        "serve",
        "--data-dir",
        str(data_dir),
        "--port",
        "0",
        "--port-file",
        str(port_file),
    ]
    return subprocess.Popen(command, cwd=ROOT)


def _wait_port(port_file: Path, server: subprocess.Popen[bytes]) -> int:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if port_file.exists() and port_file.read_text().strip():
            return int(port_file.read_text())
        if server.poll() is not None:
            raise SystemExit(f"the server exited with {server.returncode}")
        time.sleep(0.1)
    raise SystemExit("the server did not write its port within 60 s")


def _stats(name: str, millis: list[float]) -> dict[str, Any]:
    ordered = sorted(millis)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {
        "request": name,
        "n": len(ordered),
        "p50_ms": round(statistics.median(ordered), 1),
        "p95_ms": round(p95, 1),
        "max_ms": round(ordered[-1], 1),
    }


def measure(base: str, jobs: int, per_job: int, requests: int) -> list[dict[str, Any]]:
    rng = random.Random(11)
    job = "job-0000"
    firsts = {
        "first history (reads rescales_latest)": f"/jobs/{job}/rescales/history",
        "first details": f"/jobs/{job}/rescales/details/"
        + synthetic.stable_uuid(job, "rescale", 0),
    }
    results: list[dict[str, Any]] = [
        {"request": name, "n": 1, "p50_ms": round(_get(base + path)[0], 1)}
        for name, path in firsts.items()
    ]

    def uuid(job: str) -> str:
        return synthetic.stable_uuid(job, "rescale", rng.randrange(per_job))

    paths: dict[str, Callable[[str], str]] = {
        "history": lambda job: f"/jobs/{job}/rescales/history",
        "history?limit=100": lambda job: f"/jobs/{job}/rescales/history?limit=100",
        "summary": lambda job: f"/jobs/{job}/rescales/summary",
        "details": lambda job: f"/jobs/{job}/rescales/details/{uuid(job)}",
        "web job page": lambda job: f"/web/jobs/{job}",
        "web job timeline (its frame)": lambda job: f"/web/jobs/{job}/timeline",
        "web rescale page": lambda job: f"/web/jobs/{job}/rescales/{uuid(job)}",
        "web fleet page": lambda _job: "/web/",
    }
    for name, path in paths.items():
        times = [_get(base + path(f"job-{rng.randrange(jobs):04d}"))[0] for _ in range(requests)]
        results.append(_stats(name, times))
    return results


def _serve_and_measure(args: argparse.Namespace) -> list[dict[str, Any]]:
    port_file = args.data / f"serve-{os.getpid()}.port"  # two runs at once do not mix
    port_file.unlink(missing_ok=True)
    server = _serve(args.data, port_file)
    try:
        base = f"http://127.0.0.1:{_wait_port(port_file, server)}"
        return measure(base, args.jobs, args.rescales_per_job, args.requests)
    finally:
        server.terminate()
        server.wait(30)
        port_file.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000)
    parser.add_argument("--rescales-per-job", type=int, default=100)
    parser.add_argument("--data", type=Path, default=ROOT / ".run" / "bench-rest")
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--json", action="store_true", help="one JSON object per row")
    parser.add_argument(
        "--url",
        help="measure this running server (serving DIR's tables, e.g. an older checkout's "
        "`history serve`) instead of starting one",
    )
    args = parser.parse_args(argv)
    if not is_delta(Layout(args.data).table(LATEST_TABLE)):
        build(args.data, args.jobs, args.rescales_per_job)
    if args.url:
        results = measure(args.url.rstrip("/"), args.jobs, args.rescales_per_job, args.requests)
    else:
        results = _serve_and_measure(args)
    for row in results:
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
