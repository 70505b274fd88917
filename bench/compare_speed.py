"""Benchmark of `flink compare` beside `history summary` on the same history (not a test).

    .venv/bin/python -m bench.compare_speed [--runs 10] [--jobs 20] [--json]
    .venv/bin/python -m bench.compare_speed --data-dir .run/local/history --job <Flink job id>

Each run is a whole command as a user types it, a new Python process timed from start
to exit, taken in turns: `flink compare --job J`, `flink compare` (every job), and the
ceiling beside them, `history summary --job J --source flink` (the same committed
Delta tables read with delta-rs, no pairing) and `python -c pass` (the interpreter's
start). Reported: median and p95 wall time, median CPU seconds, and each command's
median over the summary's.

Without `--data-dir` the history is built first in a temporary directory (Spark, once):
`--jobs` Flink jobs of `--per-job` rescales each (services/history/synthetic.py's fleet,
as Flink's records) and scalefold's predictions of them, every third predicted IGNORED
(a disagreement, so the pairs' fields are compared and printed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.reading_bench import percentile, timed

CLUSTER = "local"


def flink_of(record: dict[str, Any], job: str) -> dict[str, Any]:
    """The FlinkRescale record a real Flink would have for a scalefold rescale record:
    the same fields, resource profiles left out (REST names them otherwise)."""
    slots = [
        {**s, "requestResourceProfile": None, "acquiredResourceProfile": None}
        for s in record["slots"]
    ]
    kept: tuple[str, ...] = ("rescaleUuid", "resourceRequirementsUuid", "rescaleAttemptId")
    kept += ("vertices", "schedulerStates", "startTimestampInMillis", "endTimestampInMillis")
    kept += ("triggerCause", "terminalState", "terminatedReason", "revision")
    return {
        "cluster": CLUSTER,
        "jobId": job,
        "jobName": "bench",
        **{k: record[k] for k in kept},
        "slots": slots,
        "observedAtMillis": record["updatedAtMillis"],
        "unknownFields": {},
    }


def build(data_dir: Path, jobs: int, per_job: int) -> str:
    """A history of `jobs` Flink jobs (`per_job` rescales each: services.history.synthetic's
    fleet) and scalefold's predictions of them, every third predicted IGNORED (a
    disagreement to print); the first job's Flink id."""
    import os

    from services.contracts import Codec, SchemaRegistry
    from services.history.paths import Layout
    from services.history.restapi.fixtures import write_flink_records, write_records
    from services.history.spark import history_session
    from services.history.synthetic import fleet
    from services.localstack.jars import spark_connector_jars
    from services.localstack.layout import cache_dir

    latest: dict[str, dict[str, Any]] = {}
    for record in fleet(jobs, per_job, start_ms=1_795_000_000_000):
        latest[record["rescaleUuid"]] = record  # each rescale's last revision
    flink, predicted = [], []
    for number, record in enumerate(latest.values()):
        job = f"{int(record['jobId'].split('-')[1]) + 1:032x}"
        flink.append(flink_of(record, job))
        ours = {**record, "jobId": f"{CLUSTER}.{job}", "rescaleUuid": f"p-{record['rescaleUuid']}"}
        if number % 3 == 2:
            ours |= {
                "terminalState": "IGNORED",
                "terminatedReason": "NO_RESOURCES_OR_PARALLELISMS_CHANGE",
            }
        predicted.append(ours)
    spark = history_session(spark_connector_jars(cache_dir(os.environ), print), "local[2]")
    try:
        codec = Codec(SchemaRegistry.load())
        write_flink_records(spark, codec, flink, Layout(data_dir))
        write_records(spark, codec, predicted, Layout(data_dir))
    finally:
        spark.stop()
    return f"{1:032x}"


def bench(data_dir: Path, job: str, runs: int) -> dict[str, dict[str, float]]:
    cli = [sys.executable, "-m", "services.cli"]
    where = ["--data-dir", str(data_dir)]
    todo = {
        "flink compare --job": [*cli, "flink", "compare", *where, "--job", job],
        "flink compare (all)": [*cli, "flink", "compare", *where],
        "history summary --job (ceiling)": [
            *cli,
            "history",
            "summary",
            *where,
            "--job",
            job,
            "--source",
            "flink",
        ],
        "python -c pass": [sys.executable, "-c", "pass"],
    }
    for command in todo.values():  # warm-up: the OS's file cache
        timed(command)
    measured: dict[str, list[tuple[float, float]]] = {name: [] for name in todo}
    for _ in range(runs):
        for name, command in todo.items():
            measured[name].append(timed(command))
    ceiling = statistics.median(w for w, _ in measured["history summary --job (ceiling)"])
    return {
        name: {
            "median_s": round(statistics.median(w for w, _ in pairs), 3),
            "p95_s": round(percentile([w for w, _ in pairs], 0.95), 3),
            "cpu_median_s": round(statistics.median(c for _, c in pairs), 3),
            "over_summary": round(statistics.median(w for w, _ in pairs) / ceiling, 2),
        }
        for name, pairs in measured.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="an existing history (else one is built)")
    parser.add_argument("--job", help="the Flink job id to compare (with --data-dir)")
    parser.add_argument("--jobs", type=int, default=20, help="Flink jobs of the built history")
    parser.add_argument("--per-job", type=int, default=5, help="rescales of each built job")
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        if args.data_dir is None:
            data_dir = Path(scratch) / "history"
            job = build(data_dir, args.jobs, args.per_job)
        else:
            if not args.job:
                parser.error("--data-dir needs --job")
            data_dir, job = args.data_dir, args.job
        results = bench(data_dir, job, args.runs)
    if args.json:
        print(json.dumps(results, indent=2))
        return
    for name, figures in results.items():
        print(
            f"{name:<34} median {figures['median_s']:6.3f} s  p95 {figures['p95_s']:6.3f} s  "
            f"cpu {figures['cpu_median_s']:6.3f} s  x{figures['over_summary']} of the summary"
        )


if __name__ == "__main__":
    main()
