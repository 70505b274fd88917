"""The summaries' exact percentiles (sorted arrays) equal Spark's own `percentile`, and so
do the ones the reading commands compute without Spark (lake.py over delta-rs: the two
ranked durations its query picks, interpolated): one definition, two read paths, proven
to agree. (The REST API's are Flink's own, commons-math's
LEGACY estimation: test_rest_api.py.)"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

from services.history import lake
from services.history.aggregates import percentile_of_sorted, sorted_values
from services.history.overview import STAT_PERCENTILES, label
from services.history.paths import Layout
from services.history.tables import LATEST_TABLE

QUANTILES = (0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0)


def test_percentiles_of_sorted_values_equal_sparks_percentile(spark: Any, tmp_path: Path) -> None:
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
        group: tuple(lake.percentile(sorted(values), q) for q in QUANTILES)
        for group, values in by_group.items()
    }
    assert without_spark == want

    # The summary's query: each group as a terminal state of rescales_latest.
    import pyarrow as pa
    from deltalake import write_deltalake

    table = pa.table(
        {
            "job_id": ["j"] * len(rows),
            "terminal_state": [group for group, _ in rows],
            "duration_ms": pa.array([value for _, value in rows], pa.int64()),
        }
    )
    write_deltalake(str(Layout(tmp_path).table(LATEST_TABLE)), table)
    (stats,) = lake.Lake(tmp_path).rows_of((lake.stats_sql(None),), {"rescales": LATEST_TABLE})
    summarised = {row["terminal_state"]: lake.stats_row(row) for row in stats}
    picked_quantiles = [QUANTILES.index(p) for p in STAT_PERCENTILES]
    for group in by_group:
        assert [summarised[group][label(p)] for p in STAT_PERCENTILES] == [
            want[group][i] for i in picked_quantiles
        ], group
        assert summarised[group]["count"] == sum(1 for g, _ in rows if g == group)
    everything = sorted(v for _, v in rows if v is not None)
    assert [summarised["ALL"][label(p)] for p in STAT_PERCENTILES] == [
        lake.percentile(everything, p) for p in STAT_PERCENTILES
    ]
