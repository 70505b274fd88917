"""`scalefold replay` (and, with the service, `scalefold scheduler`)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.cli import Context

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


def _replay(args: argparse.Namespace, context: Context) -> int:
    from services.contracts import Codec, SchemaRegistry
    from services.scheduler.replay import run_command

    return run_command(args, Codec(SchemaRegistry.load(context.settings.schemas_dir)))
