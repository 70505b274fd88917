"""Benchmark of the history service (not a test): ingest rate and `job_summary` latency.

    .venv/bin/scalefold local run -- .venv/bin/python -m bench.history_bench \
        [--records 100000 500000] [--rows 1000000 10000000] [--runs 3] [--json] \
        [--stream-minutes 10]

1. Ingest: `--records` rescale revisions (synthetic, ~1.5 kB of Avro each) are
   produced once to a fresh topic; each run drains the topic into a fresh data
   directory with the real streaming job (its one query, availableNow) in this
   process's Spark session. Rate = records / (start of the query .. query
   finished), so Spark's start-up is excluded and the first run includes the JIT.
2. Query: for each `--rows`, a synthetic `rescales` table shaped like the job's
   (two revisions per rescale, four spans in each row's array, 1000 jobs) are written with Spark directly and compacted as the service's upkeep
   keeps them (OPTIMIZE); each run collects `job_summary`
   (dedup, percentiles, downtime, flapping windows) over them.

Beside each, its ceiling in the same run: for the ingest, a bare batch read of the
same topic with Spark's Kafka source, decoded with the job's own `decode` (from_avro
and its checks) and aggregated over decoded fields; for the summary, a bare scan of
the same `rescales` table aggregating the columns the summary reads.

3. Files (`--stream-minutes N`): the job runs as a service (1 s trigger, OPTIMIZE
   every `--optimize-minutes`) while a simulated day of rescales (20 jobs, one
   rescale a minute each, about 140k revisions) trickles in over N minutes;
   every 30 s it prints, per table, the data files of the current version
   (what a query reads), the Parquet files on disk (the replaced ones until
   VACUUM), and the Delta log's files.

Prints a markdown table of medians, or with `--json` one JSON object per measured
row (`stage`, `mode`, `jobs`, `events` or `rows`, `per_s_median`, `p99_ms`,
`ceiling_per_s`, `ratio_to_ceiling`); machines here are shared, so repeat runs.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from bench.proc import memory_mib
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts import records as r
from services.history import synthetic
from services.history.catalog import build_views, table_schemas
from services.history.decode import RescaleSchemas
from services.history.job import RunOptions, run, start_queries
from services.history.paths import Layout
from services.history.sinklog import DELTA_LOG, committed_files, data_files
from services.history.spark import history_session
from services.history.tables import EXECUTING, LATEST_TABLE, PARTITION_COLUMN, TABLES
from services.history.upkeep import UpkeepConfig, optimize
from services.history.upsert import write_tables
from services.localstack.jars import spark_connector_jars
from services.localstack.layout import cache_dir

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

JOBS = 1000
T0 = 1_700_000_000_000


def _timed(runs: int, action: Callable[[int], None]) -> list[float]:
    seconds = []
    for number in range(runs):
        started = time.perf_counter()
        action(number)
        seconds.append(time.perf_counter() - started)
    return seconds


def _produce(settings: Settings, records: object, pace: Callable[[int], None] | None = None) -> int:
    """Produce synthetic records to the rescales topic; `pace(count)` after each."""
    from collections.abc import Iterable

    from confluent_kafka import Producer

    from services.contracts.kafka import ensure_topics, librdkafka_config

    assert isinstance(records, Iterable)
    codec = Codec(SchemaRegistry.load())
    ensure_topics(settings, settings.topics.all())
    producer = Producer(librdkafka_config(settings, **{"linger.ms": 20}))
    produced = 0
    for record in records:
        producer.produce(settings.topics.rescales, codec.encode(r.RESCALE, record), record["jobId"])
        producer.poll(0)
        produced += 1
        if pace is not None:
            pace(produced)
    assert producer.flush(60) == 0, "records not delivered"
    return produced


def ingest(
    spark: SparkSession, settings: Settings, records: int, runs: int, work: Path
) -> tuple[int, list[float]]:
    """Messages produced, and seconds per drain of them through the history's streaming query."""
    per_job = max(1, records // (100 * len(synthetic.COMPLETED_PATH) + 100))
    produced = _produce(settings, synthetic.fleet(jobs=100, rescales_per_job=per_job, start_ms=T0))

    def drain(run: int) -> None:
        layout = Layout(work / f"ingest-{run}")
        queries = start_queries(
            spark, settings, SchemaRegistry.load(), RunOptions(layout, available_now=True)
        )
        for query in queries:
            query.awaitTermination()
            assert query.exception() is None, query.exception()

    return produced, _timed(runs, drain)


def ingest_ceiling(spark: SparkSession, settings: Settings, runs: int) -> list[float]:
    """Seconds per bare batch read of the rescales topic + decode + an aggregate over
    decoded fields (so Catalyst cannot skip the decoding)."""
    from pyspark.sql import functions as F

    from services.contracts.kafka import spark_kafka_options
    from services.history.decode import RECORD, decode, valid

    schemas = RescaleSchemas.of(SchemaRegistry.load())

    def read(_: int) -> None:
        raw = (
            spark.read.format("kafka")
            .options(**spark_kafka_options(settings, None))
            .option("subscribe", settings.topics.rescales)
            .option("startingOffsets", "earliest")
            .load()
        )
        row = (
            valid(decode(raw, schemas))
            .agg(
                F.count("*").alias("n"),
                F.countDistinct(F.col(f"{RECORD}.rescaleUuid")).alias("rescales"),
                F.sum(F.size(F.col(f"{RECORD}.schedulerStates"))).alias("spans"),
                F.max(F.col(f"{RECORD}.updatedAtMillis")).alias("newest"),
            )
            .collect()[0]
        )
        assert row["n"] > 0

    return _timed(runs, read)


def summary_ceiling(spark: SparkSession, layout: Layout, runs: int) -> list[float]:
    """Seconds per bare scan of the raw `rescales` table aggregating the summary's columns."""
    from pyspark.sql import functions as F

    def scan(_: int) -> None:
        frame = spark.read.format("delta").load(str(layout.table("rescales")))
        frame.groupBy("job_id").agg(
            F.count("*"), F.max("revision"), F.sum("duration_ms"), F.max("start_timestamp_ms")
        ).collect()

    return _timed(runs, scan)


def _fill(frame: DataFrame, schema: object) -> DataFrame:
    """`frame` shaped to a table schema: its columns cast, the missing ones null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    assert isinstance(schema, StructType)
    present = set(frame.columns)
    columns: list[Column] = [
        (F.col(f.name) if f.name in present else F.lit(None)).cast(f.dataType).alias(f.name)
        for f in schema.fields
    ]
    return frame.select(*columns)


SPAN_MS = 5_000
DOWN_SPANS = sum(state != EXECUTING for state in synthetic.COMPLETED_PATH)


def _spans(start: Column) -> Column:
    """A rescale's spans (`synthetic.COMPLETED_PATH`), `SPAN_MS` each, from `start`."""
    from pyspark.sql import functions as F

    def span(index: int, state: str) -> Column:
        return F.struct(
            F.lit(state).alias("state"),
            (start + index * SPAN_MS).alias("enter_timestamp_ms"),
            (start + (index + 1) * SPAN_MS).alias("leave_timestamp_ms"),
            F.lit(SPAN_MS).cast("long").alias("duration_ms"),
            F.lit(None).cast("string").alias("stringified_exception"),
        )

    return F.array(*[span(i, state) for i, state in enumerate(synthetic.COMPLETED_PATH)])


def synthetic_tables(spark: SparkSession, rows: int, layout: Layout) -> None:
    """`rows` raw rescale rows (2 revisions per rescale), each with 4 spans of `SPAN_MS`;
    the final revision's downtime as the ingest derives it (its spans outside Executing)."""
    from pyspark.sql import functions as F

    schemas = table_schemas(spark, RescaleSchemas.of(SchemaRegistry.load()))
    rescale = F.floor(F.col("id") / 2)
    start = F.lit(T0) + (rescale * 7_000).cast("long")
    duration = (F.hash("id") % 20_000 + 25_000).cast("long")
    final = F.col("id") % 2 == 1
    base = spark.range(rows).select(
        "id",
        (rescale % JOBS).cast("string").alias("job_id"),
        rescale.cast("long").cast("string").alias("rescale_uuid"),
        (F.col("id") % 2 + 1).alias("revision"),
        F.col("id").alias("kafka_offset"),
        F.lit(0).alias("kafka_partition"),
        start.alias("start_timestamp_ms"),
        F.when(final, start + duration).alias("end_timestamp_ms"),
        F.when(final, duration).alias("duration_ms"),
        F.when(final, F.lit(SPAN_MS * DOWN_SPANS).cast("long")).alias("downtime_ms"),
        F.when(final, F.lit("COMPLETED")).alias("terminal_state"),
        F.when(final, F.lit("SUCCEEDED")).alias("terminated_reason"),
        (~final).alias("in_progress"),
        (F.col("id") % 7 + 1).alias("total_post_rescale_slots"),
        _spans(start).alias("scheduler_states"),
        F.timestamp_millis(start).alias("updated_at"),
        F.to_date(F.timestamp_millis(start)).alias(PARTITION_COLUMN),
    )
    frames = {"rescales": _fill(base, schemas["rescales"])}
    write_tables(frames, layout.table)
    for name in (*frames, LATEST_TABLE):  # as the service's upkeep keeps them
        optimize(spark, layout.table(name))


def query(spark: SparkSession, layout: Layout, runs: int) -> list[float]:
    """Seconds per collect of `job_summary`, its views built anew each run as the SQL
    endpoint builds them after a commit (from the tables' schemas it derives once)."""
    schemas = RescaleSchemas.of(SchemaRegistry.load())
    found = table_schemas(spark, schemas)

    def summary(_: int) -> None:
        rows = build_views(spark, layout, schemas, found)["job_summary"].collect()
        assert len(rows) == JOBS, len(rows)

    return _timed(runs, summary)


def stream_files(
    spark: SparkSession, settings: Settings, work: Path, minutes: float, optimize_minutes: float
) -> list[dict[str, object]]:
    """Run the job as a service while a simulated day trickles in; sample the file counts."""
    from services.contracts import SchemaRegistry as Registry

    layout = Layout(work / "stream")
    day = list(synthetic.fleet(jobs=20, rescales_per_job=1440, start_ms=T0))
    per_second = len(day) / (minutes * 60)
    began = time.monotonic()

    def pace(count: int) -> None:
        ahead = count / per_second - (time.monotonic() - began)
        if ahead > 0:
            time.sleep(ahead)

    # The bench's own retention (the CLI's floor is 1 h): replaced files go within minutes;
    # a batch's files in flight are seconds old, far below it.
    options = RunOptions(
        layout,
        trigger_seconds=1.0,
        plan_commands=False,
        upkeep=UpkeepConfig(optimize_minutes=optimize_minutes, retention_hours=0.05),
    )
    stop = threading.Event()
    job = threading.Thread(
        target=run,
        args=(spark, settings, Registry.load(), options, lambda _: None),
        kwargs={"stop": stop},
    )
    job.start()
    feeder = threading.Thread(target=_produce, args=(settings, day, pace))
    feeder.start()
    samples: list[dict[str, object]] = []
    try:
        while feeder.is_alive() or len(samples) < 2:
            time.sleep(30)
            samples.append(_file_counts(layout, time.monotonic() - began))
            print(json.dumps(samples[-1]), flush=True)
    finally:
        feeder.join()
        stop.set()
        job.join()
    samples.append(_file_counts(layout, time.monotonic() - began))
    samples[-1]["records"] = len(day)
    return samples


def _file_counts(layout: Layout, elapsed: float) -> dict[str, object]:
    counts: dict[str, object] = {"stage": "history", "mode": "files", "elapsed_s": round(elapsed)}
    for name in (*TABLES, LATEST_TABLE):
        path = layout.table(name)
        on_disk = data_files(path)
        log_files = list((path / DELTA_LOG).glob("*")) if (path / DELTA_LOG).is_dir() else []
        counts[name] = {
            "active": len(committed_files(path)),
            "on_disk": len(on_disk),
            "log": len(log_files),
        }
    return counts


def _marginal(small: list[float], large: list[float]) -> list[float]:
    """The seconds the larger size took beyond the smaller, medians of their runs (the
    first run of the first size also warms the JVM up: runs are not paired)."""
    return [max(statistics.median(large) - statistics.median(small), 1e-3)]


def jvm_memory(spark: SparkSession) -> dict[str, int]:
    """The resident memory of Spark's JVM (the driver, and in local mode its executors)
    now and at its peak, MiB."""
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    rss, peak = memory_mib(int(pid))
    return {"jvm_rss_mib": round(rss), "jvm_rss_mib_peak": round(peak)}


def _table_bytes(layout: Layout) -> int:
    """The data files of the tables' current versions (not the ones OPTIMIZE replaced)."""
    names = (*TABLES, LATEST_TABLE)
    return sum(f.stat().st_size for name in names for f in committed_files(layout.table(name)))


def _json_row(
    mode: str, amount: int, seconds: list[float], ceiling: list[float], **extra: object
) -> str:
    rate = amount / statistics.median(seconds)
    ceiling_rate = amount / statistics.median(ceiling)
    return json.dumps(
        {
            "stage": "history",
            "mode": mode,
            "jobs": extra.pop("jobs"),
            **extra,
            "per_s_median": round(rate),
            "p99_ms": None,
            "ceiling_per_s": round(ceiling_rate),
            "ratio_to_ceiling": round(rate / ceiling_rate, 3),
            "runs_s": [round(s, 2) for s in seconds],
        }
    )


def _row(name: str, seconds: list[float], per: float | None = None) -> str:
    median = statistics.median(seconds)
    rate = f"{per / median:,.0f} records/s" if per else ""
    runs = ", ".join(f"{s:.1f}" for s in seconds)
    return f"| {name} | {median:.2f} s | {rate} | {runs} |"


def ingest_rows(
    spark: SparkSession, settings: Settings, args: argparse.Namespace
) -> tuple[list[str], list[str]]:
    """The ingest's table lines and JSON rows: each --records size on its own topic,
    then the marginal rate between the two largest."""
    lines: list[str] = []
    rows_json: list[str] = []
    drained: list[tuple[int, list[float], list[float]]] = []
    for records in (n for n in args.records if n):
        topic_settings = settings.with_overrides(topic_prefix=f"{settings.topic_prefix}{records}.")
        count, seconds = ingest(
            spark, topic_settings, records, args.runs, args.work_dir / f"records-{records}"
        )
        ceiling = ingest_ceiling(spark, topic_settings, args.runs)
        drained.append((count, seconds, ceiling))
        lines.append(_row(f"ingest {count:,} records", seconds, count))
        lines.append(_row("ceiling: bare Kafka read + decode + aggregate", ceiling, count))
        rows_json.append(
            _json_row(
                "ingest", count, seconds, ceiling, jobs=100, events=count, **jvm_memory(spark)
            )
        )
        print("\n".join(lines[-2:]), flush=True)
    if len(drained) >= 2:
        (small, small_s, small_c), (large, large_s, large_c) = sorted(drained)[-2:]
        marginal = _marginal(small_s, large_s)
        marginal_ceiling = _marginal(small_c, large_c)
        lines.append(_row(f"ingest, marginal {small:,} -> {large:,}", marginal, large - small))
        lines.append(_row("ceiling, marginal", marginal_ceiling, large - small))
        rows_json.append(
            _json_row(
                "ingest-marginal",
                large - small,
                marginal,
                marginal_ceiling,
                jobs=100,
                events=large - small,
                between=[small, large],
            )
        )
        print("\n".join(lines[-2:]), flush=True)
    return lines, rows_json


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--records",
        type=int,
        nargs="*",
        default=[20_000],
        help="rescale revisions to ingest, each size on its own topic; with two or more, also "
        "the marginal rate between the two largest (none or 0: skip ingest)",
    )
    parser.add_argument(
        "--rows",
        type=int,
        nargs="*",
        default=[1_000_000, 10_000_000],
        help="sizes of the synthetic tables job_summary is timed over (none: skip)",
    )
    parser.add_argument("--runs", type=int, default=3, help="timed runs of each measurement")
    parser.add_argument(
        "--work-dir",
        type=Path,
        default=Path(".run/history-bench"),
        help="where the tables go (emptied first)",
    )
    parser.add_argument("--driver-memory", default="4g", help="Spark's spark.driver.memory")
    parser.add_argument("--json", action="store_true", help="one JSON object per measured row")
    parser.add_argument(
        "--stream-minutes",
        type=float,
        default=0,
        help="minutes a simulated day of rescales streams in, printing file counts (0: skip)",
    )
    parser.add_argument(
        "--optimize-minutes",
        type=float,
        default=1.0,
        help="the service's --optimize-minutes during --stream-minutes",
    )
    args = parser.parse_args(argv)
    bootstrap = os.environ.get("SCALEFOLD_BOOTSTRAP_SERVERS")
    if not bootstrap:
        print("run under `scalefold local run -- ...` (needs a broker)", file=sys.stderr)
        return 2
    shutil.rmtree(args.work_dir, ignore_errors=True)
    jars = spark_connector_jars(cache_dir(os.environ), progress=print)
    spark = history_session(jars, "local[*]", {"spark.driver.memory": args.driver_memory})
    settings = Settings(bootstrap_servers=bootstrap, topic_prefix=f"bench{int(time.time())}.")
    lines = ["| measurement | median | rate | runs (s) |", "|---|---:|---:|---|"]
    rows_json: list[str] = []
    ingested, ingested_json = ingest_rows(spark, settings, args)
    lines += ingested
    rows_json += ingested_json
    for rows in args.rows:
        layout = Layout(args.work_dir / f"rows-{rows}")
        started = time.perf_counter()
        synthetic_tables(spark, rows, layout)
        print(f"wrote {rows:,} synthetic rows in {time.perf_counter() - started:.0f} s", flush=True)
        seconds = query(spark, layout, args.runs)
        ceiling = summary_ceiling(spark, layout, args.runs)
        lines.append(_row(f"job_summary over {rows:,} rescale rows", seconds, rows))
        lines.append(_row("ceiling: bare scan + aggregate of the same rows", ceiling, rows))
        rows_json.append(
            _json_row(
                "summary",
                rows,
                seconds,
                ceiling,
                jobs=JOBS,
                rows=rows,
                table_mib=round(_table_bytes(layout) / 2**20),
                **jvm_memory(spark),
            )
        )
        print("\n".join(lines[-2:]), flush=True)
    if args.stream_minutes:
        samples = stream_files(
            spark, settings, args.work_dir, args.stream_minutes, args.optimize_minutes
        )
        rows_json.append(json.dumps(samples[-1]))
    print("\n".join(rows_json if args.json else lines))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
