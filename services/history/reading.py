"""What `history sql`, `history summary` and `history timeline` do; `cli.py` declares them.

`summary` and `timeline` read the committed Delta tables themselves (lake.py), with
no JVM, whether a history service runs or not. `sql` runs Spark SQL: on the
running history service over Spark Connect when one serves `--data-dir`, else in
a Spark session of its own on the same files; either way it says, after the
answer, which of the two it read, so `(0 rows)` never hides a query of an empty
or another place.

A mistake (bad SQL, an unknown view, a job with no rescales, a history that is
not there) is one line on stderr and exit status 1 (mistakes.py); `-v` adds what
Spark said in full. pyspark is imported by `sql` alone.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from services.history import lake, mistakes
from services.history.handlers import say, verbose
from services.history.paths import Layout
from services.history.tables import LATEST_TABLE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from services.clicontext import Context

PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")
"""pyspark logs every query error as a JSON line of its own to stderr (PySparkLogger)."""


def fail(args: argparse.Namespace, verb: str, line: str, detail: str | None = None) -> int:
    """The mistake's one line (and with -v what lies behind it); exit status 1."""
    print(f"scalefold history {verb}: {line}", file=sys.stderr)
    if detail and getattr(args, "verbose", False):
        print(detail, file=sys.stderr)
    return 1


def served(data_dir: Path) -> str | None:
    """The Spark Connect address of a history service running for `data_dir`, if any."""
    from services.history.endpoint import reachable, read_url

    url = read_url(data_dir)
    return url if url is not None and reachable(url) else None


def sql(args: argparse.Namespace, context: Context) -> int:
    data_dir = Path(args.data_dir)
    url = served(data_dir.resolve())
    if url is None and not data_dir.is_dir():
        reason = f"no history at {data_dir}: no such directory, and no history service runs for it"
        return fail(args, "sql", mistakes.no_history(reason))
    if not args.verbose:
        _quiet_pyspark()
    from pyspark.errors import PySparkException

    from services.history.catalog import view_names
    from services.history.render import render

    try:
        spark = _sql_session(args, context, url)
        frame = spark.sql(args.query)
        rows = frame.limit(args.max_rows + 1).collect()
        columns = frame.columns
    except PySparkException as error:
        tables = Layout(data_dir).tables
        return fail(args, "sql", mistakes.spark_error(error, view_names(), tables), str(error))
    print(render(args.format, columns, [tuple(r) for r in rows[: args.max_rows]]), flush=True)
    if len(rows) > args.max_rows:
        say(f"showing the first {args.max_rows} rows; raise --max-rows for more")
    say(_provenance(data_dir, url))
    return 0


def _provenance(data_dir: Path, url: str | None) -> str:
    if url is not None:
        return f"read from the history service running at {url} for {data_dir}"
    empty = "" if lake.Lake(data_dir).committed(LATEST_TABLE) else ", which hold no rescale yet"
    return (
        f"read from the files under {data_dir / 'tables'}{empty} "
        f"(no history service runs for {data_dir}: a Spark session of this command's own)"
    )


def _quiet_pyspark() -> None:
    from pyspark.logger import PySparkLogger

    for name in PYSPARK_ERROR_LOGGERS:
        PySparkLogger.getLogger(name).disabled = True


def _sql_session(args: argparse.Namespace, context: Context, url: str | None) -> SparkSession:
    """A Connect session on the running service (its views under their plain names), else
    a local session with the views registered over the files."""
    from services.contracts import SchemaRegistry
    from services.history.catalog import register_views
    from services.history.decode import RescaleSchemas
    from services.history.endpoint import referenced, remote_session
    from services.history.handlers import _layout, _session
    from services.history.spark import one_shot_output

    if url is not None:
        verbose(args, f"querying the running history service at {url}")
        return remote_session(url, referenced(args.query))
    layout = _layout(args)
    verbose(args, f"no running history service for {layout.data_dir}; using a local Spark")
    show = say if args.verbose else (lambda _: None)
    spark = _session(args, context, jvm_output=one_shot_output(args.verbose), show=show)
    registry = SchemaRegistry.load(context.settings.schemas_dir)
    register_views(spark, layout, RescaleSchemas.of(registry))
    return spark


def _lake(args: argparse.Namespace) -> lake.Lake:
    try:
        return lake.Lake.at(Path(args.data_dir))
    except lake.HistoryNotFoundError as error:
        raise lake.HistoryNotFoundError(mistakes.no_history(str(error))) from None


def summary(args: argparse.Namespace, context: Context) -> int:
    from services.history import overview

    try:
        history = _lake(args)
        shown = _sources(history, args)
        if isinstance(shown, str):
            return fail(args, "summary", shown)
        found = [(scope, lake.summary(history, job, source)) for scope, job, source in shown]
        if args.job and all(summary.counts["total"] == 0 for _, summary in found):
            return fail(args, "summary", _unknown(history, args))
    except (lake.HistoryNotFoundError, lake.HistoryUnreadableError) as error:
        return fail(args, "summary", str(error))
    verbose(args, f"read the committed Delta tables under {history.data_dir / 'tables'}")
    # a side with no rescale is left out where another has some (the fleet's with no Flink)
    shown_found = [side for side in found if side[1].counts["total"]] or found[:1]
    for number, (scope, summary) in enumerate(shown_found):
        print("\n" if number else "", end="")
        print(overview.format_overview(scope, summary.counts, summary.latest))
        print()
        print(overview.format_summary(scope, summary.stats))
    decided = _decisions(history, shown)
    if decided:
        print("\n" + "\n".join(decided))
    return 0


def _decisions(history: lake.Lake, shown: list[Shown]) -> list[str]:
    """The autoscaler's decisions (decisions.py) of the Flink job shown, or of every job."""
    from services.history.decisions import summary_lines

    flink = [job for _, job, source in shown if source is lake.FLINK]
    if flink and flink[0] is not None:
        return summary_lines(history, flink[0])
    return summary_lines(history, None) if not any(job for _, job, _ in shown) else []


def _sources(history: lake.Lake, args: argparse.Namespace) -> list[Shown] | str:
    """What to show of `--job` (or of the fleet) by `--source`: (scope, job, source).

    A real Flink's job is named by Flink's job id or by its key `cluster.id`, which is
    also the id of scalefold's prediction of it: `both` (the default) shows Flink's
    records and the prediction, each where there is one."""
    job, source = args.job, args.source
    if job is None:
        sides = [("the fleet", None, lake.SCALEFOLD), ("a real Flink's jobs", None, lake.FLINK)]
        return [side for side in sides if source in ("both", side[2].name)]
    keys = lake.flink_keys(history, job) if source != "scalefold" else []
    if len(keys) > 1:
        return f"job {job} is on several Flink clusters ({', '.join(keys)}); give its cluster.id"
    key = keys[0] if keys else job
    shown: list[Shown] = []
    if keys:
        shown.append((f"Flink's records of job {key}", key, lake.FLINK))
    if source != "flink":
        named = f"scalefold's prediction of job {key}" if keys else f"job {key}"
        shown.append((named, key, lake.SCALEFOLD))
    return shown


Shown = tuple[str, "str | None", lake.Source]


def _unknown(history: lake.Lake, args: argparse.Namespace) -> str:
    """A job no chosen source knows, with the ones they do."""
    known = [] if args.source == "flink" else lake.jobs(history)
    flink = [] if args.source == "scalefold" else lake.jobs(history, source=lake.FLINK)
    return mistakes.no_rescales(args.job, args.data_dir, sorted({*known, *flink}))


def timeline(args: argparse.Namespace, context: Context) -> int:
    from services.history import timeline as chart

    suffix = args.out.suffix.lower()
    if suffix not in (".png", ".html"):
        return fail(args, "timeline", f"--out must end in .png or .html, not {args.out}")
    try:
        history = _lake(args)
        shown = _sources(history, args)
        if isinstance(shown, str):
            return fail(args, "timeline", shown)
        rows, drawn = [], set()
        for _, job, source in shown:
            spans = (
                lake.flink_timeline_spans(history, job or "", args.last)
                if source is lake.FLINK
                else lake.timeline_spans(history, job or "", args.last)
            )
            found = chart.timeline_rows(spans, _label(source) if len(shown) > 1 else "")
            drawn |= {source.name} if found else set()
            rows += found
        if not rows:
            return fail(args, "timeline", _unknown(history, args))
    except (lake.HistoryNotFoundError, lake.HistoryUnreadableError) as error:
        return fail(args, "timeline", str(error))
    rows.sort(key=lambda row: (row.start_ms, row.label))
    verbose(args, f"read the committed Delta tables under {history.data_dir / 'tables'}")
    title = f"Rescales of job {shown[0][1]}" + (
        ": Flink's, and scalefold's prediction" if len(drawn) > 1 else ""
    )
    if suffix == ".png":
        chart.render_png(rows, args.out, title, args.relative)
    else:
        args.out.write_text(chart.render_html(rows, title, args.relative), encoding="utf-8")
    say(f"wrote {len(rows)} rescales to {args.out}")
    return 0


def _label(source: lake.Source) -> str:
    """A chart row's prefix when both sides are drawn: whose rescale it is."""
    return "Flink" if source is lake.FLINK else "scalefold"
