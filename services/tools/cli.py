"""`scalefold topics` and `scalefold demo`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.cli import Context


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    topics = commands.add_parser(
        "topics",
        help="list scalefold's topics, or create the missing ones",
        description="The topics scalefold uses under the configured prefix. "
        "With --create, create the missing ones (idempotent).",
    )
    topics.add_argument("--create", action="store_true", help="create the missing topics")
    topics.set_defaults(handler=_topics)

    demo = commands.add_parser(
        "demo",
        help="run the main job end to end on a local stack (what `make demo` runs)",
        description="Start a fresh local broker, create the topics, produce a job's input "
        "events as Avro, consume them back and print them decoded, then stop the broker.",
    )
    demo.set_defaults(handler=_demo)


def _topics(args: argparse.Namespace, context: Context) -> int:
    from services.contracts.kafka import ensure_topics

    topics = context.settings.topics.all()
    if args.create:
        created = ensure_topics(context.settings, topics)
        print(f"created {len(created)} topics", file=sys.stderr)
    for name, spec in topics.items():
        print(f"{name:40} partitions={spec.partitions:<3} key={spec.key:<12} {spec.doc}")
    return 0


def _demo(args: argparse.Namespace, context: Context) -> int:
    from services.tools.demo import run_demo

    return run_demo(context)
