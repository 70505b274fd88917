"""The query layer: the Delta tables read back, one row per rescale, as Spark SQL views.

A rescale is sent once per update (FLIP-495 records change while in progress),
and a crashed scheduler may send a revision again byte for byte. The views show
each rescaleUuid once, in its latest state: the highest `revision`, and among
equal revisions (duplicates, or v1 records which all carry revision 0) the
highest Kafka offset. That row is kept up to date by MERGE in the table
`rescales_latest` (upsert.py), so a query reads one row per rescale instead of
ranking every revision. Child tables keep the rows of that one message.

The tables are read as Delta tables: Spark follows the Delta log, so files of a
version that was not committed stay invisible.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from services.history import aggregates
from services.history.decode import RescaleSchemas, decode, valid
from services.history.flink_tables import LATEST_TABLE as FLINK_LATEST
from services.history.flink_tables import RAW_TABLE as FLINK_RAW
from services.history.flink_tables import flink_rescales
from services.history.flink_views import VIEWS as FLINK_VIEWS
from services.history.flink_views import flink_views
from services.history.sinklog import is_delta
from services.history.tables import CHILD_TABLES, LATEST_TABLE, TABLES

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

KAFKA_SOURCE_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
"""The columns of Spark's Kafka source, for building frames without a broker."""

LATEST_ORDER = ("revision", "kafka_offset", "kafka_partition")
"""What "latest" means: highest revision, then the message written last."""


@dataclass(frozen=True)
class Layout:
    """Where the history keeps its tables and its streaming checkpoints."""

    data_dir: Path

    def table(self, name: str) -> Path:
        return self.data_dir / "tables" / name

    def checkpoint(self, name: str) -> Path:
        return self.data_dir / "checkpoints" / name


def table_schemas(spark: SparkSession, schemas: RescaleSchemas) -> dict[str, StructType]:
    """The schema of every table, derived from the transforms (no data needed); the Flink
    rescales' (`flink_rescales`, that of `flink_rescales_latest` too) when known."""
    source = spark.createDataFrame([], KAFKA_SOURCE_SCHEMA)
    empty = valid(decode(source, schemas))
    found = {name: transform(empty).schema for name, transform in TABLES.items()}
    if schemas.flink is not None:
        found[FLINK_RAW] = flink_rescales(valid(decode(source, schemas.flink))).schema
    return found


def read_table(spark: SparkSession, path: Path, schema: StructType) -> DataFrame:
    """A table's committed rows, in `schema`'s columns; empty (with the schema) before
    its first commit.

    Delta reads a table in the schema of its log (a reader cannot impose one), so
    columns added to `schema` later read as null from a table written before.
    """
    from pyspark.sql import functions as F

    if not is_delta(path):
        return spark.createDataFrame([], schema)
    frame = spark.read.format("delta").load(str(path))
    present = set(frame.columns)
    return frame.select(
        *[
            F.col(f.name) if f.name in present else F.lit(None).cast(f.dataType).alias(f.name)
            for f in schema.fields
        ]
    )


def latest_revisions(rescales: DataFrame, keys: tuple[str, ...] = ("rescale_uuid",)) -> DataFrame:
    """One row per rescale (`keys`: its rescale_uuid): the row of its latest revision.

    A window rather than `max_by(struct(*))`: Spark prunes the columns a query
    does not read through a window (not through a struct), and turns
    `row_number() = 1` into a group limit applied before the shuffle.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy(*keys).orderBy(*[F.col(c).desc() for c in LATEST_ORDER])
    ranked = rescales.withColumn("_rank", F.row_number().over(order))
    return ranked.where(F.col("_rank") == 1).drop("_rank")


def latest_children(children: DataFrame, latest: DataFrame) -> DataFrame:
    """The rows of `children` that belong to the message chosen by `latest_revisions`."""
    keys = ["rescale_uuid", "kafka_partition", "kafka_offset"]
    return children.join(latest.select(*keys), on=keys, how="left_semi")


SUMMARIES = ("job_summary", "fleet_summary")


def view_names() -> tuple[str, ...]:
    """The names `build_views` defines, known without Spark."""
    return (
        *[f"raw_{name}" for name in TABLES],
        "rescales",
        *CHILD_TABLES,
        *SUMMARIES,
        *FLINK_VIEWS,
    )


def build_views(
    spark: SparkSession,
    layout: Layout,
    schemas: RescaleSchemas,
    found: dict[str, StructType] | None = None,
) -> dict[str, DataFrame]:
    """Every view by name: `raw_<table>` (all revisions), the deduped tables, the summaries,
    and the rescales real Flink clusters recorded with their comparison (flink_views.py).

    `found`: the tables' schemas (`table_schemas`), when known already."""
    found = found or table_schemas(spark, schemas)
    raw = {name: read_table(spark, layout.table(name), found[name]) for name in TABLES}
    latest = read_table(spark, layout.table(LATEST_TABLE), found["rescales"])
    views = {f"raw_{name}": frame for name, frame in raw.items()}
    views["rescales"] = latest
    for name in CHILD_TABLES:
        views[name] = latest_children(raw[name], latest)
    reasons = schemas.enum_symbols("TerminatedReason")
    views["job_summary"] = aggregates.job_summary(latest, reasons)
    views["fleet_summary"] = aggregates.fleet_summary(latest, reasons)
    if FLINK_RAW in found:
        flink_raw = read_table(spark, layout.table(FLINK_RAW), found[FLINK_RAW])
        flink_latest = read_table(spark, layout.table(FLINK_LATEST), found[FLINK_RAW])
        views |= flink_views(flink_raw, flink_latest, views)
    return views


def register_views(
    spark: SparkSession, layout: Layout, schemas: RescaleSchemas
) -> dict[str, DataFrame]:
    """`build_views`, each registered as a temporary view of its name."""
    views = build_views(spark, layout, schemas)
    for name, frame in views.items():
        frame.createOrReplaceTempView(name)
    return views
