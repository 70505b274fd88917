"""`scalefold actuator` and `scalefold cluster ...` (the embedded cluster's operations)."""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.actuator import flinkargs
from services.contracts.access import EXIT_UNREACHABLE
from services.localstack.layout import RUN_ROOT

if TYPE_CHECKING:
    from services.clicontext import Context

PORT_FILE = RUN_ROOT / "local" / "actuator.port"
FAULT_PLAN_EXAMPLE = '[{"at": 30, "fault": "kill-taskmanager", "job": "j1"}, {"at": 60, "fault": "fail-checkpoints", "job": "j1", "count": 3}]'


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    actuator = commands.add_parser(
        "actuator",
        help="run the actuator with the embedded cluster (TaskManagers and a job runtime)",
        description="Apply scaling commands to the embedded cluster (each once, with one "
        "outcome), and play the runtime of jobs whose scheduler runs with "
        "scalefold.runtime.mode=external: create and cancel execution graphs, complete "
        "checkpoints at the job's interval. Control endpoint on 127.0.0.1 (see `scalefold cluster`).",
    )
    actuator.add_argument("--web-host", default="127.0.0.1")
    actuator.add_argument("--web-port", type=int, default=6067)
    actuator.add_argument("--provisioning-delay", type=float, default=3.0, metavar="SECONDS")
    actuator.add_argument("--creation-delay", type=float, default=0.3, metavar="SECONDS")
    actuator.add_argument("--cancellation-delay", type=float, default=1.5, metavar="SECONDS")
    actuator.add_argument("--slots-per-taskmanager", type=int, default=1)
    actuator.add_argument("--seed", type=int, help="make fault targets and delays reproducible")
    actuator.add_argument(
        "--faults", metavar="PLAN.json", help=f"scheduled faults, e.g. {FAULT_PLAN_EXAMPLE}"
    )
    actuator.add_argument(
        "--apply-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait between consuming a command and applying it (to test crash safety)",
    )
    flinkargs.add_arguments(actuator)
    actuator.set_defaults(handler=_actuator)

    cluster = commands.add_parser(
        "cluster",
        help="operate the embedded cluster of a running actuator: TaskManagers, faults, state",
        description="Talk to the running actuator's control endpoint (port from `make up`, "
        "or --port).",
    )
    cluster.add_argument(
        "--host", default="127.0.0.1", help="the actuator's host (default 127.0.0.1)"
    )
    cluster.add_argument("--port", type=int, help="the actuator's control port")
    verbs = cluster.add_subparsers(title="verbs", metavar="VERB", required=True)
    add = verbs.add_parser("add-taskmanagers", help="start TaskManagers for a job")
    add.add_argument("--job", required=True)
    add.add_argument("--count", type=int, default=1)
    add.add_argument("--slots", type=int, default=1)
    add.set_defaults(handler=_cluster, path="/taskmanagers")
    kill = verbs.add_parser("kill-taskmanager", help="kill one of a job's TaskManagers")
    kill.add_argument("--job", required=True)
    kill.add_argument("--tm", help="which one (default: one running tasks)")
    kill.set_defaults(handler=_cluster, path="/faults/kill-taskmanager")
    fail = verbs.add_parser("fail-task", help="fail one of a job's tasks")
    fail.add_argument("--job", required=True)
    fail.set_defaults(handler=_cluster, path="/faults/fail-task")
    checkpoints = verbs.add_parser("fail-checkpoints", help="fail a job's next checkpoints")
    checkpoints.add_argument("--job", required=True)
    checkpoints.add_argument("--count", type=int, default=3)
    checkpoints.set_defaults(handler=_cluster, path="/faults/fail-checkpoints")
    state = verbs.add_parser(
        "state",
        help="summarize the cluster's jobs and TaskManagers (--job for one, --json for all)",
    )
    state.add_argument("--job", help="print this job's state (JSON)")
    state.add_argument("--json", action="store_true", help="print every job's state (JSON)")
    state.add_argument("--limit", type=int, default=20, help="jobs listed in the summary")
    state.set_defaults(handler=_state)


def _port(args: argparse.Namespace) -> int:
    if args.port:
        return int(args.port)
    try:
        return int(PORT_FILE.read_text())
    except (OSError, ValueError):
        return 6067


def _snapshot(args: argparse.Namespace) -> dict[str, Any]:
    """The cluster's state from the actuator's /state; `ActuatorDownError` if none answers."""
    import urllib.request

    try:
        url = f"http://{args.host}:{_port(args)}/state"
        with urllib.request.urlopen(url, timeout=JOB_GRACE_S) as response:
            snapshot: dict[str, Any] = json.load(response)
            return snapshot
    except OSError as error:
        raise ActuatorDownError(no_actuator(args.host, _port(args), not args.port, error)) from None


def no_actuator(host: str, port: int, local: bool, error: object) -> str:
    """The one line for an actuator that does not answer: the stack is not running."""
    where = f"no actuator answers on {host}:{port} ({error})"
    if local:
        return f"the local stack is not running: {where}; `make up` starts it"
    return (
        f"the stack is not running: {where}; `make up` starts the local stack, "
        "--port names another actuator"
    )


class ActuatorDownError(RuntimeError):
    """No actuator answers on the control port; the message is the one line to print."""


JOB_GRACE_S = 2.0
"""How long a job just submitted may take to reach the actuator (it learns of a job
from the scheduler's decisions) before `cluster ... --job` calls it unknown."""


def _known(args: argparse.Namespace) -> bool:
    """Whether the cluster knows `args.job`, as `cluster state --job` checks it."""
    import time

    deadline = time.monotonic() + JOB_GRACE_S
    while args.job not in _snapshot(args):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _unknown_job(job: str) -> str:
    return (
        f"scalefold cluster: no job {job} on the cluster (the scheduler has not accepted it); "
        "`scalefold cluster state` lists the jobs"
    )


def _cluster(args: argparse.Namespace, context: Context) -> int:
    from services.actuator.control import post

    query = {k: getattr(args, k, None) for k in ("job", "count", "slots", "tm")}
    try:
        if not _known(args):
            print(_unknown_job(args.job), file=sys.stderr)
            return 1
        print(json.dumps(post(_port(args), args.path, host=args.host, **query)))
    except ActuatorDownError as down:
        print(f"scalefold cluster: {down}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except OSError as error:
        line = no_actuator(args.host, _port(args), not args.port, error)
        print(f"scalefold cluster: {line}", file=sys.stderr)
        return EXIT_UNREACHABLE
    return 0


def _state(args: argparse.Namespace, context: Context) -> int:
    try:
        snapshot = _snapshot(args)
    except ActuatorDownError as down:
        print(f"scalefold cluster: {down}", file=sys.stderr)
        return EXIT_UNREACHABLE
    if args.json:
        print(json.dumps(snapshot, indent=2))
    elif args.job:
        if args.job not in snapshot:
            print(_unknown_job(args.job), file=sys.stderr)
            return 1
        print(json.dumps({args.job: snapshot[args.job]}, indent=2))
    else:
        print("\n".join(summary(snapshot, args.limit)))
    return 0


def summary(snapshot: dict[str, Any], limit: int) -> list[str]:
    """The cluster in a few lines: totals, then one line for each of the first jobs."""
    statuses = Counter(str(job.get("status")) for job in snapshot.values())
    managers = sum(len(job.get("taskManagers") or {}) for job in snapshot.values())
    counted = ", ".join(f"{n} {status}" for status, n in sorted(statuses.items()))
    lines = [f"{len(snapshot)} jobs ({counted or 'none'}), {managers} TaskManagers"]
    for job_id in list(snapshot)[:limit]:
        job = snapshot[job_id]
        lines.append(
            f"  {job_id:<24} {job.get('status')!s:<10} "
            f"{len(job.get('taskManagers') or {})} TaskManagers, checkpoint {job.get('checkpoints')}"
        )
    if len(snapshot) > limit:
        lines.append(f"  ... {len(snapshot) - limit} more; --job ID for one, --json for all")
    return lines


def _actuator(args: argparse.Namespace, context: Context) -> int:
    import logging
    import signal
    import time

    from services.actuator.cluster import EmbeddedCluster, Timing
    from services.actuator.control import serve
    from services.actuator.service import Actuator
    from services.contracts import Codec, SchemaRegistry
    from services.contracts.preflight import prepare

    log = logging.getLogger("scalefold.actuator")
    settings = context.settings
    prepare(settings, "actuator")
    timing = Timing(
        provisioning=int(args.provisioning_delay * 1000),
        creation=int(args.creation_delay * 1000),
        cancellation=int(args.cancellation_delay * 1000),
        slots_per_taskmanager=args.slots_per_taskmanager,
    )
    actuator = Actuator(
        settings,
        Codec(SchemaRegistry.load(settings.schemas_dir)),
        EmbeddedCluster(timing, args.seed),
        apply_delay_ms=int(args.apply_delay * 1000),
    )
    flink = flinkargs.router(args, context.cache_dir, actuator.control.put)
    if flink is not None:
        actuator.offload = flink.submit
        log.info("Flink backends: %s (their jobs' commands go to Flink)", ", ".join(flink.names()))
    server = serve(actuator, args.web_host, args.web_port)
    log.info("control endpoint on http://%s:%d", args.web_host, server.server_address[1])
    started = int(time.time() * 1000)
    for fault in _plan(args.faults):
        actuator.later(started + int(float(fault["at"]) * 1000), _fault(actuator, fault))
    stopping = {"now": False}

    def stop(signum: int, frame: Any) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        actuator.run(lambda: stopping["now"])
    finally:
        server.shutdown()
    return 0


def _plan(path: str | None) -> list[dict[str, Any]]:
    if not path:
        return []
    plan: list[dict[str, Any]] = json.loads(Path(path).read_text())
    return plan


def _fault(actuator: Any, fault: dict[str, Any]) -> Any:
    cluster, job = actuator.cluster, fault["job"]
    kind = fault["fault"]
    if kind == "kill-taskmanager":
        return lambda now: cluster.kill_task_manager(job, now, fault.get("tm"))
    if kind == "fail-task":
        return lambda now: cluster.fail_task(job, now)
    if kind == "fail-checkpoints":
        return lambda now: cluster.fail_checkpoints(job, int(fault.get("count", 3)))
    if kind == "add-taskmanagers":
        return lambda now: cluster.add_task_managers(
            job, int(fault.get("count", 1)), int(fault.get("slots", 1)), now
        )
    raise ValueError(f"unknown fault {kind!r} in the plan")
