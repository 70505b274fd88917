"""Benchmark of the bridge's freshness (not a test): from Flink recording a rescale to the
rescale being queryable in the history's `flink_rescales` view (issue 37: <= 15 s at the
default poll interval).

    .venv/bin/scalefold local up --flink --flink-taskmanagers 1
    .venv/bin/scalefold flink submit
    .venv/bin/python -m bench.bridge_freshness [--rescales 3] [--run-dir .run/local] [--json]

On the running local stack (its bridge polls the local Flink every 5 s), each round adds
a TaskManager (`scalefold flink taskmanager add`; with `--bounds A B`, sets the job's
requirements to A, B, A, ... instead: `scalefold flink requirements`), waits for the new
rescale in the JobManager's `/rescales/history` to end (its `endTimestampInMillis`:
when Flink recorded it complete), then asks `scalefold history sql` for that rescale's
row in `flink_rescales` until it is there. Reported per rescale: the time from Flink's
end timestamp to the start of the first query that found the row (the row was
committed before then... or during it: the upper bound is the query's end, also given)
and the query's own duration.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from services.contracts.flinkrest import FlinkRest
from services.localstack.flinkstack import cluster_dir
from services.localstack.layout import RUN_ROOT

ROOT = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-m", "services.cli"]


def rest(run_dir: Path) -> FlinkRest:
    url = (cluster_dir(run_dir) / "rest.url").read_text().strip()
    return FlinkRest(url, 10.0)


def running_job(flink: FlinkRest) -> str:
    jobs = [j["jid"] for j in flink.jobs() if j["state"] in ("CREATED", "RUNNING")]
    if not jobs:
        raise SystemExit("no running Flink job: `scalefold flink submit` first")
    return str(jobs[0])


def queried(uuid: str, run_dir: Path) -> tuple[bool, float, float]:
    """Whether flink_rescales has the rescale: (found, query start, query end) epoch s."""
    started = time.time()
    answer = subprocess.run(
        [
            *CLI,
            "history",
            "sql",
            "--data-dir",
            str(run_dir / "history"),  # the stack's own history, not the default stack's
            "--format",
            "json",
            f"SELECT rescale_uuid FROM flink_rescales WHERE rescale_uuid = '{uuid}'",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
    )
    return uuid in answer.stdout, started, time.time()


def one_round(
    flink: FlinkRest, jid: str, run_dir: Path, action: list[str], deadline_s: float = 180.0
) -> dict[str, Any]:
    # the rescales ended before; one in progress then (e.g. the initial schedule waiting
    # for slots) counts when it ends
    before = {r["rescaleUuid"] for r in flink.rescale_history(jid) if r.get("endTimestampInMillis")}
    subprocess.run(
        [*CLI, "flink", *action, "--run-dir", str(run_dir)],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    give_up = time.monotonic() + deadline_s
    new: dict[str, Any] | None = None
    while new is None and time.monotonic() < give_up:
        fresh = [r for r in flink.rescale_history(jid) if r["rescaleUuid"] not in before]
        done = [r for r in fresh if r.get("endTimestampInMillis")]
        new = done[0] if done else None
        time.sleep(0.2)
    if new is None:
        raise SystemExit("no new rescale ended within the deadline")
    recorded = new["endTimestampInMillis"] / 1000
    while time.monotonic() < give_up:
        found, started, ended = queried(new["rescaleUuid"], run_dir)
        if found:
            return {
                "rescaleUuid": new["rescaleUuid"],
                "triggerCause": new["triggerCause"],
                "to_query_start_s": round(started - recorded, 2),
                "to_query_end_s": round(ended - recorded, 2),
                "query_s": round(ended - started, 2),
            }
    raise SystemExit(f"rescale {new['rescaleUuid']} not in flink_rescales after {deadline_s} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rescales", type=int, default=3)
    parser.add_argument("--run-dir", type=Path, default=RUN_ROOT / "local")
    parser.add_argument(
        "--bounds",
        nargs=2,
        metavar="VERTEX=LOWER:UPPER",
        help="instead of adding a TaskManager, set these requirements in turn (e.g. "
        "Bucket=1:4 Bucket=1:8): a job already at its upper bound, as the local stack's "
        "history provisions it, rescales only so",
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    flink = rest(args.run_dir)
    jid = running_job(flink)
    actions = [
        ["requirements", "--job", jid, args.bounds[i % 2]]
        if args.bounds
        else ["taskmanager", "add"]
        for i in range(args.rescales)
    ]
    rounds = [one_round(flink, jid, args.run_dir, action) for action in actions]
    if args.json:
        print(json.dumps(rounds))
        return
    for r in rounds:
        print(
            f"{r['rescaleUuid']} {r['triggerCause']}: queryable {r['to_query_start_s']:.1f} s "
            f"after Flink recorded it (query took {r['query_s']:.1f} s; "
            f"{r['to_query_end_s']:.1f} s to its answer)"
        )


if __name__ == "__main__":
    main()
