"""`scalefold replay` (and, with the service, `scalefold scheduler`)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.clicontext import Context

REPLAY_EPILOG = """\
log format: one input event per line, {"type": NAME, "event": AVRO_JSON}, e.g.
  {"type": "JobSubmitted", "event": {"jobId": "j1", "timestamp": 0, "vertices": [...]}}
  {"type": "TaskManagerRegistered",
   "event": {"jobId": "j1", "timestamp": 1000, "taskManagerId": "tm-1", "slots": 2}}
Lines starting with # are comments. See examples/*.jsonl.

examples:
  scalefold replay examples/tm-join-one-by-one.jsonl --format text
  scalefold replay examples/tm-join-one-by-one.jsonl \
      -D jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling=0s
  scalefold replay examples/tm-join-one-by-one.jsonl --summary
  scalefold replay LOG --compare -D scalefold.rescale.stabilization=waiting-for-resources \
      -- -D scalefold.rescale.stabilization=executing
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    replay = commands.add_parser(
        "replay",
        help="fold a JSON-lines event log through the scheduler and print every effect",
        description="Fold LOG through Flink's adaptive scheduler (scalefold's core), firing "
        "timers as the log's time advances and, at the end, until none is left. Prints "
        "transitions, decisions, runtime requests and rescale records. The same log and "
        "options always print the same bytes.",
        epilog=REPLAY_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    replay.add_argument("log", help="the JSON-lines event log")
    replay.add_argument(
        "-D",
        dest="define",
        action="append",
        metavar="KEY=VALUE",
        help="a Flink configuration default, e.g. -D scheduler-mode=REACTIVE (repeatable); "
        "a job's own configuration wins",
    )
    replay.add_argument("--format", choices=["json", "text"], default="json", help="default: json")
    replay.add_argument(
        "--only", choices=["rescales", "decisions", "transitions"], help="print one kind of effect"
    )
    replay.add_argument("--job", help="only this job's effects")
    replay.add_argument(
        "--summary", action="store_true", help="per-job counts, restarts and downtime"
    )
    replay.add_argument(
        "--until", type=int, metavar="MS", help="stop running timers after this time"
    )
    replay.add_argument(
        "--no-drain", action="store_true", help="do not run timers after the last event"
    )
    replay.add_argument(
        "--compare",
        action="store_const",
        const=[],
        default=None,
        help="-D K=V ... -- -D K=V: run the log under two configurations (A before --, "
        "B after) and print the difference, a what-if; must come last",
    )
    replay.set_defaults(handler=_replay)
    register_whatif(commands)
    register_ambiguities(commands)
    register_service(commands)


WHATIF_EPILOG = """\
The job's inputs are read from the job-events topic (everything the scheduler folded,
the bridge's observations of a Flink job included), Flink's own rescales from
flink-rescales: no JobManager is needed, a job that ended answers the same. Each -D
key is pinned over the job's own configuration (its submission and later updates).

examples:
  scalefold whatif --job 1ceee2b0... \\
      -D jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling=60s
  scalefold whatif --job local.1ceee2b0... \\
      -D jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout=0s
  scalefold whatif --cluster local -D jobmanager.adaptive-scheduler.scaling-policy=...
  scalefold whatif --all -D scheduler-mode=REACTIVE
"""


def register_whatif(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    whatif = commands.add_parser(
        "whatif",
        help="what a recorded job (a real Flink's too) would have done with other settings",
        description="Fold a job's recorded inputs through the scheduler twice, as recorded "
        "and with the -D keys pinned, and print what changes (rescales, their triggers and "
        "outcomes, restarts, downtime, time below the desired parallelism) beside what "
        "Flink did, where the bridge recorded Flink's own rescales.",
        epilog=WHATIF_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    which = whatif.add_mutually_exclusive_group(required=True)
    which.add_argument("--job", help="a job id: a Flink job id, cluster.id, or a producer's")
    which.add_argument("--cluster", help="every job the bridge observed on this cluster")
    which.add_argument("--all", action="store_true", help="every job with recorded inputs")
    whatif.add_argument(
        "-D",
        dest="define",
        action="append",
        metavar="KEY=VALUE",
        help="a setting to pin over the job's own configuration (repeatable; at least one)",
    )
    whatif.add_argument(
        "--default",
        action="append",
        metavar="KEY=VALUE",
        help="a default for both runs, as the scheduler service's own -D was (repeatable)",
    )
    whatif.set_defaults(handler=_whatif)


def _whatif(args: argparse.Namespace, context: Context) -> int:
    from services.contracts import Codec, SchemaRegistry
    from services.scheduler.whatif import run_command

    return run_command(
        args, context.settings, Codec(SchemaRegistry.load(context.settings.schemas_dir))
    )


def register_ambiguities(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    found = commands.add_parser(
        "ambiguities",
        help="which predicted rescales of a job depend on when, within a poll, an input came",
        description="Fold a job's recorded inputs through the scheduler as recorded, then "
        "with each input the bridge saw only between two polls moved to either end of its "
        "window, and print each predicted rescale (numbered by start, as `flink compare` "
        "pairs them) that changes: ambiguous at this observation resolution.",
    )
    found.add_argument("--job", required=True, help="a job id: a Flink job id or cluster.id")
    found.add_argument("--format", choices=("text", "json"), default="text")
    found.add_argument(
        "--default",
        action="append",
        metavar="KEY=VALUE",
        help="a default, as the scheduler service's own -D was (repeatable)",
    )
    found.set_defaults(handler=_ambiguities)


def _ambiguities(args: argparse.Namespace, context: Context) -> int:
    from services.contracts import Codec, SchemaRegistry
    from services.scheduler.observationcli import run_command

    return run_command(
        args, context.settings, Codec(SchemaRegistry.load(context.settings.schemas_dir))
    )


def register_service(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    scheduler = commands.add_parser(
        "scheduler",
        help="run the scheduler service: fold job-events into rescale records (Faust)",
        description="Consume the job-events topic, fold every job's events through Flink's "
        "adaptive scheduler, and send rescale records, decisions and dead letters. State "
        "lives in a changelog-backed table; a restarted or rebalanced worker carries on. "
        "Health on /health, Prometheus metrics on /metrics.",
    )
    scheduler.add_argument(
        "-D",
        dest="define",
        action="append",
        metavar="KEY=VALUE",
        help="a Flink configuration default for every job (a job's own configuration wins)",
    )
    scheduler.add_argument("--web-host", default="127.0.0.1", help="default: 127.0.0.1")
    scheduler.add_argument("--web-port", type=int, default=6066, help="default: 6066")
    scheduler.add_argument(
        "--data-dir",
        default=".run/scheduler",
        help="Faust's local data, the RocksDB tables in DATA_DIR/<app id>; one worker per "
        "directory (default: .run/scheduler)",
    )
    scheduler.add_argument("--batch-size", type=int, default=500, help="messages per fold batch")
    scheduler.add_argument(
        "--batch-window",
        type=_wait,
        default=0.005,
        metavar="SECONDS",
        help="how long a batch waits for more messages before it is folded, unless it is "
        "full already (default 0.005)",
    )
    scheduler.add_argument(
        "--session-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="Kafka consumer-group session timeout (default 10)",
    )
    scheduler.add_argument(
        "--recovery-stall-timeout",
        type=_wait,
        default=120.0,
        metavar="SECONDS",
        help="a recovery of the tables that reads nothing for this long while the broker "
        "answers makes the worker exit (code 75), to be started again as compose and "
        "Kubernetes do (default 120; 0: never)",
    )
    scheduler.add_argument(
        "--state-cache",
        type=_jobs,
        default=100_000,
        metavar="JOBS",
        help="decoded job states kept in memory, several KB each (default 100000); the "
        "least recently used beyond it are read from the table again at their next event",
    )
    scheduler.add_argument(
        "--group-instance-id",
        default="auto",
        metavar="ID",
        help="Kafka's group.instance.id (static membership): a worker restarted with the "
        "same id takes its partitions back at once, not after --session-timeout; a stopped "
        "one keeps them until its session times out. The web address goes after the id. "
        "'auto' (the default): an id kept in --data-dir with rocksdb://, none with memory://; "
        "'none': a new member at every start",
    )
    scheduler.add_argument(
        "--replication-factor",
        type=int,
        default=1,
        help="replication of the topics Faust creates (its table changelog)",
    )
    scheduler.add_argument(
        "--snapshot-hours",
        type=_hours,
        default=24.0,
        metavar="HOURS",
        help="a job's state goes to the job-snapshots topic at its first input of every "
        "such interval of its own clock, for what-if, replay and forecasts once job-events "
        "has let its earlier inputs go (default 24; 0: never)",
    )
    scheduler.add_argument(
        "--store",
        choices=("memory://", "rocksdb://"),
        default="rocksdb://",
        help="where Faust keeps the tables: RocksDB under --data-dir (the default: a "
        "restart replays only the changelogs' tail) or memory (replayed whole at every start)",
    )
    scheduler.set_defaults(handler=_scheduler)


def _wait(text: str) -> float:
    """A time to wait, in seconds: 0 or more."""
    try:
        seconds = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text}") from None
    if not seconds >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be 0 or more, not {text}")
    return seconds


def _hours(text: str) -> float:
    """A number of hours, 0 or more, less than job-events' retention."""
    from services.contracts.topics import JOB_EVENTS

    hours = _wait(text)
    if hours * 3_600_000 >= JOB_EVENTS.retention_ms:
        days = JOB_EVENTS.retention_ms // 86_400_000
        raise argparse.ArgumentTypeError(f"must be less than job-events' {days} days, not {text}")
    return hours


def _jobs(text: str) -> int:
    """A number of jobs, 1 or more."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of jobs: {text}") from None
    if count < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {text}")
    return count


def _scheduler(args: argparse.Namespace, context: Context) -> int:
    from pathlib import Path

    from services.scheduler.adapters.app import ServiceSettings
    from services.scheduler.adapters.run import run_service
    from services.scheduler.core.config import ConfigError
    from services.scheduler.replay import parse_defines

    try:
        defaults = parse_defines(args.define)
    except ConfigError as error:
        print(f"scalefold scheduler: {error}", file=sys.stderr)
        return 2
    settings = ServiceSettings(
        kafka=context.settings,
        defaults=defaults,
        web_host=args.web_host,
        web_port=args.web_port,
        data_dir=Path(args.data_dir),
        batch_size=args.batch_size,
        batch_window_s=args.batch_window,
        session_timeout_s=args.session_timeout,
        replication_factor=args.replication_factor,
        store=args.store,
        snapshot_interval_ms=round(args.snapshot_hours * 3_600_000),
        group_instance_id=None if args.group_instance_id == "none" else args.group_instance_id,
        state_cache_jobs=args.state_cache,
        recovery_stall_timeout_s=args.recovery_stall_timeout,
    )
    return run_service(settings, args.log_level.lower())


def _replay(args: argparse.Namespace, context: Context) -> int:
    from services.contracts import Codec, SchemaRegistry
    from services.scheduler.replay import run_command

    return run_command(args, Codec(SchemaRegistry.load(context.settings.schemas_dir)))
