"""`scalefold cluster ...`: the embedded cluster's operations, through the actuator's
control endpoint, each followed to its outcome.

A verb checks first that the cluster knows the job (as `cluster state --job` does),
then asks the actuator, whose reply names the job events it emitted for the request.
The actuator tags those events with the request's id (a Kafka header), so the verb
finds them on job-events by that id, and the scheduler's verdict on each by its
partition and offset (verdicts.py, as `produce` does): one line, exit 1 if the
scheduler rejected one. `--no-wait` skips the wait.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from collections import Counter
from typing import TYPE_CHECKING, Any

from services.contracts.access import EXIT_UNREACHABLE
from services.localstack.layout import RUN_ROOT

if TYPE_CHECKING:
    from services.clicontext import Context

PORT_FILE = RUN_ROOT / "local" / "actuator.port"
OUTCOME_WAIT_S = 5.0
"""`--wait`'s default: the actuator emits at once, the scheduler answers within a second."""

JOB_GRACE_S = 2.0
"""How long a job just submitted may take to reach the actuator (it learns of a job
from the scheduler's decisions) before `cluster ... --job` calls it unknown."""

VERBS = {
    "add-taskmanagers": ("/taskmanagers", "start TaskManagers for a job"),
    "kill-taskmanager": ("/faults/kill-taskmanager", "kill one of a job's TaskManagers"),
    "fail-task": ("/faults/fail-task", "fail one of a job's tasks"),
    "fail-checkpoints": ("/faults/fail-checkpoints", "fail a job's next checkpoints"),
}


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cluster = commands.add_parser(
        "cluster",
        help="operate the embedded cluster of a running actuator: TaskManagers, faults, state",
        description="Talk to the running actuator's control endpoint (port from `make up`, "
        "or --port). Each operation waits (--wait) for the scheduler's verdict on the "
        "events it caused and prints it in one line (exit 1 if rejected).",
    )
    cluster.add_argument(
        "--host", default="127.0.0.1", help="the actuator's host (default 127.0.0.1)"
    )
    cluster.add_argument("--port", type=int, help="the actuator's control port")
    verbs = cluster.add_subparsers(title="verbs", metavar="VERB", required=True)
    parsers = {}
    for verb, (path, help_text) in VERBS.items():
        parsers[verb] = verbs.add_parser(verb, help=help_text)
        parsers[verb].add_argument("--job", required=True)
        parsers[verb].set_defaults(handler=_cluster, path=path, verb=verb)
    parsers["add-taskmanagers"].add_argument("--count", type=int, default=1)
    parsers["add-taskmanagers"].add_argument("--slots", type=int, default=1)
    parsers["kill-taskmanager"].add_argument("--tm", help="which one (default: one running tasks)")
    parsers["fail-checkpoints"].add_argument("--count", type=int, default=3)
    for parser in parsers.values():
        parser.add_argument(
            "--wait",
            type=float,
            default=OUTCOME_WAIT_S,
            metavar="SECONDS",
            help="wait at most this long for the scheduler's verdict on the events the "
            f"operation caused (default {OUTCOME_WAIT_S:g})",
        )
        parser.add_argument("--no-wait", action="store_true", help="do not wait for the verdict")
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


def _known(args: argparse.Namespace) -> bool:
    """Whether the cluster knows `args.job`, as `cluster state --job` checks it."""
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

    request = uuid.uuid4().hex[:12]
    query = {k: getattr(args, k, None) for k in ("job", "count", "slots", "tm")}
    watch = None
    try:
        if not _known(args):
            print(_unknown_job(args.job), file=sys.stderr)
            return 1
        # fail-checkpoints emits nothing at once: its checkpoints fail as they come
        waits = not args.no_wait and args.verb != "fail-checkpoints"
        watch = _watch(args, context, request) if waits else None
        reply = post(_port(args), args.path, host=args.host, request=request, **query)
        return _report(args, reply, watch)
    except ActuatorDownError as down:
        print(f"scalefold cluster: {down}", file=sys.stderr)
        return EXIT_UNREACHABLE
    except OSError as error:
        line = no_actuator(args.host, _port(args), not args.port, error)
        print(f"scalefold cluster: {line}", file=sys.stderr)
        return EXIT_UNREACHABLE
    finally:
        if watch is not None:
            watch.close()


def _watch(args: argparse.Namespace, context: Context, request: str) -> Any:
    """A Watch on the request's events and the scheduler's answers, from the topics'
    ends now (before the request); None, said in one line, if the broker cannot be read."""
    from services.contracts import Codec, SchemaRegistry
    from services.tools.producing import open_watch
    from services.tools.stackcheck import look
    from services.tools.verdicts import Observed

    settings = context.settings
    if look(settings.bootstrap_servers) == "refused":
        print(
            f"scalefold cluster: no broker at {settings.bootstrap_servers}; "
            "not waiting for the scheduler's verdict",
            file=sys.stderr,
        )
        return None
    codec = Codec(SchemaRegistry.load(settings.schemas_dir))
    observed = Observed(settings.topics.job_events, frozenset([args.job]))
    return open_watch(settings, codec, observed, request)


def _report(args: argparse.Namespace, reply: dict[str, Any], watch: Any) -> int:
    """What the actuator did, then the scheduler's verdict on its events: one line."""
    from services.tools.producing import await_outcome
    from services.tools.verdicts import did, nothing_done, outcome

    if reply.get("events") is None:
        print(
            f"scalefold cluster: the actuator accepted {args.verb} of job {args.job} but has not "
            "carried it out yet (it is busy); `scalefold cluster state` shows when it has",
            file=sys.stderr,
        )
        return 0
    done = did(args.verb, args.job, reply)
    if done is None:
        print(
            f"scalefold cluster: {nothing_done(args.verb, args.job, getattr(args, 'tm', None))}",
            file=sys.stderr,
        )
        return 1
    expected = len(reply["events"])
    if watch is None or expected == 0:
        print(done + ("; not waiting for the scheduler's verdict" if expected else ""))
        return 0
    names = ", ".join(sorted({str(e["type"]) for e in reply["events"]}))
    print(
        f"waiting up to {args.wait:g} s for the scheduler's verdict on {expected} {names} "
        "event(s) (--no-wait skips this)",
        file=sys.stderr,
        flush=True,
    )
    line, status = outcome(done, expected, await_outcome(watch, expected, args.wait), args.wait)
    if status:
        print(f"scalefold cluster: {line}", file=sys.stderr)
    else:
        print(line)
    return status


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
