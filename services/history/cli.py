"""`scalefold history ...`: run the history job, query it with SQL, summarise, draw timelines."""

from __future__ import annotations

import argparse
from pathlib import Path

from services.history import handlers, reading
from services.localstack.layout import RUN_ROOT

DEFAULT_DATA_DIR = RUN_ROOT / "local" / "history"
"""The history of the local stack (`make up`), so `history sql` after `make up` reads it."""


class _Help(argparse.RawDescriptionHelpFormatter):
    """Descriptions as written; a flag's default after its help when there is one."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if action.default in (None, False, argparse.SUPPRESS) or "%(default)" in text:
            return text
        return f"{text} (default: %(default)s)"


VIEWS_HELP = """\
views (over the service's SQL endpoint also as global_temp.<view>):
  rescales, rescale_vertices, rescale_slots, rescale_states, rescale_phases
      one row per rescale (its latest revision), and that revision's children
  raw_rescales, raw_rescale_vertices, ...   every received revision
  job_summary     per job: counts, reasons, duration/downtime p50/p95/p99, flapping
  fleet_summary   the same over all jobs
  flink_rescales, flink_rescale_vertices, ..., flink_conformance, flink_agreement
      a real Flink's own rescales (from the bridge) and how scalefold's predictions agree
  flink_signals, flink_vertex_signals
      a real Flink job's workload samples (from the bridge), per sample and per vertex

Delta tables (DATA_DIR/tables/<table>, what deltalake or DuckDB read) -> view:
  rescales_latest                            -> rescales
  rescales (every revision)                  -> raw_rescales
  each row holds its children as arrays (vertices, slots, scheduler_states,
  transition_phases): the views rescale_vertices, ... explode those of each latest
  revision, raw_rescale_vertices, ... those of every revision

After the answer, stderr says which history was read: the running service's, or the
files under DATA_DIR/tables (a Spark session of this command's own, 10 s and more).
"""


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    history = commands.add_parser(
        "history",
        help="the rescale history: Kafka -> Delta tables, Spark SQL, summaries, scaling commands",
        description="Keep every FLIP-495 rescale record of the rescales topic in Delta tables, "
        "query it with Spark SQL, and send scaling commands derived from it.",
    )
    verbs = history.add_subparsers(title="verbs", metavar="VERB", required=True)
    _add_run(verbs)
    _add_sql(verbs)
    _add_summary(verbs)
    _add_timeline(verbs)
    _add_serve(verbs)


def _add_sql(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sql = _verb(verbs, "sql", "run a Spark SQL query over the history views", VIEWS_HELP)
    sql.add_argument("query", help='e.g. "SELECT job_id, total FROM job_summary"')
    sql.add_argument(
        "--format",
        choices=["table", "csv", "json"],
        default="table",
        help="an aligned table, CSV, or JSON Lines (one object per row)",
    )
    sql.add_argument("--max-rows", type=int, default=1000, metavar="N", help="print at most N rows")
    sql.set_defaults(handler=reading.sql)


def _add_summary(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    summary = _verb(
        verbs,
        "summary",
        "FLIP-487's overview and summary: counts, latest rescales, durations",
        "Counts of in-progress, completed, failed and ignored rescales, the latest\n"
        "rescale per terminal state, and duration statistics per terminal state\n"
        "(Flink's /jobs/:jobid/rescales/overview and /summary).\n\n"
        "A real Flink's job (by Flink's job id) shows Flink's own records and scalefold's\n"
        "prediction of it, one after the other (--source).\n\n"
        "Read from the committed Delta tables DATA_DIR/tables/rescales_latest (the view\n"
        "`rescales`) and flink_rescales_latest (`flink_rescales`) without Spark, whether\n"
        "or not the history service runs.",
        spark=False,
    )
    summary.add_argument(
        "--job",
        help="one job id (default: the whole fleet); a real Flink's job by Flink's job id "
        "or cluster.id",
    )
    _add_source(summary)
    summary.set_defaults(handler=reading.summary)


def _add_source(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--source",
        choices=("both", "flink", "scalefold"),
        default="both",
        help="a real Flink's own records (from the bridge), scalefold's (for a Flink job: "
        "its prediction), or both where there are (default)",
    )


def _add_timeline(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    timeline = _verb(
        verbs,
        "timeline",
        "draw a job's rescales as a Gantt chart of scheduler states",
        "One row per rescale, its scheduler-state spans as coloured bars; open spans\n"
        "(rescales in progress) are hatched. The file type follows --out: .png or .html.\n\n"
        "A real Flink's job (by Flink's job id) draws Flink's own rescales and scalefold's\n"
        "predicted ones interleaved by start, each labelled (--source).\n\n"
        "Read from the committed Delta tables rescales_latest and rescale_states (and\n"
        "flink_rescales_latest) without Spark, whether or not the history service runs.",
        spark=False,
    )
    timeline.add_argument(
        "--job", required=True, help="the job id; a real Flink's by Flink's job id or cluster.id"
    )
    _add_source(timeline)
    timeline.add_argument("--out", required=True, type=Path, help="FILE.png or FILE.html")
    timeline.add_argument(
        "--last", type=int, default=30, metavar="N", help="draw the N most recent rescales"
    )
    timeline.add_argument(
        "--relative", action="store_true", help="x axis: time since each rescale's start"
    )
    timeline.set_defaults(handler=reading.timeline)


def _add_serve(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from services.history.restapi import command

    serve = _verb(
        verbs,
        "serve",
        "serve Flink's rescale REST API (FLIP-487) and a web page over the history",
        "Read-only HTTP over the committed Delta tables (no Spark, no JVM): Flink 2.3's\n"
        "/jobs/:jobid/rescales/{overview,history,summary,config,details/:uuid}, a /jobs\n"
        "listing, and the web page at /web/ (docs/rest-api.md).",
        spark=False,
    )
    serve.add_argument("--host", default=command.DEFAULT_HOST, help="the address to listen on")
    serve.add_argument(
        "--port", type=int, default=command.DEFAULT_PORT, help="the port; 0 picks a free one"
    )
    serve.add_argument(
        "--port-file", type=Path, metavar="FILE", help="write the port it listens on here"
    )
    command.add_tls_arguments(serve)
    serve.set_defaults(handler=command.serve)


def _verb(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    description: str,
    *,
    spark: bool = True,
) -> argparse.ArgumentParser:
    parser = verbs.add_parser(
        name,
        help=help_text,
        description=description,
        formatter_class=_Help,
    )
    parser.add_argument(
        "--data-dir", type=Path, default=DEFAULT_DATA_DIR, help="the tables and checkpoints"
    )
    if spark:
        parser.add_argument(
            "--master",
            help="Spark master URL (default: $SCALEFOLD_SPARK_MASTER, else local[*]); on a "
            "cluster the driver listens on this machine's address, not loopback",
        )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        # Not to reset `scalefold -v` (a subcommand's default would override it).
        default=argparse.SUPPRESS,
        help="show Spark's and the JVM's own log, which Spark is queried, and a mistake's "
        "whole story (Spark's message in full)",
    )
    return parser


def _add_run(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    run = _verb(
        verbs,
        "run",
        "the streaming job: rescales topic -> Delta tables, dead letters, scaling commands",
        """\
Read the rescales topics from their beginning (resuming from the checkpoints in
DATA_DIR/checkpoints), keep each rescale's latest revision in a Delta table at once
(--trigger-seconds), the raw tables in larger batches
(--tables-trigger-seconds), send undecodable records to the dead-letter topic, and
plan scaling commands from the records as they arrive (a query of the planner's own,
--planner-trigger-seconds), sending the ones not sent before.
While it runs, its Spark session serves the views (as global_temp.<view>) over
Spark Connect (the address in DATA_DIR/sql.url, which `history sql` uses) and
over JDBC, Spark's Thrift server (the address in DATA_DIR/jdbc.url).
Stop with Ctrl-C or SIGTERM; a restart resumes where the job stopped.""",
    )
    run.add_argument(
        "--trigger-seconds",
        type=float,
        default=1.0,
        metavar="N",
        # A record waits for the next trigger before its batch starts: 5 s (the default
        # until 2026-11-29) alone used up the 5 s a record may take to be seen.
        help="the latest tables' micro-batch interval: a record's latest revision is queryable "
        "a batch after at most this long",
    )
    run.add_argument(
        "--tables-trigger-seconds",
        type=float,
        default=10.0,
        metavar="N",
        help="the raw tables' (and the dead letters') micro-batch interval",
    )
    run.add_argument(
        "--planner-trigger-seconds",
        type=float,
        default=0.5,
        metavar="N",
        help="the planner query's micro-batch interval: it decides at most this long (and a "
        "batch) after a rescale record arrives",
    )
    run.add_argument(
        "--available-now",
        action="store_true",
        help="process what the topic holds now, plan once, then exit",
    )
    run.add_argument(
        "--plan-interval",
        type=float,
        default=1.0,
        metavar="N",
        help="with no new record, look at the time-driven rules (the grace periods) every N "
        "seconds",
    )
    run.add_argument(
        "--plan-lookback",
        type=int,
        default=48,
        metavar="HOURS",
        help="plan on rescales that started at most this long ago (whole UTC days)",
    )
    run.add_argument("--no-commands", action="store_true", help="do not plan or send commands")
    run.add_argument(
        "--optimize-minutes",
        type=float,
        default=10.0,
        metavar="N",
        help="compact each table's small files (Delta OPTIMIZE) every N minutes; 0: never",
    )
    run.add_argument(
        "--retention-hours",
        type=float,
        default=24.0,
        metavar="HOURS",
        help="after compacting, delete replaced files older than this (Delta VACUUM; "
        "at least 1: a write in flight must never be older)",
    )
    run.add_argument(
        "--short-retention",
        action="store_true",
        help="let --retention-hours go below 1 hour, for a benchmark in compressed time "
        "(bench/month_bench.py): a batch whose write outlasts the retention loses its files",
    )
    run.add_argument(
        "--sql-port",
        type=int,
        default=0,
        metavar="PORT",
        help="the SQL endpoint's (Spark Connect's) port; 0 picks a free one, written to "
        "DATA_DIR/sql.url",
    )
    run.add_argument(
        "--jdbc-port",
        type=int,
        default=0,
        metavar="PORT",
        help="the JDBC endpoint's (Spark's Thrift server's) port; 0 picks a free one, written "
        "to DATA_DIR/jdbc.url",
    )
    run.add_argument(
        "--sql-host", default="127.0.0.1", help="the address the SQL endpoints listen on"
    )
    run.add_argument(
        "--no-sql-endpoint",
        action="store_true",
        help="do not serve the views (neither Spark Connect nor JDBC)",
    )
    run.add_argument(
        "--no-jdbc", action="store_true", help="serve the views over Spark Connect only"
    )
    run.add_argument(
        "--rest-port",
        type=int,
        default=0,
        metavar="PORT",
        help="also serve the rescale REST API and web page (`history serve`) on --sql-host at "
        "this port; 0 picks a free one, written to DATA_DIR/rest.url; -1: do not",
    )
    from services.history.restapi.command import add_tls_arguments

    add_tls_arguments(run)
    run.add_argument(
        "--health-file",
        type=Path,
        metavar="FILE",
        help="touched every second while the streaming queries run (a container's health check)",
    )
    run.add_argument(
        "--secrets-dir",
        type=Path,
        metavar="DIR",
        help="where the Kafka clients' secrets file for Spark goes, with SASL (default: "
        "$SCALEFOLD_SPARK_SECRETS_DIR, else the system's temporary directory); on a Spark "
        "cluster, a directory every worker sees at the same path",
    )
    _add_planner_rules(run.add_argument_group("planner rules (README.md, 'Scaling commands')"))
    _add_autoscaler(run.add_argument_group("the parallelism decisions (docs/autoscaling.md)"))
    run.set_defaults(handler=handlers.run)


def _add_autoscaler(group: argparse._ArgumentGroup) -> None:
    group.add_argument(
        "--autoscaler",
        choices=("off", "advise", "scale"),
        default="advise",
        help="decide each sampled Flink job's parallelism into the table scaling_decisions: "
        "advise records only (default), scale also sends it (SET_PARALLELISM to the actuator)",
    )
    group.add_argument(
        "--autoscaler-interval",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="how often each job is decided",
    )
    group.add_argument(
        "-D",
        dest="autoscaler_settings",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a setting of the decision by the operator's key, e.g. "
        "job.autoscaler.utilization.target=0.6 (docs/autoscaling.md lists them)",
    )


def _add_planner_rules(rules: argparse._ArgumentGroup) -> None:
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
    rules.add_argument(
        "--max-slots-per-job", type=int, default=32, metavar="N", help="cap of a job's pool"
    )
    rules.add_argument(
        "--provision-reactive",
        action="store_true",
        help="also provision for reactive-mode jobs running below desired",
    )
    rules.add_argument(
        "--flap-threshold",
        type=int,
        default=3,
        metavar="N",
        help="direction reversals within an hour that raise the cooldown",
    )
    rules.add_argument(
        "--max-cooldown",
        type=int,
        default=600_000,
        metavar="MS",
        help="RAISE_COOLDOWN never asks for more than this many milliseconds",
    )
    rules.add_argument(
        "--max-staleness",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="decide nothing while the planner's view of the topics is older than this (a "
        "paused or starved service catches up first)",
    )
    rules.add_argument(
        "--command-flink",
        metavar="NAME",
        action="append",
        default=[],
        help="also plan commands for the jobs observed on this real Flink cluster (the "
        "actuator must have a Flink backend for it: `actuator --flink-local NAME=DIR`)",
    )
