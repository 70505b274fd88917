"""`scalefold local ...`: fetch jars, start and stop the local stack, run under it."""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import subprocess
import sys
from typing import TYPE_CHECKING

from services.localstack.layout import RUN_ROOT, absolute_dir

FLINK_MAX_TASKMANAGERS = 5
"""`up --flink-max-taskmanagers`'s default, the actuator's too (services/actuator/quota.py:
the local stack cannot import it, the actuator imports the local stack)."""

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from services.clicontext import Context
    from services.contracts.settings import Settings


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    local = commands.add_parser(
        "local",
        help="the local stack: a real Kafka broker on 127.0.0.1 (KRaft)",
        description="Run scalefold's local stack on this machine. Jars come from Maven "
        "Central once and are cached (SCALEFOLD_CACHE_DIR, default ~/.cache/scalefold).",
    )
    verbs = local.add_subparsers(title="verbs", metavar="VERB", required=True)

    fetch = verbs.add_parser(
        "fetch", help="resolve the broker's and Spark's connector jars; fetch Flink, build its jobs"
    )
    fetch.set_defaults(handler=_fetch)

    up = verbs.add_parser(
        "up",
        help="start the broker, create the topics, start the scheduler, actuator and history",
        description="Start the local stack in RUN_DIR: the Kafka broker, scalefold's topics, "
        "the scheduler service, the actuator with the embedded cluster, and the history "
        "service (Spark). Web endpoints on 127.0.0.1 only. Idempotent.",
    )
    up.add_argument(
        "--fresh",
        action="store_true",
        help="discard the earlier run: broker data, history tables and checkpoints, the "
        "scheduler's data, logs",
    )
    up.add_argument("--broker-only", action="store_true", help="start no service")
    up.add_argument(
        "--secure",
        action="store_true",
        help="TLS, a SCRAM-SHA-512 user per service and one for the CLI, ACLs (docs/security.md)",
    )
    up.add_argument(
        "--flink",
        action="store_true",
        help="also a real Flink 2.3 session cluster (adaptive scheduler; docs/flink.md)",
    )
    up.add_argument(
        "--flink-taskmanagers",
        type=int,
        default=1,
        metavar="N",
        help="with --flink (1); started whatever --flink-max-taskmanagers says",
    )
    up.add_argument(
        "--flink-max-taskmanagers",
        type=_count,
        default=FLINK_MAX_TASKMANAGERS,
        metavar="N",
        help="with --flink: the history's PROVISION commands start TaskManagers only while "
        f"fewer than N run, and are REJECTED when none fits (default {FLINK_MAX_TASKMANAGERS}: "
        "each is a 700 MB JVM on this machine). Those you start (--flink-taskmanagers, `flink "
        "taskmanager add`) count, but are never refused",
    )
    up.add_argument(
        "--spare-slots",
        type=_count,
        default=0,
        metavar="N",
        help="the slots a job may hold beyond its requirements' need: the actuator caps or "
        "supersedes the planner's commands that would give it more (default 0)",
    )
    up.add_argument("--run-dir", type=absolute_dir, default=str(RUN_ROOT / "local"))
    up.set_defaults(handler=_up)

    down = verbs.add_parser("down", help="stop everything `up` started")
    down.add_argument("--run-dir", type=absolute_dir, default=str(RUN_ROOT / "local"))
    down.set_defaults(handler=_down)

    restart = verbs.add_parser(
        "restart",
        help="restart one service of the running stack (SIGTERM, then start it again)",
        description="Stop one service of RUN_DIR (SIGTERM, SIGKILL after 30 s) and start it "
        "again with the arguments it was started with, then wait until it is ready. The "
        "broker and the other services keep running; the service resumes from the topics "
        "(and, for history, its checkpoints).",
    )
    restart.add_argument("service", choices=["scheduler", "actuator", "history"])
    restart.add_argument("--run-dir", type=absolute_dir, default=str(RUN_ROOT / "local"))
    restart.set_defaults(handler=_restart)

    status = verbs.add_parser("status", help="print what is running")
    status.add_argument("--run-dir", type=absolute_dir, default=str(RUN_ROOT / "local"))
    status.set_defaults(handler=_status)

    material = verbs.add_parser(
        "material",
        help="the secured stack's CA, certificates and users' passwords for containers",
        description="Write what `up --secure` makes (a CA, the broker's certificate, one "
        "SCRAM password per service and the CLI) into ROOT, one directory per holder "
        "(authority, broker, one per user), and the HTTPS servers' material: flink (the "
        "JobManager's REST keystore and a truststore of the CA), history-api (the rescale "
        "REST API's PEM certificate and key) and ca (the CA alone, for clients), for docker "
        "compose's secured stack (deploy/docker/secure.yml, secure-flink.yml; "
        "docs/security.md). Keeps what exists.",
    )
    material.add_argument("root", metavar="ROOT")
    material.add_argument(
        "--hostname",
        action="append",
        default=[],
        help="a name the broker's certificate holds (repeatable); localhost and 127.0.0.1 always",
    )
    material.add_argument(
        "--owner", metavar="UID:GID", help="give the files to this user (when run as root)"
    )
    material.set_defaults(handler=_material)

    accounts = verbs.add_parser(
        "accounts",
        help="create the secured broker's users and ACLs, as the broker (ROOT from `material`)",
        description="Connect to the broker's TLS listener at BOOTSTRAP with its own "
        "certificate (ROOT/authority) and create the users and ACLs of `up --secure` "
        "for the topics under --topic-prefix. Idempotent.",
    )
    accounts.add_argument("root", metavar="ROOT")
    accounts.add_argument("--broker", required=True, metavar="BOOTSTRAP", help="host:port")
    accounts.set_defaults(handler=_accounts)

    run = verbs.add_parser(
        "run",
        help="start a fresh stack, run a command against it, stop the stack",
        description="Start a fresh broker in RUN_DIR, run COMMAND with "
        "SCALEFOLD_BOOTSTRAP_SERVERS set, and stop the broker whatever COMMAND did. "
        "Exits with COMMAND's exit code.",
    )
    run.add_argument("--run-dir", type=absolute_dir, default=str(RUN_ROOT / "test"))
    run.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    run.set_defaults(handler=_run)


def _broker(args: argparse.Namespace, context: Context) -> LocalBroker:
    from pathlib import Path

    from services.localstack.broker import LocalBroker
    from services.localstack.jars import kafka_jars

    return LocalBroker(
        Path(args.run_dir),
        kafka_jars(context.cache_dir, progress=_say),
        secure=getattr(args, "secure", False),
    )


def _fetch(args: argparse.Namespace, context: Context) -> int:
    from services.localstack.flinkdist import flink_home, sample_job, workload_job
    from services.localstack.jars import kafka_jars, spark_connector_jars

    kafka = kafka_jars(context.cache_dir, progress=_say)
    spark = spark_connector_jars(context.cache_dir, progress=_say)
    _say(f"Kafka broker: {len(kafka)} jars in {kafka[0].parent}")
    _say(f"Spark connectors: {', '.join(jar.name for jar in spark)}")
    flink = flink_home(context.cache_dir, progress=_say)
    _say(f"Flink: {flink}; sample job: {sample_job(context.cache_dir, flink, progress=_say)}")
    _say(f"workload job: {workload_job(context.cache_dir, flink, progress=_say)}")
    return 0


def _up(args: argparse.Namespace, context: Context) -> int:
    from pathlib import Path

    from services.contracts.kafka import ensure_topics
    from services.localstack import secure, stack
    from services.localstack.broker import BrokerError

    run_dir = Path(args.run_dir)
    broker = _broker(args, context)
    if args.fresh:
        from services.localstack import flinkstack

        stack.stop_all(run_dir, _say)
        flinkstack.discard(run_dir, _say)
        broker.stop(progress=_say)
        stack.wipe(run_dir, _say)
    try:
        bootstrap = broker.start(fresh=args.fresh, progress=_say)
    except BrokerError as error:
        _say(str(error))
        return 1
    settings = context.settings.with_overrides(bootstrap_servers=bootstrap)
    identities = secure.identities(broker, settings) if args.secure else {}
    if args.secure:
        _say("created the users and ACLs (each service its own topics and groups)")
    secure.write_client_env(run_dir, identities.get("cli"))
    creator = secure.as_user(settings, identities, "cli")
    created = ensure_topics(creator, settings.topics.all())
    if created:
        _say(f"created topics: {', '.join(created)}")
    https = args.flink or not args.broker_only
    if args.secure and https and not stack.tls_current(broker.tls):
        _say(
            f"{broker.tls.directory} holds no certificates for the stack's HTTPS endpoints "
            "(made by an earlier scalefold): start it again with `local up --secure --fresh`"
        )
        return 1
    if not args.broker_only:
        try:
            _start_services(args, run_dir, broker, settings, identities)
        except RuntimeError as slow_or_gone:  # one line, not a stack trace (issue 41)
            _say(f"{slow_or_gone}; `local up` again waits for what still starts")
            return 1
    if args.flink and not _up_flink(
        args, context, run_dir=run_dir, broker=broker, settings=settings, identities=identities
    ):
        return 1
    _say("the local stack is up; point clients at it with")
    print(f"export SCALEFOLD_BOOTSTRAP_SERVERS={bootstrap}")
    if args.secure:  # the CLI user's settings; its password stays in its file
        for line in secure.export_lines(identities["cli"]):
            print(line)
    return 0


def _start_services(
    args: argparse.Namespace,
    run_dir: Path,
    broker: LocalBroker,
    settings: Settings,
    identities: Mapping[str, Mapping[str, str]],
) -> None:
    """The scheduler, the actuator and the history (kept where they run as wanted)."""
    from services.localstack import ports, stack

    known = {p.name: p for p in stack.services(run_dir)}
    scheduler_port, actuator_port = ports.free_ports(2)  # distinct, both free now
    # with --flink the actuator commands the local Flink, and the planner its jobs
    local_flink = f"{stack.LOCAL_FLINK}={(run_dir / 'flink').resolve()}"
    cap = ("--flink-max-taskmanagers", f"{stack.LOCAL_FLINK}={args.flink_max_taskmanagers}")
    on_actuator: tuple[str, ...] = ("--flink-local", local_flink, *cap) if args.flink else ()
    on_history: tuple[str, ...] = ("--command-flink", stack.LOCAL_FLINK) if args.flink else ()
    if args.spare_slots:
        on_actuator += ("--spare-slots", str(args.spare_slots))
    if args.secure:  # Flink's REST and the history's REST API over TLS, the stack's CA
        on_actuator += stack.flink_ca(broker.tls) if args.flink else ()
        on_history += stack.rest_tls(broker.tls)
    wanted = [
        known.get("scheduler") or stack.scheduler_process(run_dir, scheduler_port),
        _kept(known.get("actuator"), on_actuator)
        or stack.actuator_process(run_dir, actuator_port, *on_actuator),
        _kept(known.get("history"), on_history) or stack.history_process(run_dir, *on_history),
    ]
    for process in wanted:
        pid = stack.start(process, settings, identities.get(process.name))
        _say(f"{process.name} running (pid {pid}); {_waiting(process.name)}")
    for process in wanted:
        stack.wait_ready(process)
        where = (
            f"http://127.0.0.1:{stack.web_port(process)}/health, "
            if "--web-port" in process.args
            else ""
        )
        _say(f"{process.name} ready ({where}log: {process.log})")
    (run_dir / "actuator.port").write_text(str(stack.web_port(wanted[1])))


def _up_flink(
    args: argparse.Namespace,
    context: Context,
    *,
    run_dir: Path,
    broker: LocalBroker,
    settings: Settings,
    identities: Mapping[str, Mapping[str, str]],
) -> bool:
    """The local Flink (its REST over TLS on a secured stack) and, with the services, the
    bridge to it; False, said, if Flink did not come up."""
    from services.localstack import flinkstack, stack
    from services.localstack.flink import FlinkClusterError

    tls = broker.tls if args.secure else None
    try:
        cluster = flinkstack.up(run_dir, context.cache_dir, args.flink_taskmanagers, _say, tls=tls)
    except FlinkClusterError as error:
        _say(str(error))
        return False
    rest_url = cluster.rest_url()
    if rest_url and not args.broker_only:
        on_bridge = stack.flink_ca(tls) if tls is not None else ()
        _start_bridge(run_dir, settings, identities.get("bridge"), rest_url, on_bridge)
    return True


def _kept(process: ServiceProcess | None, wanted: tuple[str, ...]) -> ServiceProcess | None:
    """A running service of the stack, kept if it has the `wanted` arguments, else stopped
    (`up --flink` on a stack that ran without it restarts the actuator and the history)."""
    if process is None or all(arg in process.args for arg in wanted):
        return process
    if process.stop():
        _say(f"stopped {process.name}, to start it again with {' '.join(wanted)}")
    return None


def _start_bridge(
    run_dir: Path,
    settings: Settings,
    identity: Mapping[str, str] | None,
    rest_url: str,
    extra: tuple[str, ...] = (),
) -> None:
    """The bridge to the local Flink (a running one kept if it polls the same URL)."""
    from services.localstack import stack

    bridge = stack.bridge_process(run_dir, rest_url, *extra)
    known = next((p for p in stack.services(run_dir) if p.name == "bridge"), None)
    if known is not None and known.args != bridge.args and known.stop():
        _say("stopped the bridge of another Flink")
    pid = stack.start(bridge, settings, identity)
    stack.wait_ready(bridge)
    _say(f"bridge running (pid {pid}): {stack.LOCAL_FLINK}={rest_url} (log: {bridge.log})")


def _down(args: argparse.Namespace, context: Context) -> int:
    from pathlib import Path

    from services.localstack import flinkstack, stack

    stack.stop_all(Path(args.run_dir), _say)
    flinkstack.down(Path(args.run_dir), _say)
    if not _broker(args, context).stop(progress=_say):
        _say("the broker was not running")
    return 0


def _restart(args: argparse.Namespace, context: Context) -> int:
    from pathlib import Path

    from services.localstack import stack

    run_dir = Path(args.run_dir)
    running = _broker(args, context).status()
    process = next((p for p in stack.services(run_dir) if p.name == args.service), None)
    if running is None or process is None:
        _say(
            f"no {args.service} of a running stack in {run_dir}: start it with `scalefold local up`"
        )
        return 1
    if process.stop():
        _say(f"stopped {process.name}")
    settings = context.settings.with_overrides(bootstrap_servers=running.bootstrap)
    pid = stack.start(process, settings)
    _say(f"{process.name} running (pid {pid}); {_waiting(process.name)}")
    stack.wait_ready(process)
    _say(f"{process.name} ready (log: {process.log})")
    return 0


def _status(args: argparse.Namespace, context: Context) -> int:
    from pathlib import Path

    from services.localstack import flinkstack, stack

    running = _broker(args, context).status()
    processes = stack.services(Path(args.run_dir))
    pids = {process.name: process.pid() for process in processes}
    flink = flinkstack.status_lines(Path(args.run_dir))
    if running is None and not any(pids.values()) and not any("running" in f for f in flink):
        print(f"nothing running in {args.run_dir} (start it with `make up`)")
        return 0
    print(
        f"broker     running  pid {running.pid}  kafka://{running.bootstrap}"
        if running
        else "broker     stopped"
    )
    for process in processes:
        pid = pids[process.name]
        restarts = process.restarts().words()
        if pid:
            state = f"running  pid {pid}"
        else:
            state = "restarting" if process.supervised() else "stopped"
        print(
            f"{process.name:<10} {state}  log {process.log}{f'  ({restarts})' if restarts else ''}"
        )
        for kind, url in stack.endpoints(process).items() if pid else ():
            print(f"{'':<10}   {kind:<8} {url}")
    for line in flink:
        print(line)
    if flink and (cap := _flink_cap(processes)):
        print(f"{'':<10}   {'cap':<8} {cap}")
    return 0


def _flink_cap(processes: list[ServiceProcess]) -> str | None:
    """What `local status` says of the actuator's cap on the local Flink's TaskManagers."""
    actuator = next((p for p in processes if p.name == "actuator"), None)
    if actuator is None or "--flink-local" not in actuator.args:
        return None
    given = [v for k, v in itertools.pairwise(actuator.args) if k == "--flink-max-taskmanagers"]
    cap = given[-1].rpartition("=")[2] if given else str(FLINK_MAX_TASKMANAGERS)
    return (
        f"the actuator starts TaskManagers while fewer than {cap} run "
        "(local up --flink-max-taskmanagers N)"
    )


def _count(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def _material(args: argparse.Namespace, context: Context) -> int:
    from pathlib import Path

    from services.localstack.material import make

    owner = None
    if args.owner:
        uid, _, gid = args.owner.partition(":")
        owner = (int(uid), int(gid or uid))
    written = make(Path(args.root), args.hostname or ["localhost"], owner)
    _say(f"secured broker's material in {args.root}: {', '.join(written)}")
    return 0


def _accounts(args: argparse.Namespace, context: Context) -> int:
    from pathlib import Path

    from services.localstack.material import MaterialError, accounts
    from services.localstack.secure import ProvisionError

    try:
        accounts(Path(args.root), args.broker, context.settings.topics)
    except (MaterialError, ProvisionError) as error:
        _say(str(error))
        return 1
    _say(f"created the users and ACLs on {args.broker} (each service its own topics and groups)")
    return 0


def _run(args: argparse.Namespace, context: Context) -> int:
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        _say("scalefold local run: give a command after --")
        return 2
    broker = _broker(args, context)
    # SIGTERM (CI cancelling us) must still stop the broker: turn it into an exception.
    signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        bootstrap = broker.start(fresh=True, progress=_say)
        env = {**os.environ, "SCALEFOLD_BOOTSTRAP_SERVERS": bootstrap}
        _say(f"running: {' '.join(command)}")
        return subprocess.run(command, env=env, check=False).returncode
    finally:
        broker.stop(progress=_say)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _waiting(service: str) -> str:
    """What start-up waits for, and how long at most: stack.wait_ready's bounds (the
    history service's log line, else the service's /health)."""
    most = 180 if service == "history" else 120
    return f"waiting until it is ready (at most {most} s)"


def _say(message: str) -> None:
    print(f"[scalefold] {message}", file=sys.stderr, flush=True)


if TYPE_CHECKING:
    from services.localstack.broker import LocalBroker
    from services.localstack.processes import ServiceProcess
