"""Every source's Delta tables read back, and their views by name (sources.py declares them).

Spark follows each table's Delta log, so files of a version that was not committed stay
invisible; a table not committed yet reads as empty, in the schema its transform gives
(derived from the transforms over an empty Kafka frame: no data needed).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from services.history import decisions, verdicts
from services.history.decode import RescaleSchemas, decode, valid
from services.history.paths import Layout
from services.history.sinklog import is_delta
from services.history.sources import SOURCES, Source
from services.history.tables import children
from services.history.views import KAFKA_SOURCE_SCHEMA

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType


def source_schemas(source: Source, schemas: RescaleSchemas) -> RescaleSchemas:
    """`source`'s record versions, from the registry `schemas` came from."""
    return (
        schemas if schemas.reader.full_name == source.record else schemas.of_record(source.record)
    )


def table_schemas(spark: SparkSession, schemas: RescaleSchemas) -> dict[str, StructType]:
    """The schema of every source's every table (a latest table has its raw table's)."""
    empty = spark.createDataFrame([], KAFKA_SOURCE_SCHEMA)
    found: dict[str, StructType] = {}
    for source in SOURCES:
        decoded = valid(decode(empty, source_schemas(source, schemas)))
        raw = source.transform(decoded)
        found[source.raw_table] = found[source.latest_table] = raw.schema
        for name in source.legacy:
            found[name] = children(raw, name).schema
    return found


def arrow_schema(schema: StructType) -> pa.Schema:
    """A table's schema for pyarrow (the latest writers' rows: writers.py), every field
    nullable as Delta keeps them."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    def nullable(kind: pa.DataType) -> pa.DataType:
        if pa.types.is_struct(kind):
            return pa.struct([f.with_type(nullable(f.type)).with_nullable(True) for f in kind])
        if pa.types.is_list(kind):
            return pa.list_(nullable(kind.value_type))
        return kind

    arrow = to_arrow_schema(schema)
    return pa.schema([f.with_type(nullable(f.type)).with_nullable(True) for f in arrow])


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


DERIVED = {
    verdicts.TABLE: verdicts.spark_schema,
    decisions.TABLE: decisions.spark_schema,
}
"""The tables the history service derives in threads of its own (judge.py, autoscaler.py),
each its own view: by name, their schemas."""


def view_names() -> tuple[str, ...]:
    """The names `build_views` defines, known without Spark."""
    return (*DERIVED, *(name for source in SOURCES for name in source.view_names))


def build_views(
    spark: SparkSession,
    layout: Layout,
    schemas: RescaleSchemas,
    found: dict[str, StructType] | None = None,
) -> dict[str, DataFrame]:
    """Every source's views by name, each source's tables read once.

    `found`: the tables' schemas (`table_schemas`), when known already."""
    found = found or table_schemas(spark, schemas)
    # the history's own judgement of the Flink pairs (judge.py), which the Flink views join
    views: dict[str, DataFrame] = {
        name: read_table(spark, layout.table(name), schema()) for name, schema in DERIVED.items()
    }
    for source in SOURCES:
        present = [name for name in source.legacy if is_delta(layout.table(name))]
        tables = {
            name: read_table(spark, layout.table(name), found[name])
            for name in (*source.all_tables, *present)
        }
        views |= source.views(tables, views, source_schemas(source, schemas))
    return views


def register_views(
    spark: SparkSession, layout: Layout, schemas: RescaleSchemas
) -> dict[str, DataFrame]:
    """`build_views`, each registered as a temporary view of its name."""
    views = build_views(spark, layout, schemas)
    for name, frame in views.items():
        frame.createOrReplaceTempView(name)
    return views
