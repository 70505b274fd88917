"""Benchmark of the bridge's freshness (not a test): from Flink recording a rescale to the
rescale being queryable in the history's `flink_rescales` view (issue 37: <= 15 s at the
default poll interval).

    .venv/bin/scalefold local up --flink --flink-taskmanagers 4
    .venv/bin/scalefold flink submit --parallelism 2
    .venv/bin/python -m bench.bridge_freshness [--rescales 4] [--run-dir .run/local] [--json]
    .venv/bin/python -m bench.bridge_freshness --hogs 2 --fleet --settle 45   # on a busy machine

On the running local stack (its bridge polls the local Flink every 2 s), each round adds
a TaskManager (`scalefold flink taskmanager add`; with `--bounds A B`, sets the job's
requirements to A, B, A, ... instead: `scalefold flink requirements`) and waits for the
new rescale in the JobManager's `/rescales/history` to end (its `endTimestampInMillis`:
when Flink recorded it complete). Then, per rescale:

- `committed_s`: from Flink's end timestamp until the history's REST API (`history run`
  serves it; it reads the committed `flink_rescales_latest` table, the table behind the
  `flink_rescales` view, with delta-rs in milliseconds) first answers the rescale's
  `/details` with `?source=flink` as ended (its `endTimestampInMillis`; a revision the
  bridge saw in progress does not count), asked every 0.25 s: when it became queryable;
- `sql_s`: from the same end timestamp until a `scalefold history sql` query over
  `flink_rescales`, started at that moment, printed the row (`sql_query_s` of it the
  query's own time, mostly the CLI's start and Spark Connect).

With `--hogs N` busy processes and, with `--fleet`, the example logs produced as new jobs
onto the stack's broker (bench/load.py), for `--settle` seconds before the first round and
until the last ends, as reading_bench does for the scheduler's rescales.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from bench.load import Fleet, hogs, load_average
from services.contracts import Settings
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


def queried(uuid: str, run_dir: Path) -> bool:
    """Whether a `history sql` query over `flink_rescales` returns the rescale."""
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
    return uuid in answer.stdout


def served(history_rest: str, jid: str, uuid: str) -> bool:
    """Whether the history's REST API has Flink's record of the rescale as ended (committed):
    the bridge may have kept a revision of it in progress before, which does not count."""
    url = f"{history_rest}/jobs/{jid}/rescales/details/{uuid}?source=flink"
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return json.load(answer).get("endTimestampInMillis") is not None
    except urllib.error.HTTPError:
        return False


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
    uuid, history_rest = new["rescaleUuid"], (run_dir / "history" / "rest.url").read_text().strip()
    while not served(history_rest, jid, uuid):
        if time.monotonic() > give_up:
            raise SystemExit(f"rescale {uuid} not in flink_rescales after {deadline_s} s")
        time.sleep(0.25)
    committed = time.time()
    while not queried(uuid, run_dir):
        if time.monotonic() > give_up:
            raise SystemExit(f"rescale {uuid} not returned by `history sql` in {deadline_s} s")
    answered = time.time()
    return {
        "rescaleUuid": uuid,
        "triggerCause": new["triggerCause"],
        "committed_s": round(committed - recorded, 2),
        "sql_s": round(answered - recorded, 2),
        "sql_query_s": round(answered - committed, 2),
    }


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
    parser.add_argument("--hogs", type=int, default=0, help="busy processes beside the rounds")
    parser.add_argument(
        "--fleet", action="store_true", help="the example logs as new jobs beside the rounds"
    )
    parser.add_argument("--settle", type=float, default=30.0, help="seconds of that load first")
    args = parser.parse_args()
    flink = rest(args.run_dir)
    jid = running_job(flink)
    actions = [
        ["requirements", "--job", jid, args.bounds[i % 2]]
        if args.bounds
        else ["taskmanager", "add"]
        for i in range(args.rescales)
    ]
    loads = [load_average()]
    with ExitStack() as busy:
        if args.hogs:
            busy.enter_context(hogs(args.hogs, args.settle + 200.0 * len(actions)))
        if args.fleet:
            bootstrap = (args.run_dir / "bootstrap").read_text().strip()
            busy.enter_context(Fleet(Settings().with_overrides(bootstrap_servers=bootstrap)))
        if args.hogs or args.fleet:
            time.sleep(args.settle)
        rounds = []
        for action in actions:
            loads.append(load_average())
            rounds.append(one_round(flink, jid, args.run_dir, action))
    if args.json:
        print(json.dumps({"rounds": rounds, "load_average_1m": loads, "hogs": args.hogs}))
        return
    print(f"load average (1 min) before each round: {' '.join(f'{x:.1f}' for x in loads)}")
    for r in rounds:
        print(
            f"{r['rescaleUuid']} {r['triggerCause']}: queryable {r['committed_s']:.1f} s after "
            f"Flink recorded it; `history sql` answered {r['sql_s']:.1f} s after "
            f"(the query {r['sql_query_s']:.1f} s)"
        )
    for key, what in (("committed_s", "queryable"), ("sql_s", "history sql answered")):
        spread = sorted(r[key] for r in rounds)
        print(f"{what}: median {statistics.median(spread):.1f} s, max {spread[-1]:.1f} s")


if __name__ == "__main__":
    main()
