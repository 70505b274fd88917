"""Benchmark of the history's reading commands and of its freshness, on a running stack (not a test).

    make up          # or: scalefold local up --run-dir DIR, then --data-dir DIR/history
    .venv/bin/python -m bench.reading_bench [--runs 10] [--probes 20] [--job ID] [--json]
    .venv/bin/python -m bench.reading_bench --runs 0 --probes 20 --hogs 6 --fleet  # busy

**Commands.** Each run is a whole command as a user types it, a new Python
process timed from start to exit: `history summary --job ID`, `history summary`,
`history timeline --job ID` to a PNG and to an HTML file, and `history sql`
beside them, taken in turns so that the machine's load weighs on each alike.
Reported: the median and p95 of the wall time and the median CPU seconds of the
command's process (user + system: what a busy machine stretches the wall time by).

**Freshness.** Each probe produces one new rescale record (job `bench-freshness`,
a new rescale uuid) to the rescales topic, then polls until it is visible: in the
committed Delta table `rescales_latest` (what `summary` and `timeline` read),
and to `history sql` (the service's views over Spark Connect). Time zero is just
before the record is produced. Where the time goes, from the service's own
files: the latest query's checkpoint, its offsets file of the batch that took the
record (written as the batch starts: the wait for the trigger) and its commit file
(the batch's end), the Delta commits of `rescales_latest` and of `rescales` (the
tables query's, on its own slower trigger). Probes start at random moments, so they
sample the trigger's phase evenly. Reported: p50 and p95 of each. With `--hogs N`
(and `--fleet`) the probes run beside N busy processes (and the example logs produced
as new jobs: bench/load.py), after `--settle` seconds of that load; `--runs 0` skips
the commands.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path

from bench.load import Fleet, hogs
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts import records as r
from services.contracts.kafka import producer_config
from services.history import lake, synthetic
from services.history.cli import DEFAULT_DATA_DIR
from services.history.endpoint import reachable, read_url
from services.history.tables import LATEST_TABLE

PROBE_JOB = "bench-freshness"
CHECKPOINT = Path("checkpoints") / "latest"
"""The latest query's checkpoint (sources.RESCALES): its batches put a record in
`rescales_latest`."""


def timed(command: Sequence[str]) -> tuple[float, float]:
    """Wall seconds of one command from start to exit, and its process's CPU seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(command, check=True, capture_output=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return elapsed, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * fraction // 1))
    return ordered[int(rank) - 1]


def commands(data_dir: Path, job: str, out: Path, query: str) -> dict[str, list[str]]:
    base = [sys.executable, "-m", "services.cli", "history"]
    where = ["--data-dir", str(data_dir)]
    return {
        "summary --job": [*base, "summary", *where, "--job", job],
        "summary (fleet)": [*base, "summary", *where],
        "timeline png": [*base, "timeline", *where, "--job", job, "--out", str(out / "t.png")],
        "timeline html": [*base, "timeline", *where, "--job", job, "--out", str(out / "t.html")],
        "sql": [*base, "sql", *where, "--format", "csv", query],
    }


def bench_commands(data_dir: Path, job: str, query: str, runs: int) -> dict[str, dict[str, float]]:
    with tempfile.TemporaryDirectory() as out:
        todo = commands(data_dir, job, Path(out), query)
        for command in todo.values():  # warm-up: the OS's file cache, the server's JIT
            timed(command)
        measured: dict[str, list[tuple[float, float]]] = {name: [] for name in todo}
        for _ in range(runs):
            for name, command in todo.items():
                measured[name].append(timed(command))
    return {
        name: {
            "median_s": round(statistics.median(w for w, _ in pairs), 3),
            "p95_s": round(percentile([w for w, _ in pairs], 0.95), 3),
            "cpu_median_s": round(statistics.median(c for _, c in pairs), 3),
        }
        for name, pairs in measured.items()
    }


def _mtimes(directory: Path) -> dict[int, float]:
    """Batch number -> modification time (epoch s) of a checkpoint log's files."""
    found = {}
    for path in directory.iterdir() if directory.is_dir() else []:
        if path.name.isdigit():
            found[int(path.name)] = path.stat().st_mtime
    return found


def _commit_times(table: Path, since_ms: float) -> list[float]:
    """Epoch seconds of the table's Delta commits after `since_ms` (commitInfo.timestamp)."""
    times = []
    for path in sorted((table / "_delta_log").glob("*.json")):
        if path.stat().st_mtime * 1000 < since_ms - 1000:
            continue
        for line in path.read_text().splitlines():
            info = json.loads(line).get("commitInfo") if line.strip() else None
            if info and info["timestamp"] >= since_ms:
                times.append(info["timestamp"] / 1000)
    return sorted(times)


def service_jvm(data_dir: Path) -> int | None:
    """The process id of the history service's JVM (the child of DIR/history.pid)."""
    try:
        pid = int((data_dir.parent / "history.pid").read_text().split()[0])
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except (OSError, ValueError, IndexError):
        return None
    return next((int(c) for c in children if "java" in _command(int(c))), None)


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
    except OSError:
        return ""


def cpu_seconds(pid: int | None) -> float:
    """User + system CPU seconds the process has used (0 without one)."""
    if pid is None:
        return 0.0
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Probe:
    """Produces one record at a time and watches it arrive."""

    def __init__(self, settings: Settings, data_dir: Path, url: str) -> None:
        from confluent_kafka import Producer
        from pyspark.sql import SparkSession

        self.settings, self.data_dir = settings, data_dir
        self.codec = Codec(SchemaRegistry.load(settings.schemas_dir))
        self.producer = Producer(producer_config(settings))
        self.spark = SparkSession.builder.remote(url).getOrCreate()
        self.history = lake.Lake(data_dir)
        self.jvm = service_jvm(data_dir)

    def once(self, timeout: float = 120.0) -> dict[str, float]:
        rescale_uuid = str(uuid.uuid4())
        now_ms = int(time.time() * 1000)
        spans = [
            ("Executing", now_ms - 2_000, now_ms - 1_000),
            ("Restarting", now_ms - 1_000, now_ms),
        ]
        record = synthetic.rescale(PROBE_JOB, rescale_uuid, spans=spans, reason="SUCCEEDED")
        value = self.codec.encode(r.RESCALE, record)
        started_wall, started, cpu = time.time(), time.monotonic(), cpu_seconds(self.jvm)
        self.producer.produce(self.settings.topics.rescales, key=PROBE_JOB.encode(), value=value)
        self.producer.flush(30)
        acked = time.monotonic() - started
        deadline = started + timeout
        sql = (
            f"SELECT count(*) AS n FROM global_temp.rescales WHERE rescale_uuid = '{rescale_uuid}'"
        )
        delta = sql_seen = None
        while (delta is None or sql_seen is None) and time.monotonic() < deadline:
            if delta is None and self._in_delta(rescale_uuid):
                delta = time.monotonic() - started
            # only after the commit (the views cannot show it sooner): a query in the
            # service competes with the very batch being timed
            ready = delta is not None and sql_seen is None
            if ready and self.spark.sql(sql).first()["n"] > 0:  # type: ignore[index]
                sql_seen = time.monotonic() - started
            time.sleep(0.1)
        used = cpu_seconds(self.jvm) - cpu
        # not seen in time: counted as the timeout's length (the percentiles are then lower bounds)
        seen = {"acked": acked, "delta": delta or timeout, "sql": sql_seen or timeout}
        return {**seen, "service_cpu": used, **self._phases(started_wall)}

    def _in_delta(self, rescale_uuid: str) -> bool:
        if not self.history.committed(LATEST_TABLE):  # a fresh stack: no record written yet
            return False
        rows = self.history.rows(
            f"SELECT count(*) AS n FROM t WHERE job_id = '{PROBE_JOB}' "
            f"AND rescale_uuid = '{rescale_uuid}'",
            {"t": LATEST_TABLE},
        )
        return bool(rows[0]["n"])

    def _phases(self, started: float) -> dict[str, float]:
        """Seconds from the produce to the batch's start, its commits and its end."""
        checkpoint = self.data_dir / CHECKPOINT
        starts = sorted(t for t in _mtimes(checkpoint / "offsets").values() if t >= started)
        ends = sorted(t for t in _mtimes(checkpoint / "commits").values() if t >= started)
        tables = self.data_dir / "tables"
        raw = _commit_times(tables / "rescales", started * 1000)
        latest = _commit_times(tables / LATEST_TABLE, started * 1000)
        firsts = {"batch_start": starts, "rescales_commit": raw, "latest_commit": latest}
        found = {name: times[0] - started for name, times in firsts.items() if times}
        if ends:
            found["batch_end"] = ends[0] - started
        return found


def bench_freshness(
    settings: Settings, data_dir: Path, url: str, probes: int, timeout: float
) -> dict[str, dict[str, float]]:
    probe = Probe(settings, data_dir, url)
    probe.once(timeout)  # warm-up: the Connect session, the producer's connection
    idle = cpu_seconds(probe.jvm)
    time.sleep(10)
    seen: dict[str, list[float]] = {
        "service_idle_cpu_per_s": [(cpu_seconds(probe.jvm) - idle) / 10]
    }
    for _ in range(probes):
        time.sleep(random.uniform(0, 2))  # a random phase of the trigger
        for name, seconds in probe.once(timeout).items():
            seen.setdefault(name, []).append(seconds)
        print(
            f"reading_bench: probe {len(seen['delta'])}: {seen['delta'][-1]:.1f} s to Delta, "
            f"{seen['sql'][-1]:.1f} s to sql",
            file=sys.stderr,
            flush=True,
        )
    return {
        name: {
            "p50_s": round(statistics.median(values), 3),
            "p95_s": round(percentile(values, 0.95), 3),
            "max_s": round(max(values), 3),
            "n": len(values),
        }
        for name, values in seen.items()
    }


def _settings(data_dir: Path) -> Settings:
    """The stack's broker: SCALEFOLD_* if set, else the address its run directory names."""
    try:
        fallback = (data_dir.parent / "bootstrap").read_text().strip() or None
    except OSError:
        fallback = None
    return Settings.from_env(os.environ, bootstrap_fallback=fallback)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--probes", type=int, default=20, help="freshness probes; 0: none")
    parser.add_argument("--job", default="payments", help="the job summary and timeline draw")
    parser.add_argument("--query", default="SELECT job_id, total, completed FROM job_summary")
    parser.add_argument("--data-dir", type=Path, default=DEFAULT_DATA_DIR)
    parser.add_argument(
        "--timeout", type=float, default=120.0, help="seconds a probe waits at most"
    )
    parser.add_argument("--json", action="store_true", help="one JSON line of results")
    parser.add_argument(
        "--hogs", type=int, default=0, help="busy processes beside the probes (bench/load.py)"
    )
    parser.add_argument(
        "--fleet", action="store_true", help="the example logs as new jobs beside the probes"
    )
    parser.add_argument("--settle", type=float, default=30.0, help="seconds of that load first")
    args = parser.parse_args()

    url = read_url(args.data_dir)
    if url is None or not reachable(url):
        print(
            f"reading_bench: no history service runs for {args.data_dir} (make up)", file=sys.stderr
        )
        return 2
    load = os.getloadavg()[0]
    result: dict[str, object] = {"bench": "history_reading", "runs": args.runs, "job": args.job}
    if args.runs:
        result["commands"] = bench_commands(args.data_dir, args.job, args.query, args.runs)
        print(f"reading_bench: {json.dumps(result['commands'])}", file=sys.stderr, flush=True)
    if args.probes:
        settings = _settings(args.data_dir)
        with ExitStack() as loaded:
            if args.hogs:
                loaded.enter_context(hogs(args.hogs, args.settle + args.probes * args.timeout))
            if args.fleet:
                loaded.enter_context(Fleet(settings))
            if args.hogs or args.fleet:
                time.sleep(args.settle)
                result["hogs"], result["fleet"] = args.hogs, args.fleet
            fresh = bench_freshness(settings, args.data_dir, url, args.probes, args.timeout)
        result["freshness"] = fresh
    result["load_average_1m"] = [round(load, 1), round(os.getloadavg()[0], 1)]
    if args.json:
        print(json.dumps(result))
        return 0
    for name, row in (result.get("commands") or {}).items():  # type: ignore[attr-defined]
        print(
            f"{name:16} median {row['median_s']:.2f} s  p95 {row['p95_s']:.2f} s  "
            f"CPU {row['cpu_median_s']:.2f} s"
        )
    for name, row in (result.get("freshness") or {}).items():  # type: ignore[attr-defined]
        print(f"fresh {name:16} p50 {row['p50_s']:.2f} s  p95 {row['p95_s']:.2f} s  (n={row['n']})")
    print(f"load average {result['load_average_1m']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
