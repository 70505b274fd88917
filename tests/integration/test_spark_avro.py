"""Spark's from_avro decodes scalefold's wire format with the very same .avsc text."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from services.contracts import SchemaRegistry
from services.contracts import records as r
from services.contracts.codec import HEADER_SIZE
from services.localstack.layout import cache_dir

pytestmark = pytest.mark.spark
GOLDEN = Path(__file__).parents[1] / "contract" / "golden"


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    from services.history.spark import build_session
    from services.localstack.jars import spark_connector_jars

    cache = cache_dir(os.environ)
    session = build_session(spark_connector_jars(cache, progress=lambda _: None), "local[1]")
    yield session
    session.stop()


def test_from_avro_reads_every_rescale_version(spark, registry: SchemaRegistry) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F
    from pyspark.sql.avro.functions import from_avro

    latest = registry.latest(r.RESCALE)
    for version in registry.versions(r.RESCALE):
        golden = json.loads((GOLDEN / f"rescale.v{version.version}.json").read_text())
        frame = spark.createDataFrame([(bytearray.fromhex(golden["hex"]),)], "value binary")
        body = F.expr(f"substring(value, {HEADER_SIZE + 1})")
        row = frame.select(
            from_avro(body, version.text, {"avroSchema": latest.text, "mode": "FAILFAST"}).alias(
                "r"
            )
        ).first()
        assert row is not None
        record = row["r"]
        assert record["rescaleUuid"] == golden["avroJson"]["rescaleUuid"]
        assert record["terminatedReason"] == "SUCCEEDED"
        assert record["vertices"][0]["postRescaleParallelism"] == 4
        assert record["revision"] == (5 if version.version == 2 else 0)
