"""`scalefold flink ...`: run jobs on a real Flink 2.3 cluster and change them.

The verbs that talk REST (submit, requirements, cancel, jobs) take `--rest URL`, by
default the local stack's Flink (`local up --flink`); the TaskManager verbs start and
stop processes of the local stack's Flink. Other modules add verbs to the same group
(services/cli.py builds it and calls each module's `register`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.localstack.layout import RUN_ROOT, absolute_dir

if TYPE_CHECKING:
    from services.clicontext import Context, Handler
    from services.contracts.flinkrest import FlinkRest

    Verbs = argparse._SubParsersAction[argparse.ArgumentParser]


def register(verbs: Verbs) -> None:
    """Add submit, taskmanager, requirements, cancel and jobs to the `flink` group."""
    submit = _verb(verbs, "submit", "run the sample job (or --jar) on Flink; prints its id")
    submit.add_argument("--jar", help="a job jar of your own instead of the sample job")
    submit.add_argument("--entry-class", help="the jar's main class, if its manifest names none")
    sample = submit.add_argument_group("the sample job (deploy/flink/job)")
    sample.add_argument("--max-parallelism", type=int, default=8)
    sample.add_argument("--parallelism", type=int, help="upper bound; default: max parallelism")
    sample.add_argument("--restart", default="fixed-delay", help="fixed-delay | none | ...")
    sample.add_argument("--checkpoint-interval", type=int, default=2000, help="ms")
    sample.add_argument("--rate", type=float, default=20.0, help="records a second")
    sample.add_argument("--name", default="scalefold-sample")
    workload = submit.add_argument_group(
        "the workload job (deploy/flink/workload): Kafka in, CPU per record, keyed"
    )
    workload.add_argument(
        "--workload",
        action="store_true",
        help="run the workload job instead: it reads the workload topic `scalefold load` "
        "fills, from the configured broker (the sample job's options apply too)",
    )
    workload.add_argument(
        "--cost-us", type=int, default=200, help="microseconds per record (default 200)"
    )
    workload.add_argument(
        "--cost-mode",
        choices=("cpu", "wait"),
        default="cpu",
        help="spend them on the CPU (default) or waiting, as a call to a remote service does "
        "(subtasks that wait scale past the machine's cores)",
    )
    submit.add_argument("program_args", nargs="*", metavar="ARG", help="(after --) for --jar")
    submit.set_defaults(handler=_submit)

    taskmanager = verbs.add_parser("taskmanager", help="add or stop local TaskManagers")
    actions = taskmanager.add_subparsers(title="actions", metavar="ACTION", required=True)
    add = _verb(
        actions,
        "add",
        "start TaskManagers and wait until they registered (never refused: the cap of `local up --flink-max-taskmanagers` limits only what the actuator starts, though these count toward it)",
    )
    add.add_argument("--count", type=int, default=1)
    add.set_defaults(handler=_add_taskmanagers)
    stop = _verb(actions, "stop", "stop a TaskManager (the newest running one by default)")
    stop.add_argument("id", nargs="?", metavar="ID", help="its resource id, e.g. tm-2")
    stop.add_argument("--kill", action="store_true", help="SIGKILL: lost, not shut down")
    stop.set_defaults(handler=_stop_taskmanager)

    requirements = _verb(
        verbs, "requirements", "show or set a job's parallelism bounds per vertex (PUT)"
    )
    requirements.add_argument("--job", required=True, metavar="JOB_ID")
    requirements.add_argument(
        "bounds", nargs="*", metavar="VERTEX=LOWER:UPPER", help="vertex id or exact name"
    )
    requirements.set_defaults(handler=_requirements)

    cancel = _verb(verbs, "cancel", "cancel a job")
    cancel.add_argument("job", metavar="JOB_ID")
    cancel.set_defaults(handler=_cancel)

    jobs = _verb(verbs, "jobs", "list the cluster's jobs and their states")
    jobs.set_defaults(handler=_jobs)


def _verb(verbs: Verbs, name: str, help_text: str) -> argparse.ArgumentParser:
    parser: argparse.ArgumentParser = verbs.add_parser(name, help=help_text, description=help_text)
    parser.add_argument(
        "--run-dir", type=absolute_dir, default=str(RUN_ROOT / "local"), help="the local stack"
    )
    parser.add_argument("--rest", metavar="URL", help="a Flink REST URL (default: the local one)")
    parser.add_argument(
        "--ca",
        metavar="FILE",
        type=Path,
        help="the PEM CA an https --rest URL's certificate must verify against (default: the "
        "system's CAs; the local Flink's own with --secure)",
    )
    return parser


def parse_bounds(items: list[str]) -> dict[str, tuple[int, int]]:
    """`VERTEX=LOWER:UPPER` arguments as {vertex: (lower, upper)}; ValueError says which
    argument is wrong and why."""
    bounds: dict[str, tuple[int, int]] = {}
    for item in items:
        vertex, equals, rest = item.rpartition("=")
        lower, colon, upper = rest.partition(":")
        if not (vertex and equals and colon and lower.isdigit() and upper.isdigit()):
            raise ValueError(f"{item!r} is not VERTEX=LOWER:UPPER (e.g. Bucket=1:4)")
        if not 1 <= int(lower) <= int(upper):
            raise ValueError(f"{item!r}: need 1 <= LOWER <= UPPER")
        bounds[vertex] = (int(lower), int(upper))
    return bounds


def vertex_ids(
    bounds: dict[str, tuple[int, int]], vertices: list[dict[str, Any]]
) -> dict[str, tuple[int, int]]:
    """`bounds` keyed by vertex id, where a key may be a vertex's id or its exact name."""
    by_name = {vertex["name"]: vertex["id"] for vertex in vertices}
    known = set(by_name.values())
    resolved = {}
    for key, bound in bounds.items():
        if key not in known and key not in by_name:
            names = ", ".join(f"{name} ({vid})" for name, vid in by_name.items())
            raise ValueError(f"the job has no vertex {key!r}; it has {names}")
        resolved[key if key in known else by_name[key]] = bound
    return resolved


def merged(
    current: dict[str, Any], changed: dict[str, tuple[int, int]]
) -> dict[str, tuple[int, int]]:
    """Every vertex's bounds: Flink's PUT refuses a body that leaves a vertex out ("The
    request is incomplete, missing job vertex [...]"), so the unchanged ones go too."""
    bounds = {
        vertex: (wanted["parallelism"]["lowerBound"], wanted["parallelism"]["upperBound"])
        for vertex, wanted in current.items()
    }
    return {**bounds, **changed}


def _job_arguments(args: argparse.Namespace) -> list[str]:
    """The program arguments both of scalefold's jobs take from `flink submit`'s options."""
    arguments = ["--max-parallelism", str(args.max_parallelism), "--restart", args.restart]
    if args.parallelism is not None:
        arguments += ["--parallelism", str(args.parallelism)]
    return [*arguments, "--checkpoint-interval", str(args.checkpoint_interval)]


def sample_arguments(args: argparse.Namespace) -> list[str]:
    """The sample job's program arguments from `flink submit`'s options."""
    return [*_job_arguments(args), "--rate", str(args.rate), "--name", args.name]


def workload_arguments(args: argparse.Namespace, context: Context) -> list[str]:
    """The workload job's program arguments: the sample job's options that apply (not
    --rate: `scalefold load` sets the rate), the configured broker and the workload topic."""
    settings = context.settings
    name = "scalefold-workload" if args.name == "scalefold-sample" else args.name
    return [
        *_job_arguments(args),
        *("--name", name),
        *("--bootstrap-servers", settings.bootstrap_servers),
        *("--topic", settings.topics.workload, "--group", settings.topics.own("workload")),
        *("--cost-us", str(args.cost_us), "--cost-mode", args.cost_mode),
    ]


def _rest(args: argparse.Namespace) -> FlinkRest:
    from services.contracts.flinkrest import FlinkRest
    from services.localstack.flink import FlinkCluster
    from services.localstack.flinkstack import cluster_dir

    if args.rest:
        return FlinkRest(args.rest, timeout=30.0, ca=args.ca)
    local = FlinkCluster(cluster_dir(Path(args.run_dir)), Path())
    if args.ca is not None:
        return FlinkRest(local.rest(timeout=30.0).base_url, timeout=30.0, ca=args.ca)
    return local.rest(timeout=30.0)


def _guarded(handler: Handler) -> Handler:
    """A handler whose Flink errors end in one line, not a traceback: with no Flink to talk
    to, the line says what to start and the exit code is EXIT_UNREACHABLE (69, as for a
    broker not there); any other error exits 1."""

    def run(args: argparse.Namespace, context: Context) -> int:
        from services.contracts.access import EXIT_UNREACHABLE
        from services.contracts.flinkrest import (
            FlinkRestError,
            FlinkTlsError,
            FlinkUnreachableError,
        )
        from services.localstack.flink import FlinkClusterError, FlinkNotStartedError
        from services.localstack.flinkdist import FlinkSetupError

        try:
            return handler(args, context)
        except FlinkTlsError as error:
            print(f"scalefold flink: {error}", file=sys.stderr)
            return 1
        except (FlinkUnreachableError, FlinkNotStartedError) as error:
            print(f"scalefold flink: {_not_there(args, error)}", file=sys.stderr)
            return EXIT_UNREACHABLE
        except (FlinkRestError, FlinkClusterError, FlinkSetupError, ValueError) as error:
            print(f"scalefold flink: {error}", file=sys.stderr)
            return 1

    return run


def _not_there(args: argparse.Namespace, error: Exception) -> str:
    """No Flink answered: what was asked, and the next step."""
    if args.rest:
        return f"no Flink answers at {args.rest} ({error}); check --rest URL"
    run_dir = Path(args.run_dir)
    start = "scalefold local up --flink"
    if run_dir != (RUN_ROOT / "local").resolve():
        start += f" --run-dir {run_dir}"
    return (
        f"no Flink runs in the local stack {run_dir} ({error}); start one with "
        f"`{start}`, or name yours with --rest URL"
    )


@_guarded
def _submit(args: argparse.Namespace, context: Context) -> int:
    from services.localstack.flinkdist import flink_home, sample_job, workload_job

    rest = _rest(args)
    rest.overview()  # no Flink there: said before the sample job is built
    if args.jar:
        jar, arguments = Path(args.jar), list(args.program_args)
    elif args.workload:
        jar = workload_job(context.cache_dir, flink_home(context.cache_dir, _say), _say)
        arguments = workload_arguments(args, context) + list(args.program_args)
    else:
        jar = sample_job(context.cache_dir, flink_home(context.cache_dir, _say), _say)
        arguments = sample_arguments(args) + list(args.program_args)
    jar_id = rest.upload_jar(jar.name, jar.read_bytes())
    print(rest.run_jar(jar_id, arguments, args.entry_class))
    return 0


@_guarded
def _add_taskmanagers(args: argparse.Namespace, context: Context) -> int:
    from services.localstack.flinkstack import local_cluster

    cluster = local_cluster(Path(args.run_dir), context.cache_dir, _say)
    cluster.wait_rest(timeout=5.0)
    ids = cluster.add_taskmanagers(args.count)
    _say(f"started {', '.join(ids)}; waiting until they register")
    cluster.wait_registered(ids)
    print("\n".join(ids))
    return 0


@_guarded
def _stop_taskmanager(args: argparse.Namespace, context: Context) -> int:
    from services.localstack.flink import FlinkCluster, newest
    from services.localstack.flinkstack import cluster_dir

    cluster = FlinkCluster(cluster_dir(Path(args.run_dir)), Path())
    running = [tm.name for tm in cluster.taskmanagers() if tm.pid() is not None]
    chosen = args.id or newest(running)
    if chosen is None or chosen not in running:
        named = f" {chosen}" if chosen else ""
        _say(f"no running TaskManager{named} (running: {', '.join(running) or 'none'})")
        return 1
    cluster.stop_taskmanager(chosen, kill=args.kill)
    print(chosen)
    return 0


@_guarded
def _requirements(args: argparse.Namespace, context: Context) -> int:
    rest = _rest(args)
    vertices = rest.job(args.job)["vertices"]
    if args.bounds:
        wanted = vertex_ids(parse_bounds(args.bounds), vertices)
        rest.set_requirements(args.job, merged(rest.requirements(args.job), wanted))
    names = {vertex["id"]: vertex["name"] for vertex in vertices}
    for vertex, wanted in rest.requirements(args.job).items():
        bound = wanted["parallelism"]  # the id and bounds for a script, the name for a person
        print(f"{vertex}  {bound['lowerBound']}:{bound['upperBound']}  {names.get(vertex, '')}")
    return 0


@_guarded
def _cancel(args: argparse.Namespace, context: Context) -> int:
    _rest(args).cancel(args.job)
    return 0


@_guarded
def _jobs(args: argparse.Namespace, context: Context) -> int:
    for job in _rest(args).jobs():
        print(f"{job['jid']}  {job['state']:<10} {job['name']}")
    return 0


def _say(message: str) -> None:
    print(f"[scalefold] {message}", file=sys.stderr, flush=True)
