"""`scalefold bridge run`: the Flink bridge (docs/bridge.md)."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from services.clicontext import Context

DEFAULT_POLL_S = 5.0
_NAME = re.compile(r"^[A-Za-z0-9_-]+$")


def cluster_arg(text: str) -> tuple[str, str]:
    """NAME=URL: a cluster's name (no dot: it prefixes flink_job_key) and its REST URL."""
    name, sep, url = text.partition("=")
    if not sep or not _NAME.match(name) or not url.startswith(("http://", "https://")):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not NAME=URL (a name of letters, digits, - or _; "
            "a URL such as http://127.0.0.1:8081)"
        )
    return name, url


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    bridge = commands.add_parser(
        "bridge",
        help="observe real Flink clusters: forward their rescales, predict them in shadow mode",
        description="The Flink bridge (docs/bridge.md).",
    )
    verbs = bridge.add_subparsers(title="verbs", metavar="VERB", required=True)
    run = verbs.add_parser(
        "run",
        help="poll Flink clusters' REST APIs and forward what they show onto Kafka",
        description="Poll each cluster's REST API; forward every rescale revision onto "
        "flink-rescales once (resuming from the offsets kept in Kafka), and send what it "
        "observes onto job-events under <name>.<Flink job id>, so that the scheduler predicts "
        "the job in shadow mode.",
    )
    run.add_argument(
        "--flink-rest",
        metavar="NAME=URL",
        type=cluster_arg,
        action="append",
        required=True,
        help="a cluster to poll, e.g. local=http://127.0.0.1:8081 (repeat for more)",
    )
    run.add_argument(
        "--poll-interval",
        type=float,
        default=DEFAULT_POLL_S,
        metavar="S",
        help=f"seconds between two polls of a cluster (default {DEFAULT_POLL_S:g})",
    )
    run.add_argument("--rest-timeout", type=float, default=5.0, metavar="S", help="per REST call")
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace, context: Context) -> int:
    import logging
    import signal

    from services.bridge.poll import ClusterPoller
    from services.bridge.service import Bridge
    from services.bridge.sink import SERVICE, Sink
    from services.contracts import Codec, SchemaRegistry
    from services.contracts.flinkrest import FlinkRest
    from services.contracts.preflight import prepare

    log = logging.getLogger("scalefold.bridge")
    names = [name for name, _ in args.flink_rest]
    if len(set(names)) != len(names):
        raise SystemExit("scalefold bridge run: each --flink-rest needs a name of its own")
    settings = context.settings
    prepare(settings, SERVICE)
    sink = Sink(
        settings,
        Codec(SchemaRegistry.load(settings.schemas_dir)),
        f"{settings.topics.own(SERVICE)}.{'+'.join(sorted(names))}",
    )
    offsets = sink.restore()
    log.info("resuming from %d jobs' offsets", len(offsets))
    pollers = [ClusterPoller(n, FlinkRest(url, args.rest_timeout)) for n, url in args.flink_rest]
    for name, url in args.flink_rest:
        log.info("polling %s at %s every %g s", name, url, args.poll_interval)
    bridge = Bridge(pollers, sink, args.poll_interval, offsets)
    stopping = {"now": False}

    def stop(signum: int, frame: Any) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        bridge.run(lambda: stopping["now"])
    finally:
        sink.close()
    return 0
