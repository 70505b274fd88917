"""Benchmark of the history service (not a test): ingest rate and `job_summary` latency.

    .venv/bin/scalefold local run -- .venv/bin/python -m bench.history_bench \
        [--records 20000] [--rows 1000000 10000000] [--runs 3]

1. Ingest: `--records` rescale revisions (synthetic, ~1.5 kB of Avro each) are
   produced once to a fresh topic; each run drains the topic into a fresh data
   directory with the real streaming job (all six queries, availableNow) in this
   process's Spark session. Rate = records / (start of the queries .. last query
   finished), so Spark's start-up is excluded and the first run includes the JIT.
2. Query: for each `--rows`, synthetic `rescales` and `rescale_states` tables
   shaped like the job's (two revisions per rescale, four spans per revision,
   1000 jobs) are written with Spark directly; each run collects `job_summary`
   (dedup, percentiles, downtime join, flapping windows) over them.

Prints a markdown table of medians; machines here are shared, so repeat runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts import records as r
from services.history import synthetic
from services.history.decode import RescaleSchemas
from services.history.job import RunOptions, start_queries
from services.history.spark import history_session
from services.history.tables import PARTITION_COLUMN
from services.history.upsert import write_tables
from services.history.views import Layout, build_views, table_schemas
from services.localstack.jars import spark_connector_jars
from services.localstack.layout import cache_dir

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

JOBS = 1000
T0 = 1_700_000_000_000


def _timed(runs: int, action: Callable[[int], None]) -> list[float]:
    seconds = []
    for run in range(runs):
        started = time.perf_counter()
        action(run)
        seconds.append(time.perf_counter() - started)
    return seconds


def ingest(
    spark: SparkSession, settings: Settings, records: int, runs: int, work: Path
) -> tuple[int, list[float]]:
    """Messages produced, and seconds per drain of them through the six streaming queries."""
    from confluent_kafka import Producer

    from services.contracts.kafka import ensure_topics, librdkafka_config

    registry = SchemaRegistry.load()
    codec, schemas = Codec(registry), RescaleSchemas.of(registry)
    ensure_topics(settings, settings.topics.all())
    producer = Producer(librdkafka_config(settings, **{"linger.ms": 20}))
    per_job = max(1, records // (100 * len(synthetic.COMPLETED_PATH) + 100))
    produced = 0
    for record in synthetic.fleet(jobs=100, rescales_per_job=per_job, start_ms=T0):
        producer.produce(settings.topics.rescales, codec.encode(r.RESCALE, record), record["jobId"])
        producer.poll(0)
        produced += 1
    assert producer.flush(60) == 0, "records not delivered"

    def drain(run: int) -> None:
        layout = Layout(work / f"ingest-{run}")
        queries = start_queries(spark, settings, schemas, RunOptions(layout, available_now=True))
        for query in queries:
            query.awaitTermination()
            assert query.exception() is None, query.exception()

    return produced, _timed(runs, drain)


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


def synthetic_tables(spark: SparkSession, rows: int, layout: Layout) -> None:
    """`rows` raw rescale rows (2 revisions per rescale) and 4 spans for each."""
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
        F.when(final, F.lit("COMPLETED")).alias("terminal_state"),
        F.when(final, F.lit("SUCCEEDED")).alias("terminated_reason"),
        (~final).alias("in_progress"),
        (F.col("id") % 7 + 1).alias("total_post_rescale_slots"),
        F.timestamp_millis(start).alias("updated_at"),
        F.to_date(F.timestamp_millis(start)).alias(PARTITION_COLUMN),
    )
    states = base.select(
        *[c for c in base.columns if c not in ("id",)],
        F.posexplode(F.array(*[F.lit(s) for s in synthetic.COMPLETED_PATH])).alias(
            "span_index", "state"
        ),
    ).withColumn("enter_timestamp_ms", F.col("start_timestamp_ms") + F.col("span_index") * 5_000)
    states = states.withColumn("leave_timestamp_ms", F.col("enter_timestamp_ms") + 5_000)
    states = states.withColumn("duration_ms", F.lit(5_000).cast("long"))
    frames = {
        name: _fill(frame, schemas[name])
        for name, frame in (("rescales", base), ("rescale_states", states))
    }
    write_tables(frames, layout.table)


def query(spark: SparkSession, layout: Layout, runs: int) -> list[float]:
    schemas = RescaleSchemas.of(SchemaRegistry.load())

    def summary(_: int) -> None:
        rows = build_views(spark, layout, schemas)["job_summary"].collect()
        assert len(rows) == JOBS, len(rows)

    return _timed(runs, summary)


def _row(name: str, seconds: list[float], per: float | None = None) -> str:
    median = statistics.median(seconds)
    rate = f"{per / median:,.0f} records/s" if per else ""
    runs = ", ".join(f"{s:.1f}" for s in seconds)
    return f"| {name} | {median:.2f} s | {rate} | {runs} |"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--rows", type=int, nargs="*", default=[1_000_000, 10_000_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--work-dir", type=Path, default=Path(".run/history-bench"))
    parser.add_argument("--driver-memory", default="4g")
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
    if args.records:
        count, seconds = ingest(spark, settings, args.records, args.runs, args.work_dir)
        lines.append(_row(f"ingest {count:,} records, 6 queries", seconds, count))
        print(lines[-1], flush=True)
    for rows in args.rows:
        layout = Layout(args.work_dir / f"rows-{rows}")
        started = time.perf_counter()
        synthetic_tables(spark, rows, layout)
        print(f"wrote {rows:,} synthetic rows in {time.perf_counter() - started:.0f} s", flush=True)
        lines.append(
            _row(f"job_summary over {rows:,} rescale rows", query(spark, layout, args.runs))
        )
        print(lines[-1], flush=True)
    print("\n".join(lines))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
