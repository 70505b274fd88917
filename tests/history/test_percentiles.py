"""The summaries' exact percentiles (sorted arrays) equal Spark's own `percentile`, and so
do the ones the reading commands compute without Spark (lake.py over delta-rs): one
definition, two read paths, proven to agree. (The REST API's are Flink's own, commons-math's
LEGACY estimation: test_rest_api.py.)"""

from __future__ import annotations

import random
from typing import Any

from services.history.aggregates import percentile_of_sorted, sorted_values
from services.history.lake import percentile

QUANTILES = (0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)


def test_percentiles_of_sorted_values_equal_sparks_percentile(spark: Any) -> None:
    from pyspark.sql import functions as F

    rng = random.Random(7)
    rows: list[tuple[str, int | None]] = [("only-nulls", None), ("one", 42)]
    for group in range(40):
        size = rng.choice((2, 3, 10, 101, 1_000))
        spread = rng.choice((3, 1_000, 10**9))  # few distinct values, or nearly all distinct
        rows += [(f"g{group}", rng.randrange(-spread, spread)) for _ in range(size)]
        rows += [(f"g{group}", None)] * rng.randrange(3)
    frame = spark.createDataFrame(rows, "group string, value long")
    exact = F.percentile("value", list(QUANTILES))
    expected = frame.groupBy("group").agg(*[exact[i].alias(f"q{i}") for i in range(len(QUANTILES))])
    picked = (
        frame.groupBy("group")
        .agg(sorted_values("value").alias("values"))
        .select(
            "group",
            *[
                percentile_of_sorted(F.col("values"), q).alias(f"q{i}")
                for i, q in enumerate(QUANTILES)
            ],
        )
    )
    want = {row["group"]: tuple(row)[1:] for row in expected.collect()}
    got = {row["group"]: tuple(row)[1:] for row in picked.collect()}
    assert got == want
    assert got["only-nulls"] == (None,) * len(QUANTILES)
    assert got["one"] == (42.0,) * len(QUANTILES)
    by_group: dict[str, list[int]] = {}
    for group, value in rows:
        by_group.setdefault(group, [])
        if value is not None:
            by_group[group].append(value)
    without_spark = {
        group: tuple(percentile(sorted(values), q) for q in QUANTILES)
        for group, values in by_group.items()
    }
    assert without_spark == want
