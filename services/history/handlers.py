"""What `scalefold history run` does, and the Spark session the verbs share; `cli.py`
declares their flags (the reading verbs, sql, summary and timeline, are in reading.py).

Heavy imports (pyspark, matplotlib) stay inside the handlers so that
`scalefold --help` and the other services' commands do not pay for them.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from http.server import ThreadingHTTPServer

    from pyspark.sql import SparkSession

    from services.clicontext import Context
    from services.history.autoscaler import AutoscalerOptions
    from services.history.endpoint import EndpointConfig, JdbcConfig
    from services.history.job import RunOptions
    from services.history.paths import Layout
    from services.history.spark import JvmOutput

log = logging.getLogger(__name__)


def say(message: str) -> None:
    print(f"[history] {message}", file=sys.stderr, flush=True)


def verbose(args: argparse.Namespace, message: str) -> None:
    """Progress that only -v shows."""
    if getattr(args, "verbose", False):
        say(message)


def _session(
    args: argparse.Namespace,
    context: Context,
    conf: dict[str, str] | None = None,
    jvm_output: JvmOutput = None,
    show: Callable[[str], None] = say,
) -> SparkSession:
    from services.history.spark import history_session
    from services.localstack.jars import spark_connector_jars

    jars = spark_connector_jars(context.cache_dir, progress=show)
    master = args.master or context.env.get("SCALEFOLD_SPARK_MASTER") or "local[*]"
    show(f"starting Spark ({master}); this takes a few seconds")
    started = time.monotonic()
    session = history_session(jars, master, conf, jvm_output=jvm_output)
    show(f"Spark ready in {time.monotonic() - started:.1f} s")
    return session


def _jvm_log(args: argparse.Namespace) -> JvmOutput:
    """The service's JVM writes to the service's stderr (its log under `local up`); run
    by hand on a terminal, to DATA_DIR/spark.log instead, unless -v."""
    if args.verbose or not sys.stderr.isatty():
        return None
    path = _layout(args).spark_log
    path.parent.mkdir(parents=True, exist_ok=True)
    say(f"Spark's own log: {path}")
    return path.open("ab")


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _layout(args: argparse.Namespace) -> Layout:
    from services.history.paths import Layout

    return Layout(Path(args.data_dir).resolve())


def _run_options(args: argparse.Namespace, context: Context) -> RunOptions:
    from services.history.job import RunOptions
    from services.history.jobview import PlannerConfig
    from services.history.upkeep import UpkeepConfig

    retention_hours = _retention_hours(args)
    return RunOptions(
        layout=_layout(args),
        trigger_seconds=args.trigger_seconds,
        tables_trigger_seconds=args.tables_trigger_seconds,
        planner_trigger_seconds=args.planner_trigger_seconds,
        available_now=args.available_now,
        plan_interval_seconds=args.plan_interval,
        plan_lookback_hours=args.plan_lookback,
        plan_commands=not args.no_commands,
        health_file=args.health_file,
        upkeep=UpkeepConfig(args.optimize_minutes, retention_hours),
        secrets_dir=args.secrets_dir or _path(context.env.get("SCALEFOLD_SPARK_SECRETS_DIR")),
        sql_url=_endpoint(args).url if _serves_sql(args) else None,
        jdbc=_jdbc(args),
        finder=context.ambiguities,
        forecaster=context.forecasts,
        autoscaler=_autoscaler(args, retention_hours),
        planner=PlannerConfig(
            provision_grace_ms=round(args.provision_grace * 1000),
            release_grace_ms=round(args.release_grace * 1000),
            max_slots_per_job=args.max_slots_per_job,
            provision_reactive=args.provision_reactive,
            flap_threshold=args.flap_threshold,
            max_cooldown_ms=args.max_cooldown,
            commanded_clusters=frozenset(args.command_flink),
            max_staleness_ms=round(args.max_staleness * 1000),
        ),
    )


def _retention_hours(args: argparse.Namespace) -> float:
    """VACUUM runs beside the streaming writes: a file a batch has written but not yet
    committed must never look old enough to delete, so at least an hour unless asked
    (--short-retention); SystemExit(2) otherwise."""
    hours: float = args.retention_hours
    if (hours < 1 and not args.short_retention) or hours <= 0:
        least = "more than 0" if args.short_retention else "at least 1 (or --short-retention)"
        print(
            f"scalefold history run: --retention-hours must be {least}, not {hours:g}",
            file=sys.stderr,
        )
        raise SystemExit(2)
    return hours


def _autoscaler(args: argparse.Namespace, retention_hours: float) -> AutoscalerOptions:
    """`history run`'s autoscaler options; SystemExit(2) naming a bad setting."""
    from services.history.advice import settings
    from services.history.autoscaler import AutoscalerOptions, Mode

    try:
        policy, window = settings(args.autoscaler_settings)
    except ValueError as error:
        print(f"scalefold history run: -D {error}", file=sys.stderr)
        raise SystemExit(2) from None
    return AutoscalerOptions(
        Mode(args.autoscaler),
        policy,
        window,
        args.autoscaler_interval,
        retention_hours=retention_hours,
    )


def run(args: argparse.Namespace, context: Context) -> int:
    from pyspark.errors import StreamingQueryException

    from services.contracts import SchemaRegistry
    from services.contracts.disk import wait_for_room
    from services.contracts.preflight import prepare
    from services.history import job

    settings, topics = context.settings, context.settings.topics
    options = _run_options(args, context)  # a bad option is said before the broker is asked
    prepare(settings, "history")
    wait_for_room(options.layout.data_dir, log)  # before the first write (contracts/disk.py)
    say(f"reading {topics.rescales} at {settings.bootstrap_servers}")
    conf = _endpoint(args).spark_conf() if _serves_sql(args) else {}
    if options.jdbc is not None:
        conf |= options.jdbc.spark_conf(options.layout.data_dir)
        _clear_jdbc_overrides()
    spark = _session(args, context, conf, jvm_output=_jvm_log(args))
    # after the session: pyspark's SparkContext installs its own SIGINT handler (it
    # cancels the jobs over py4j from inside the signal, re-entering a py4j call)
    stop = _stop_on_signals()
    registry = SchemaRegistry.load(settings.schemas_dir)
    rest = _rest_api(args, options.layout.data_dir)
    try:
        return job.run(spark, settings, registry, options, progress=say, stop=stop)
    except (job.HistoryJobError, StreamingQueryException) as error:
        print(f"scalefold history run: {error}", file=sys.stderr)
        return 1
    finally:
        if rest is not None:
            from services.history.restapi import embedded

            embedded.stop(rest, options.layout.data_dir)


def _rest_api(args: argparse.Namespace, data_dir: Path) -> ThreadingHTTPServer | None:
    """The rescale REST API beside the job (docs/rest-api.md), unless --rest-port -1."""
    if args.available_now or getattr(args, "rest_port", -1) < 0:
        return None
    from services.history.restapi import embedded

    data_dir.mkdir(parents=True, exist_ok=True)
    from services.history.restapi.command import tls_files

    return embedded.start(data_dir, args.sql_host, args.rest_port, say, tls_files(args))


def _serves_sql(args: argparse.Namespace) -> bool:
    return not (args.available_now or args.no_sql_endpoint)


def _jdbc(args: argparse.Namespace) -> JdbcConfig | None:
    from services.history.endpoint import JdbcConfig

    if not _serves_sql(args) or args.no_jdbc:
        return None
    return JdbcConfig(args.sql_host, args.jdbc_port)


def _clear_jdbc_overrides() -> None:
    """The JVM started next must not inherit what would override --sql-host/--jdbc-port."""
    from services.history.endpoint import JDBC_ENV_OVERRIDES

    for name in JDBC_ENV_OVERRIDES:
        if os.environ.pop(name, None) is not None:
            say(f"ignoring {name} (use --sql-host / --jdbc-port)")


def _endpoint(args: argparse.Namespace) -> EndpointConfig:
    """The SQL endpoint's address, its port chosen once (a free one for --sql-port 0)."""
    from services.history.endpoint import EndpointConfig

    chosen = getattr(args, "_endpoint", None)
    if chosen is None:
        chosen = EndpointConfig(args.sql_host, args.sql_port).resolved()
        args._endpoint = chosen
    return chosen


def _stop_on_signals() -> threading.Event:
    """SIGTERM (`docker stop`, `make down`) or Ctrl-C: stop the queries cleanly.

    The signal only sets a flag; raising inside a py4j call would tear the
    connection to the JVM that is needed to stop the queries. A second Ctrl-C
    interrupts at once.
    """
    stop = threading.Event()

    def handle(signum: int, frame: object) -> None:
        if stop.is_set() and signum == signal.SIGINT:
            raise KeyboardInterrupt
        say(f"received {signal.Signals(signum).name}; stopping")
        stop.set()

    signal.signal(signal.SIGTERM, handle)
    signal.signal(signal.SIGINT, handle)
    return stop
