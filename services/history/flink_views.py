"""The views of the rescales real Flink clusters recorded. Pure DataFrame transforms.

`flink_rescales` is the table `flink_rescales_latest` (one row per rescale, its
latest revision); `flink_rescale_revisions` each revision once (the bridge sends
a revision once, but may again after a crash: the copy written last is kept);
`raw_flink_rescales` every received message. The child views
explode the latest revision's arrays into the rows and columns of
`rescale_vertices`, `rescale_slots` and `rescale_states`, each row starting with
the identity columns of `flink_rescales`. `flink_conformance` and
`flink_agreement` compare them with scalefold's predictions (conformance.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from services.history import conformance, verdicts
from services.history.flink_tables import LATEST_TABLE, RAW_TABLE
from services.history.tables import PARTITION_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

IDENTITY = (
    "cluster",
    "job_id",
    "job_key",
    "rescale_uuid",
    "revision",
    "kafka_partition",
    "kafka_offset",
)
"""The columns every child view starts with; `job_id` is Flink's job id."""
REVISION = ("cluster", "job_id", "rescale_uuid", "revision")
"""What identifies one revision of a rescale (the bridge's record identity)."""
CHILDREN = {
    "flink_rescale_vertices": ("vertices", "vertex_index"),
    "flink_rescale_slots": ("slots", "slot_index"),
    "flink_rescale_states": ("scheduler_states", "span_index"),
}
"""Per child view: the array column it explodes and its 0-based position's name."""
VIEWS = (
    "raw_flink_rescales",
    "flink_rescale_revisions",
    "flink_rescales",
    *CHILDREN,
    conformance.CONFORMANCE,
    conformance.AGREEMENT,
)


def revisions(raw: DataFrame) -> DataFrame:
    """Each (cluster, job_id, rescale_uuid, revision) once: the message written last."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    same = Window.partitionBy(*REVISION).orderBy(
        F.col("kafka_offset").desc(), F.col("kafka_partition").desc()
    )
    ranked = raw.withColumn("_rank", F.row_number().over(same))
    return ranked.where(F.col("_rank") == 1).drop("_rank")


def child(latest: DataFrame, array: str, index: str) -> DataFrame:
    """One row per element of `array` of each rescale's latest revision, flattened."""
    from pyspark.sql import functions as F

    exploded = latest.select(*IDENTITY, PARTITION_COLUMN, F.posexplode(array).alias(index, "_e"))
    fields = exploded.schema["_e"].dataType.fieldNames()  # type: ignore[attr-defined]
    return exploded.select(
        *IDENTITY, index, *[F.col(f"_e.{f}").alias(f) for f in fields], PARTITION_COLUMN
    )


def flink_views(
    tables: Mapping[str, DataFrame], ours: Mapping[str, DataFrame], _schemas: object = None
) -> dict[str, DataFrame]:
    """Every Flink view by name. `tables`: the Flink source's tables by name (sources.py);
    `ours`: scalefold's views (`rescales` and its children), which the comparison reads."""
    raw, latest = tables[RAW_TABLE], tables[LATEST_TABLE]
    views = {
        "raw_flink_rescales": raw,
        "flink_rescale_revisions": revisions(raw),
        "flink_rescales": latest,
    }
    for name, (array, index) in CHILDREN.items():
        views[name] = child(latest, array, index)
    paired = conformance.conformance(
        latest,
        conformance.predictions(
            ours["rescales"],
            ours["rescale_vertices"],
            ours["rescale_slots"],
            ours["rescale_states"],
        ),
        ours.get(verdicts.TABLE),
    )
    views[conformance.CONFORMANCE] = paired
    views[conformance.AGREEMENT] = conformance.agreement(paired)
    return views
