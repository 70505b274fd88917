"""The query layer: the Delta tables read back, one row per rescale, as Spark SQL views.

A rescale is sent once per update (FLIP-495 records change while in progress),
and a crashed scheduler may send a revision again byte for byte. The views show
each rescaleUuid once, in its latest state: the highest `revision`, and among
equal revisions (duplicates, or v1 records which all carry revision 0) the
highest Kafka offset. That row is kept up to date by MERGE in the table
`rescales_latest` (upsert.py), so a query reads one row per rescale instead of
ranking every revision. A row keeps its record's arrays (vertices, slot-sharing
groups, state spans, transition phases); the child views explode them.

The tables are read as Delta tables (catalog.py): Spark follows the Delta log, so
files of a version that was not committed stay invisible.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from services.history import aggregates
from services.history.tables import CHILDREN, LATEST_TABLE, TABLES, children

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from services.history.decode import RescaleSchemas

KAFKA_SOURCE_SCHEMA = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
"""The columns of Spark's Kafka source, for building frames without a broker."""

LATEST_ORDER = ("revision", "kafka_offset", "kafka_partition")
"""What "latest" means: highest revision, then the message written last."""


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
SCALEFOLD_VIEWS = (
    *[f"raw_{name}" for name in (*TABLES, *CHILDREN)],
    "rescales",
    *CHILDREN,
    *SUMMARIES,
)
"""The views of scalefold's own rescales (`scalefold_views`), known without Spark."""


def scalefold_views(
    tables: Mapping[str, DataFrame], _before: Mapping[str, DataFrame], schemas: RescaleSchemas
) -> dict[str, DataFrame]:
    """`raw_<table>` (every revision), `rescales` (the latest table), the child views (the
    arrays of each row exploded, `raw_<child>` of every revision's, `<child>` of the latest
    revision's), and the summaries (aggregates.py). `tables`: the source's tables by name
    (sources.RESCALES), read as the catalog reads them (catalog.py), with the child tables
    of an earlier scalefold where it left them (their rows' arrays are null)."""
    raw, latest = tables["rescales"], tables[LATEST_TABLE]
    views = {f"raw_{name}": tables[name] for name in TABLES}
    views["rescales"] = latest
    for name in CHILDREN:
        views[f"raw_{name}"] = _with_legacy(children(raw, name), tables.get(name))
        views[name] = _with_legacy(children(latest, name), tables.get(name), latest)
    reasons = schemas.enum_symbols("TerminatedReason")
    views["job_summary"] = aggregates.job_summary(latest, reasons)
    views["fleet_summary"] = aggregates.fleet_summary(latest, reasons)
    return views


def _with_legacy(
    exploded: DataFrame, legacy: DataFrame | None, latest: DataFrame | None = None
) -> DataFrame:
    """`exploded` and the rows of an earlier scalefold's child table (`legacy`), of the
    latest revisions only when `latest` is given."""
    if legacy is None:
        return exploded
    old = legacy if latest is None else latest_children(legacy, latest)
    return exploded.unionByName(old)
