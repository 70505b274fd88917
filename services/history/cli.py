"""`scalefold history ...`: run the history job, query it with SQL, summarise, draw timelines."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from services.localstack.layout import RUN_ROOT

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from services.cli import Context
    from services.history.views import Layout

DEFAULT_DATA_DIR = RUN_ROOT / "history"
VIEWS_HELP = """\
views:
  rescales, rescale_vertices, rescale_slots, rescale_states, rescale_phases
      one row per rescale (its latest revision), and that revision's children
  raw_rescales, raw_rescale_vertices, ...   every received revision
  job_summary     per job: counts, reasons, duration/downtime p50/p95/p99, flapping
  fleet_summary   the same over all jobs
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = commands.add_parser(
        "history",
        help="the rescale history: Kafka -> Parquet, Spark SQL, summaries, scaling commands",
        description="Keep every FLIP-495 rescale record of the rescales topic as Parquet, "
        "query it with Spark SQL, and send scaling commands derived from it.",
    )
    verbs = history.add_subparsers(title="verbs", metavar="VERB", required=True)
    _add_run(verbs)

    sql = _verb(verbs, "sql", "run a Spark SQL query over the history views", VIEWS_HELP)
    sql.add_argument("query", help='e.g. "SELECT job_id, total FROM job_summary"')
    sql.add_argument("--format", choices=["table", "csv", "json"], default="table")
    sql.add_argument("--max-rows", type=int, default=1000, help="print at most this many rows")
    sql.set_defaults(handler=_sql)

    summary = _verb(
        verbs,
        "summary",
        "FLIP-487's overview and summary: counts, latest rescales, durations",
        "Counts of in-progress, completed, failed and ignored rescales, the latest "
        "rescale per terminal state, and duration statistics per terminal state.",
    )
    summary.add_argument("--job", help="one job id (default: the whole fleet)")
    summary.set_defaults(handler=_summary)

    timeline = _verb(
        verbs,
        "timeline",
        "draw a job's rescales as a Gantt chart of scheduler states",
        "One row per rescale, its scheduler-state spans as coloured bars; open spans "
        "(rescales in progress) are hatched. The file type follows --out: .png or .html.",
    )
    timeline.add_argument("--job", required=True, help="the job id")
    timeline.add_argument("--out", required=True, type=Path, help="FILE.png or FILE.html")
    timeline.add_argument("--last", type=int, default=30, help="the N most recent rescales")
    timeline.add_argument(
        "--relative", action="store_true", help="x axis: time since each rescale's start"
    )
    timeline.set_defaults(handler=_timeline)


def _verb(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    description: str,
) -> argparse.ArgumentParser:
    parser = verbs.add_parser(
        name,
        help=help_text,
        description=description,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"the history's tables and checkpoints (default {DEFAULT_DATA_DIR})",
    )
    parser.add_argument("--master", default="local[*]", help="Spark master URL (default local[*])")
    return parser


def _add_run(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = _verb(
        verbs,
        "run",
        "the streaming job: rescales topic -> Parquet tables, dead letters, scaling commands",
        "Read the rescales topic from its beginning (resuming from the checkpoints in "
        "DATA_DIR/checkpoints), write one Parquet table per record part to DATA_DIR/tables, "
        "send undecodable records to the dead-letter topic, and every --plan-interval "
        "seconds plan scaling commands from the tables and send the new ones.",
    )
    run.add_argument("--trigger-seconds", type=float, default=5.0, help="micro-batch interval")
    run.add_argument(
        "--available-now",
        action="store_true",
        help="process what the topic holds now, plan once, then exit",
    )
    run.add_argument("--plan-interval", type=int, default=5, help="seconds between plans")
    run.add_argument("--no-commands", action="store_true", help="do not plan or send commands")
    rules = run.add_argument_group("planner rules (see services/history/README.md)")
    rules.add_argument(
        "--provision-grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="wait this long in WaitingForResources (or below desired) before provisioning",
    )
    rules.add_argument(
        "--release-grace",
        type=float,
        default=120.0,
        metavar="SECONDS",
        help="idle slots must stay idle this long before they are released",
    )
    rules.add_argument("--max-slots-per-job", type=int, default=32, help="cap of a job's pool")
    rules.add_argument(
        "--provision-reactive",
        action="store_true",
        help="also provision for reactive-mode jobs running below desired",
    )
    rules.add_argument(
        "--flap-threshold", type=int, default=3, help="direction reversals per hour that count"
    )
    rules.add_argument(
        "--max-cooldown",
        type=int,
        default=600_000,
        metavar="MS",
        help="RAISE_COOLDOWN never asks for more than this many milliseconds",
    )
    run.set_defaults(handler=_run)


def _say(message: str) -> None:
    print(f"[history] {message}", file=sys.stderr, flush=True)


def _session(args: argparse.Namespace, context: Context) -> SparkSession:
    from services.history.spark import history_session
    from services.localstack.jars import spark_connector_jars

    jars = spark_connector_jars(context.cache_dir, progress=_say)
    _say(f"starting Spark ({args.master}); this takes a few seconds")
    started = time.monotonic()
    session = history_session(jars, args.master)
    _say(f"Spark ready in {time.monotonic() - started:.1f} s")
    return session


def _layout(args: argparse.Namespace) -> Layout:
    from services.history.views import Layout

    return Layout(Path(args.data_dir).resolve())


def _run(args: argparse.Namespace, context: Context) -> int:
    from pyspark.errors import StreamingQueryException

    from services.contracts import SchemaRegistry
    from services.contracts.kafka import ensure_topics
    from services.history.job import HistoryJobError, RunOptions, run
    from services.history.planner import PlannerConfig

    settings = context.settings
    topics = settings.topics
    wanted = {topics.rescales, topics.commands, topics.dead_letters}
    ensure_topics(settings, {n: s for n, s in topics.all().items() if n in wanted})
    options = RunOptions(
        layout=_layout(args),
        trigger_seconds=args.trigger_seconds,
        available_now=args.available_now,
        plan_interval_seconds=args.plan_interval,
        plan_commands=not args.no_commands,
        planner=PlannerConfig(
            provision_grace_ms=round(args.provision_grace * 1000),
            release_grace_ms=round(args.release_grace * 1000),
            max_slots_per_job=args.max_slots_per_job,
            provision_reactive=args.provision_reactive,
            flap_threshold=args.flap_threshold,
            max_cooldown_ms=args.max_cooldown,
        ),
    )
    _say(f"reading {topics.rescales} at {settings.bootstrap_servers}")
    # `docker stop` sends SIGTERM: stop the queries cleanly, as on Ctrl-C.
    signal.signal(signal.SIGTERM, _interrupt)
    spark = _session(args, context)
    registry = SchemaRegistry.load(settings.schemas_dir)
    try:
        return run(spark, settings, registry, options, progress=_say)
    except (HistoryJobError, StreamingQueryException) as error:
        print(f"scalefold history run: {error}", file=sys.stderr)
        return 1


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _views(args: argparse.Namespace, context: Context) -> tuple[SparkSession, dict[str, object]]:
    from services.contracts import SchemaRegistry
    from services.history.decode import RescaleSchemas
    from services.history.views import register_views

    spark = _session(args, context)
    registry = SchemaRegistry.load(context.settings.schemas_dir)
    views = register_views(spark, _layout(args), RescaleSchemas.of(registry))
    return spark, dict(views)


def _sql(args: argparse.Namespace, context: Context) -> int:
    from pyspark.errors import PySparkException

    from services.history.render import render

    spark, views = _views(args, context)
    try:
        frame = spark.sql(args.query)
        rows = frame.limit(args.max_rows + 1).collect()
    except PySparkException as error:
        print(f"scalefold history sql: {error}", file=sys.stderr)
        print(f"views: {', '.join(sorted(views))}", file=sys.stderr)
        return 1
    print(render(args.format, frame.columns, [tuple(r) for r in rows[: args.max_rows]]))
    if len(rows) > args.max_rows:
        _say(f"showing the first {args.max_rows} rows; raise --max-rows for more")
    return 0


def _summary(args: argparse.Namespace, context: Context) -> int:
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    from services.history import overview

    _, views = _views(args, context)
    latest = views["rescales"]
    assert isinstance(latest, DataFrame)
    if args.job:
        latest = latest.where(F.col("job_id") == args.job)
    scope = f"job {args.job}" if args.job else "the fleet"
    count_row = overview.counts(latest).first()
    assert count_row is not None
    if args.job and count_row["total"] == 0:
        print(f"no rescales of job {args.job} in {args.data_dir}", file=sys.stderr)
        return 1
    latest_rows = [r.asDict() for r in overview.latest_per_terminal_state(latest).collect()]
    stats = [r.asDict() for r in overview.duration_stats(latest).collect()]
    print(overview.format_overview(scope, count_row.asDict(), latest_rows))
    print()
    print(overview.format_summary(scope, stats))
    return 0


def _timeline(args: argparse.Namespace, context: Context) -> int:
    from pyspark.sql import DataFrame

    from services.history import timeline

    suffix = args.out.suffix.lower()
    if suffix not in (".png", ".html"):
        print("scalefold history timeline: --out must end in .png or .html", file=sys.stderr)
        return 2
    _, views = _views(args, context)
    rescales, states = views["rescales"], views["rescale_states"]
    assert isinstance(rescales, DataFrame) and isinstance(states, DataFrame)
    frame = timeline.timeline_frame(rescales, states, args.job, args.last)
    rows = timeline.timeline_rows([r.asDict() for r in frame.collect()])
    if not rows:
        print(f"no rescales of job {args.job} in {args.data_dir}", file=sys.stderr)
        return 1
    title = f"Rescales of job {args.job}"
    if suffix == ".png":
        timeline.render_png(rows, args.out, title, args.relative)
    else:
        args.out.write_text(timeline.render_html(rows, title, args.relative), encoding="utf-8")
    _say(f"wrote {len(rows)} rescales to {args.out}")
    return 0
