"""`scalefold topics` and `scalefold demo`."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.clicontext import Context

VERDICT_WAIT_S = 5.0
"""`produce --wait`'s default: the scheduler answers within a second when it runs."""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from services.tools.cluster import register as register_cluster

    register_cluster(commands)
    topics = commands.add_parser(
        "topics",
        help="list scalefold's topics, create the missing ones, or set their declared settings",
        description="The topics scalefold uses under the configured prefix. "
        "With --create, create the missing ones (idempotent). With --apply, set on the "
        "broker each declared setting (retention.ms, cleanup.policy, ...) an existing topic "
        "holds otherwise: a topic made by an older release keeps what that release declared.",
    )
    topics.add_argument("--create", action="store_true", help="create the missing topics")
    topics.add_argument(
        "--apply",
        action="store_true",
        help="set the declared settings where an existing topic differs (after --create)",
    )
    topics.set_defaults(handler=_topics)

    demo = commands.add_parser(
        "demo",
        help="run the main job end to end on a local stack (what `make demo` runs)",
        description="Start a fresh local broker, create the topics, produce a job's input "
        "events as Avro, consume them back and print them decoded, then stop the broker.",
    )
    demo.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        default=argparse.SUPPRESS,  # not to reset `scalefold -v`
        help="show Spark's and the JVM's own log",
    )
    demo.add_argument(
        "--flink",
        action="store_true",
        help="the same story on a real Flink 2.3 (make demo-flink; services/tools/flinkdemo.py)",
    )
    demo.set_defaults(handler=_demo)

    produce = commands.add_parser(
        "produce",
        help="put an input event (or a JSON-lines log of them) on the job-events topic",
        description="Build one input event from --field value options (fields of its Avro "
        "schema, camelCase or kebab-case; JSON for arrays, maps and records; timestamp "
        "defaults to now), validate it against the schema, and produce it keyed by job id. "
        "With --from, produce every event of a JSON-lines log (the replay format).",
        epilog="examples:\n"
        "  scalefold produce tm-registered --job-id j1 --task-manager-id tm-1 --slots 2\n"
        "  scalefold produce lifecycle --job-id j1 --kind CHECKPOINT_COMPLETED --checkpoint-id 7\n"
        "  scalefold produce requirements --job-id j1 --requirements "
        '\'[{"vertexId": "source", "lowerBound": 1, "upperBound": 2}]\'\n'
        "  scalefold produce --from examples/tm-join-one-by-one.jsonl --now",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    produce.add_argument(
        "event_type",
        nargs="?",
        help="e.g. job-submitted, tm-registered, tm-lost, lifecycle, requirements",
    )
    produce.add_argument(
        "--from", dest="from_file", metavar="FILE.jsonl", help="produce a whole event log"
    )
    produce.add_argument(
        "--now",
        action="store_true",
        help="with --from: shift the log's times to start now, and send each event when "
        "its time comes (paced; see --speed)",
    )
    produce.add_argument(
        "--speed",
        type=float,
        default=1.0,
        metavar="FACTOR",
        help="with --now: wait FACTOR times less between events (default 1: real time); "
        "the events keep their log's spacing in time",
    )
    produce.add_argument("--dry-run", action="store_true", help="print the records, send nothing")
    produce.add_argument(
        "--wait",
        type=float,
        default=VERDICT_WAIT_S,
        metavar="SECONDS",
        help="after the last event, wait at most this long for the scheduler's verdict on "
        "each (folded, or dead-lettered: printed with its reason and line; exit 1) "
        f"(default {VERDICT_WAIT_S:g})",
    )
    produce.add_argument(
        "--no-wait", action="store_true", help="send and exit, without waiting for verdicts"
    )
    produce.set_defaults(handler=_produce, takes_extra=True)

    tail = commands.add_parser(
        "tail",
        help="print a scalefold topic's records, decoded",
        description="Consume TOPIC (a scalefold topic's short name, e.g. rescales, decisions, "
        "dead-letters, commands, command-outcomes, job-events; default rescales) and print "
        "each record decoded, one line each.",
    )
    tail.add_argument("topic", nargs="?", default="rescales")
    tail.add_argument("--from-beginning", action="store_true", help="default: only new records")
    tail.add_argument("--max", type=int, help="stop after this many records")
    tail.add_argument(
        "--idle", type=float, metavar="SECONDS", help="stop after this long without a record"
    )
    tail.add_argument(
        "--to-end",
        action="store_true",
        help="read from the beginning to the topic's end as it is now, then stop (a "
        "topic that never goes quiet, like job-events with a bridge running, ends too)",
    )
    tail.add_argument("--job", help="only records of this job")
    tail.add_argument(
        "--format",
        choices=["text", "json", "log"],
        default="text",
        help="text (default), json, or log: the event log `scalefold replay` reads "
        "(job-events only; TimerFired inputs as comments: replay fires its own timers), "
        "e.g. tail job-events --job J --format log --to-end > J.jsonl",
    )
    tail.set_defaults(handler=_tail)

    load = commands.add_parser(
        "load",
        help="replay a rate trace onto the workload job's topic (deploy/flink/workload)",
        description="Produce text records at the rate a trace gives over time onto the "
        "workload topic (<prefix>workload), the input of `scalefold flink submit --workload`. "
        "TRACE is a built-in shape (steps, ramp, sine, burst; scaled to --peak and "
        "--duration) or a file of `SECONDS RATE` lines (straight lines between them).",
        epilog="examples:\n"
        "  scalefold load --trace steps --peak 2000 --duration 600\n"
        "  scalefold load --trace my-day.txt\n"
        "  scalefold load --trace sine --peak 1500 --print   # the points, nothing sent",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    load.add_argument("--trace", required=True, metavar="TRACE", help="a shape or a file")
    load.add_argument(
        "--peak", type=float, default=1000.0, help="a shape's peak, records/s (default 1000)"
    )
    load.add_argument(
        "--duration", type=float, default=600.0, help="a shape's length, seconds (default 600)"
    )
    load.add_argument("--keys", type=int, default=64, help="distinct record keys (default 64)")
    load.add_argument(
        "--size", type=int, default=256, help="bytes per record, padded (default 256)"
    )
    load.add_argument(
        "--print", action="store_true", help="print the trace's points and send nothing"
    )
    load.set_defaults(handler=_load)


def _load(args: argparse.Namespace, context: Context) -> int:
    from services.tools.load import TraceError, load_trace, points_text, run

    try:
        trace = load_trace(args.trace, args.peak, args.duration)
    except TraceError as error:
        print(f"scalefold load: {error}", file=sys.stderr)
        return 2
    if args.print:
        sys.stdout.write(points_text(trace))
        return 0
    _require_broker(args, context)
    topic = context.settings.topics.workload

    def say(line: str) -> None:  # progress: a line every 10 s
        print(f"scalefold load: {line}", file=sys.stderr, flush=True)

    say(f"producing {args.trace} ({trace.duration:g} s) onto {topic}")
    sent = run(context.settings, trace, topic, args.keys, say, size=args.size)
    print(f"sent {sent} records onto {topic} in {trace.duration:g} s", file=sys.stderr)
    return 0


def _topics(args: argparse.Namespace, context: Context) -> int:
    from services.contracts.kafka import CLI_CONNECT_TIMEOUT, apply_topic_configs, ensure_topics

    topics = context.settings.topics.all()
    if args.create or args.apply:
        _require_broker(args, context)
    if args.create:
        created = ensure_topics(context.settings, topics, connect_timeout=CLI_CONNECT_TIMEOUT)
        print(f"created {len(created)} topics", file=sys.stderr)
    if args.apply:
        changed = apply_topic_configs(context.settings, topics, timeout=CLI_CONNECT_TIMEOUT)
        for drift in changed:
            print(f"{drift}: set to the declared value", file=sys.stderr)
        print(f"changed {len(changed)} settings", file=sys.stderr)
    for name, spec in topics.items():
        print(f"{name:40} partitions={spec.partitions:<3} key={spec.key:<12} {spec.doc}")
    return 0


def _demo(args: argparse.Namespace, context: Context) -> int:
    from services.tools.demo import run_demo

    if getattr(args, "flink", False):
        from services.tools.flinkdemo import run_flink_demo

        return run_flink_demo(context, verbose=getattr(args, "verbose", False))

    return run_demo(context, verbose=args.verbose)


def _produce(args: argparse.Namespace, context: Context) -> int:
    from pathlib import Path

    from services.contracts import Codec, SchemaRegistry
    from services.contracts.eventlog import LogError, read_log
    from services.contracts.events import to_record
    from services.contracts.kafka import CLI_CONNECT_TIMEOUT, connect
    from services.tools.produce import ProduceError, event_type, now_ms, paced, record_from_args
    from services.tools.producing import send
    from services.tools.verdicts import event_lines

    codec = Codec(SchemaRegistry.load(context.settings.schemas_dir))
    waits: list[float] = []
    try:
        if args.from_file:
            path = Path(args.from_file)
            records = [to_record(e) for e in read_log(path, codec)]
            origins = [f"{args.from_file}:{n}" for n in event_lines(path.read_text("utf-8"))]
            if args.now:
                times = paced([rec["timestamp"] for _, rec in records], now_ms(), args.speed)
                records = [
                    (name, {**rec, "timestamp": at})
                    for (name, rec), (at, _) in zip(records, times, strict=True)
                ]
                waits = [wait for _, wait in times]
        elif args.event_type:
            name = event_type(args.event_type)
            records = [(name, record_from_args(codec, name, args.extra, now_ms()))]
            origins = ["the command line"]
        else:
            print("scalefold produce: give an event type or --from FILE", file=sys.stderr)
            return 2
        if args.wait < 0:
            raise ProduceError(f"--wait must be 0 or more, not {args.wait:g}")
    except (ProduceError, LogError, OSError) as error:
        print(f"scalefold produce: {error}", file=sys.stderr)
        return 2
    if args.dry_run:
        for name, record in records:
            print(codec.to_avro_json(name, record))
        return 0
    _require_broker(args, context)
    connect(context.settings, CLI_CONNECT_TIMEOUT)
    wait = None if args.no_wait else args.wait
    return send(context.settings, codec, records, origins=origins, waits=waits, wait_s=wait)


def _require_broker(args: argparse.Namespace, context: Context) -> None:
    """One line at once, with what to run, when no broker listens (stackcheck.py)."""
    from services.tools.stackcheck import require_broker, uses_local_stack

    servers = context.settings.bootstrap_servers
    require_broker(servers, uses_local_stack(context.env, args.bootstrap_servers))


def _tail(args: argparse.Namespace, context: Context) -> int:
    topics = context.settings.topics
    name = args.topic if args.topic in topics.all() else topics.prefix + args.topic
    if name not in topics.all():
        short = ", ".join(spec.suffix for spec in topics.all().values())
        print(f"scalefold tail: {args.topic!r} is not a scalefold topic ({short})", file=sys.stderr)
        return 2
    if args.format == "log" and name != topics.job_events:
        print("scalefold tail: --format log is for job-events, the inputs", file=sys.stderr)
        return 2
    # before the Kafka client is imported: at once, on a slow machine too
    _require_broker(args, context)
    if args.to_end:
        return _tail_to_end(args, context, name)

    import time
    import uuid

    from confluent_kafka import Consumer

    from services.contracts import Codec, SchemaRegistry
    from services.contracts.access import raise_refusal
    from services.contracts.kafka import CLI_CONNECT_TIMEOUT, connect, librdkafka_config
    from services.tools.tail import STILL_S, located, render, still_line, waiting_line

    codec = Codec(SchemaRegistry.load(context.settings.schemas_dir))
    offset_reset = "earliest" if args.from_beginning else "latest"
    connect(context.settings, CLI_CONNECT_TIMEOUT)
    consumer = Consumer(
        librdkafka_config(
            context.settings,
            **{
                "group.id": f"{topics.own('cli')}-tail-{uuid.uuid4().hex[:8]}",
                "auto.offset.reset": offset_reset,
                "enable.auto.commit": False,
            },
        )
    )
    consumer.subscribe([name])
    print(waiting_line(name, args.max, args.job, args.from_beginning, args.idle), file=sys.stderr)
    seen, last = 0, time.monotonic()
    started = said = shown = last
    quiet = STILL_S  # doubles after each "still waiting": a long wait says so less often
    try:
        while args.max is None or seen < args.max:
            if args.idle is not None and time.monotonic() - last > args.idle:
                break
            message = consumer.poll(0.5)
            if args.max is not None and time.monotonic() - max(shown, said) > quiet:
                said, quiet = time.monotonic(), quiet * 2
                print(still_line(seen, args.max, said - started), file=sys.stderr, flush=True)
            if message is None:
                continue
            if message.error():
                raise_refusal(message.error(), context.settings, f"read {name}")
                continue
            last = time.monotonic()
            if args.job and message.key() != args.job.encode():
                continue
            print(
                located(message, render(codec, message.value(), args.format), args.format),
                flush=True,
            )
            seen += 1
            shown, quiet = time.monotonic(), STILL_S
    finally:
        consumer.close()
    return 0


def _tail_to_end(args: argparse.Namespace, context: Context, name: str) -> int:
    """`tail --to-end`: the topic from its beginning to its end as it is now."""
    from services.contracts import Codec, SchemaRegistry
    from services.contracts.kafka import CLI_CONNECT_TIMEOUT, connect, read_to_end
    from services.tools.tail import located, render

    codec = Codec(SchemaRegistry.load(context.settings.schemas_dir))
    connect(context.settings, CLI_CONNECT_TIMEOUT)
    group = context.settings.topics.own("cli") + "-tail"
    seen = 0
    for message in read_to_end(context.settings, name, group):
        if args.job and message.key() != args.job.encode():
            continue
        print(
            located(message, render(codec, message.value(), args.format), args.format), flush=True
        )
        seen += 1
        if args.max is not None and seen >= args.max:
            break
    return 0
