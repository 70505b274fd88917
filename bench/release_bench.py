"""Benchmark (not a test): a scheduler worker's memory and restart time as jobs come and end.

    .venv/bin/scalefold local run --run-dir .run/bench -- .venv/bin/python -m bench.release_bench

Rounds of `--jobs` new jobs, each submitted, given two TaskManagers and cancelled (so
Finished), dated on the wall clock, are produced onto a fresh topic while one worker
(RocksDB tables, the default) folds them. Once a round is folded (and, where jobs are
released, released), the worker's RSS, the size of its RocksDB directory and the jobs
it keeps decoded are printed. Two settings, each with its own topic and worker:
`released` (`jobstore.expiration-time` 1 s: the state of a finished job is let go a
second after it finished) and `kept` (a day: every finished job's state stays, as
before scalefold released them). After the last round, kill -9 -> /health ready again.
Memory bounded by live jobs shows as a flat `released` row against a growing `kept` one.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.proc import memory_mib
from bench.scheduler_bench import EVENTS_IN, fresh, killed_and_ready, metrics_of, produce_all
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts.events import (
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    TaskManagerRegistered,
    VertexSpec,
)
from services.contracts.jobconfig import JOB_STORE_EXPIRATION
from tests.integration.scheduler_support import SchedulerProcess

RELEASED = "scalefold_scheduler_jobs_released_total"
SETTINGS = {"released": "1", "kept": "86400"}
VERTICES = (
    VertexSpec("source", "Source", "g", "default", 2, 8),
    VertexSpec("map", "Map", "g", "default", 2, 8),
)


def round_events(index: int, jobs: int, expiration: str) -> list[Event]:
    """Round `index`'s jobs: each submitted, two TaskManagers, cancelled."""
    now = int(time.time() * 1000)
    config = ((JOB_STORE_EXPIRATION, expiration),)
    events: list[Event] = []
    for i in range(jobs):
        job = f"r{index}-{i}"
        events += [
            JobSubmitted(job, now, job, VERTICES, None, config),
            TaskManagerRegistered(job, now + 1, "tm-1", 1, None),
            TaskManagerRegistered(job, now + 2, "tm-2", 1, None),
            JobLifecycle(job, now + 3, JobEventKind.CANCEL),
        ]
    return events


def _size_mib(directory: Path) -> float:
    return sum(f.stat().st_size for f in directory.rglob("*") if f.is_file()) / 2**20


def run(
    base: Settings,
    codec: Codec,
    setting: str,
    rounds: int,
    jobs: int,
    *,
    extra: tuple[str, ...] = (),
) -> list[dict[str, Any]]:
    """`extra`: the worker's further arguments (e.g. `--store memory://`)."""
    settings = fresh(base)
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as data:
        worker = SchedulerProcess(settings, Path(data), *extra).start()
        try:
            worker.wait_ready(300)
            produced = 0
            for index in range(1, rounds + 1):
                events = round_events(index, jobs, SETTINGS[setting])
                produce_all(settings, codec, events)
                produced += len(events)
                began = time.monotonic()
                while time.monotonic() < began + 600:
                    metrics = metrics_of(worker)
                    folded = metrics.get(EVENTS_IN, 0) >= produced
                    released = metrics.get(RELEASED, 0) >= index * jobs
                    if folded and (released or setting == "kept"):
                        break
                    time.sleep(0.5)
                time.sleep(2)  # the last batch's table writes
                assert worker.process is not None
                rss, peak = memory_mib(worker.process.pid)
                metrics = metrics_of(worker)
                rows.append(
                    {
                        "setting": setting,
                        "worker": " ".join(extra),
                        "round": index,
                        "jobs_ended": index * jobs,
                        "jobs_released": int(metrics.get(RELEASED, 0)),
                        "jobs_decoded": int(metrics.get("scalefold_scheduler_jobs", 0)),
                        "rss_mib": round(rss, 1),
                        "rss_peak_mib": round(peak, 1),
                        "rocksdb_mib": round(_size_mib(Path(data)), 1),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
            ready, _ = killed_and_ready(worker)
        finally:
            worker.stop()
    restart = {"setting": setting, "restart_s": round(ready, 1), "jobs_ended": rounds * jobs}
    print(json.dumps(restart), flush=True)
    return [*rows, restart]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=5, help="rounds of new jobs (default 5)")
    parser.add_argument("--jobs", type=int, default=4_000, help="jobs per round (default 4000)")
    parser.add_argument(
        "--setting", action="append", choices=tuple(SETTINGS), help="only this one (repeatable)"
    )
    parser.add_argument(
        "--worker",
        default="",
        metavar="ARGS",
        help="further arguments of the scheduler worker, e.g. '--store memory://'",
    )
    args = parser.parse_args()
    base = Settings(bootstrap_servers=os.environ["SCALEFOLD_BOOTSTRAP_SERVERS"])
    codec = Codec(SchemaRegistry.load())
    for setting in args.setting or tuple(SETTINGS):
        run(base, codec, setting, args.rounds, args.jobs, extra=tuple(shlex.split(args.worker)))


if __name__ == "__main__":
    main()
