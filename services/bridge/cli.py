"""`scalefold bridge run`: the Flink bridge (docs/bridge.md)."""

from __future__ import annotations

import argparse
import re
import sys
from typing import TYPE_CHECKING, Any

from services.bridge.brokers import OWN_BROKERS
from services.contracts.flinkrest import ca_arg

if TYPE_CHECKING:
    from services.clicontext import Context
    from services.contracts.flinkrest import FlinkRest

DEFAULT_POLL_S = 2.0
DEFAULT_SIGNALS_S = 10.0
"""Seconds between two workload samples of a running job (poll.DEFAULT_SIGNALS_INTERVAL_MS)."""
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
    run.add_argument(
        "--flink-ca",
        metavar="[NAME=]FILE",
        type=ca_arg,
        action="append",
        default=[],
        help="a PEM CA that cluster NAME's (or, without NAME, every https cluster's) "
        "certificate must verify against; default: the system's CAs",
    )
    run.add_argument("--rest-timeout", type=float, default=5.0, metavar="S", help="per REST call")
    run.add_argument(
        "--presence-interval",
        type=float,
        default=0.25,
        metavar="S",
        help="read /taskmanagers alone this often between polls, so that when a "
        "TaskManager came or went is known to within it (default 0.25; 0: at polls only)",
    )
    run.add_argument(
        "--signals-interval",
        type=float,
        default=DEFAULT_SIGNALS_S,
        metavar="S",
        help="sample each running job's per-vertex workload metrics (busy, back-pressured "
        "and idle time, records in and out, a source's pendingRecords) onto flink-signals "
        f"this often (default {DEFAULT_SIGNALS_S:g}: Flink refreshes them every "
        "metrics.fetcher.update-interval, 10 s; 0: never)",
    )
    run.add_argument(
        "--source-bootstrap-servers",
        metavar="SERVERS",
        help="the Kafka brokers the jobs' Kafka sources read (with scalefold's own Kafka "
        f"security settings; {OWN_BROKERS!r}: scalefold's own brokers): each sample then "
        "carries a source's backlog from the brokers' end offsets, which grows under back "
        "pressure where the connector's pendingRecords stands still (default: none, "
        "pendingRecords alone)",
    )
    run.set_defaults(handler=_run)


def _run(args: argparse.Namespace, context: Context) -> int:
    import logging
    import signal

    from services.bridge.brokers import BrokerOffsets
    from services.bridge.poll import ClusterPoller
    from services.bridge.service import Bridge
    from services.bridge.sink import SERVICE, Sink
    from services.contracts import Codec, SchemaRegistry
    from services.contracts.flinkrest import FlinkRest, ca_for
    from services.contracts.preflight import prepare

    log = logging.getLogger("scalefold.bridge")
    names = [name for name, _ in args.flink_rest]
    if len(set(names)) != len(names):
        raise SystemExit("scalefold bridge run: each --flink-rest needs a name of its own")
    rests = {
        n: FlinkRest(url, args.rest_timeout, ca_for(n, args.flink_ca)) for n, url in args.flink_rest
    }
    for name, rest in rests.items():  # before Kafka: nothing to close on the way out
        verified(name, rest)
    settings = context.settings
    prepare(settings, SERVICE)
    sink = Sink(
        settings,
        Codec(SchemaRegistry.load(settings.schemas_dir)),
        f"{settings.topics.own(SERVICE)}.{'+'.join(sorted(names))}",
    )
    offsets = sink.restore()
    log.info("resuming from %d jobs' offsets", len(offsets))
    every = int(args.signals_interval * 1000)
    brokers = args.source_bootstrap_servers
    if brokers == OWN_BROKERS:
        brokers = settings.bootstrap_servers
    ends = BrokerOffsets(settings, brokers) if brokers and every > 0 else None
    pollers = [
        ClusterPoller(n, rest, signals_interval_ms=every, end_offsets=ends)
        for n, rest in rests.items()
    ]
    for name, url in args.flink_rest:
        log.info("polling %s at %s every %g s", name, url, args.poll_interval)
    if ends is not None:
        log.info("sources' backlog from the end offsets of %s", brokers)
    bridge = Bridge(
        pollers, sink, args.poll_interval, offsets, presence_interval_s=args.presence_interval
    )
    stopping = {"now": False}

    def stop(signum: int, frame: Any) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        bridge.run(lambda: stopping["now"])
    finally:
        sink.close()
        if ends is not None:
            ends.close()
    return 0


def verified(name: str, rest: FlinkRest) -> None:
    """Exit with one line if an https cluster's certificate does not verify: a wrong CA
    is a mistake to fix, not an outage to wait out (a cluster not answering at all is
    polled with backoff, as ever)."""
    from services.contracts.access import EXIT_ACCESS
    from services.contracts.flinkrest import FlinkRestError, FlinkTlsError

    if not rest.base_url.startswith("https:"):
        return
    try:
        rest.overview()
    except FlinkTlsError as error:
        print(f"scalefold bridge run: Flink cluster {name}: {error}", file=sys.stderr)
        raise SystemExit(EXIT_ACCESS) from None
    except FlinkRestError:
        pass  # not up yet, or answering badly: the polls retry and say so
