"""The raw tables' rows have two definitions, and they agree column for column: the Spark
transforms the tables queries append with (tables.py, flink_tables.py) and pytables.py's,
from which the latest writers MERGE and the planner folds. Each is held against the other
over the same Kafka messages, valid and not."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from typing import Any

import pytest

from services.contracts import Codec
from services.contracts import records as r
from services.history.catalog import arrow_schema, table_schemas
from services.history.decode import RescaleSchemas, decode, valid
from services.history.sources import FLINK_RESCALES, FLINK_SIGNALS, RESCALES, Source
from services.history.synthetic import fleet, rescale
from services.history.views import KAFKA_SOURCE_SCHEMA
from services.history.writers import latest
from tests.history.flink_support import INITIAL, RESCALED, details, encoded_flink, flink_record

pytestmark = pytest.mark.spark
STAMP = datetime(2026, 12, 1, 12, 0, 0, 123000, tzinfo=UTC)


def _messages(pairs: list[tuple[bytes, bytes]]) -> list[tuple[Any, ...]]:
    """Kafka source rows (key, value, topic, partition, offset, timestamp, timestampType)."""
    return [(key, value, "t", 1, offset, STAMP, 0) for offset, (key, value) in enumerate(pairs)]


def _both(spark: Any, codec: Codec, source: Source, messages: list[Any]) -> tuple[list, list]:
    frame = spark.createDataFrame(messages, KAFKA_SOURCE_SCHEMA)
    schemas = RescaleSchemas.of(codec.registry, source.record)
    by_spark = source.transform(valid(decode(frame, schemas))).collect()
    from services.history.pytables import decoded

    found = [
        decoded(codec, source.record, key, value, (partition, offset, stamp))
        for key, value, _, partition, offset, stamp, _ in messages
    ]
    by_python = [source.row(m) for m in found if m is not None]
    spark_rows = [row.asDict(recursive=True) for row in by_spark]
    return sorted(spark_rows, key=_where), sorted(by_python, key=_where)


def _where(row: dict[str, Any]) -> tuple[int, int]:
    return row["kafka_partition"], row["kafka_offset"]


def _comparable(row: dict[str, Any]) -> dict[str, Any]:
    """Spark's rows hold naive UTC datetimes (the session's time zone), pytables' aware ones."""
    return {
        k: v.replace(tzinfo=None) if isinstance(v, datetime) and v.tzinfo else v
        for k, v in row.items()
    }


def test_our_rows_are_the_same_both_ways(spark: Any, codec: Codec) -> None:
    records = list(fleet(jobs=3, rescales_per_job=2, start_ms=1_790_000_000_000))
    records.append(  # no span yet, no slots, a cooldown in the settings, a text one not
        rescale("job-x", "u-x", spans=[("Created", 5, None)], groups=[], cooldown_ms=45_000)
    )
    records.append(
        {
            **records[-1],
            "rescaleUuid": "u-y",
            "schedulerSettings": {
                "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "30 s"
            },
        }
    )
    rng = random.Random(3)
    records = [{**rec, "availableSlots": rng.choice([None, 0, 3])} for rec in records]
    pairs = [(rec["jobId"].encode(), codec.encode(r.RESCALE, rec)) for rec in records]
    pairs += [(b"job-0", b"\x00junk"), (b"not-the-job", pairs[0][1])]  # dead letters: no row
    spark_rows, python_rows = _both(spark, codec, RESCALES, _messages(pairs))
    assert len(python_rows) == len(records)
    assert [_comparable(row) for row in python_rows] == spark_rows


def test_flinks_rows_are_the_same_both_ways(spark: Any, codec: Codec) -> None:
    records = [
        flink_record(details(INITIAL), "c1", "0123", 2, 1_795_935_411_000),
        flink_record(details(RESCALED), "c1", "0123", 1, 1_795_935_428_000),
    ]
    records.append({**records[1], "rescaleUuid": "open", "schedulerStates": []})
    spark_rows, python_rows = _both(
        spark, codec, FLINK_RESCALES, _messages(encoded_flink(codec, records))
    )
    assert len(python_rows) == 3
    assert [_comparable(row) for row in python_rows] == spark_rows


def test_the_rows_fit_the_tables_arrow_schema_and_the_latest_is_one_per_rescale(
    spark: Any, codec: Codec
) -> None:
    import pyarrow as pa

    found = table_schemas(spark, RescaleSchemas.of(codec.registry))
    records = list(fleet(jobs=2, rescales_per_job=2, start_ms=1_790_000_000_000))
    pairs = [(rec["jobId"].encode(), codec.encode(r.RESCALE, rec)) for rec in records]
    _, rows = _both(spark, codec, RESCALES, _messages(pairs))
    newest = latest(rows, RESCALES.keys)
    assert len(newest) == len({rec["rescaleUuid"] for rec in records})
    assert all(row["terminal_state"] == "COMPLETED" for row in newest)  # the last revisions
    table = pa.Table.from_pylist(newest, schema=arrow_schema(found["rescales"]))
    assert table.column_names == found["rescales"].fieldNames()
    flink = [flink_record(details(INITIAL), "c1", "0123", 2, 1_795_935_411_000)]
    _, flink_rows = _both(spark, codec, FLINK_RESCALES, _messages(encoded_flink(codec, flink)))
    flink_table = pa.Table.from_pylist(flink_rows, schema=arrow_schema(found["flink_rescales"]))
    assert flink_table.num_rows == 1


def signal_record(
    cluster: str, job: str, observed_ms: int, pending: float | None
) -> dict[str, Any]:
    """A `FlinkWorkloadSignal` of two vertices: a source (its backlog `pending`, three
    times as much as the broker's) and one whose gauges Flink did not report."""
    source = {
        "jobVertexId": "v1",
        "jobVertexName": "Source: Kafka -> Parse",
        "parallelism": 2,
        "maxParallelism": 8,
        "inputs": [],
        "readRecords": 0,
        "writeRecords": 20_000,
        "countersComplete": True,
        "accumulatedBusyTimeMs": 1_234.5,
        "accumulatedBackPressuredTimeMs": 9_000.0,
        "accumulatedIdleTimeMs": 0.0,
        "busyTimeMsPerSecondAvg": 120.0,
        "busyTimeMsPerSecondMax": 130.0,
        "backPressuredTimeMsPerSecondAvg": 870.0,
        "backPressuredTimeMsPerSecondMax": -1.0,  # kept as Flink gave it
        "idleTimeMsPerSecondAvg": 0.0,
        "numRecordsInPerSecond": 0.0,
        "numRecordsOutPerSecond": 1_000.0,
        "pendingRecords": pending,
        "sourceBacklog": None if pending is None else pending * 3,  # the broker's (v2)
        "sourceEndOffsets": None if pending is None else 100_000,  # what arrived (v3)
    }
    quiet = {"jobVertexId": "v2", "jobVertexName": None, "parallelism": None, "inputs": ["v1"]}
    return {
        "cluster": cluster,
        "jobId": job,
        "jobName": "workload",
        "jobState": "RUNNING",
        "observedAtMillis": observed_ms,
        "jobManagerMillis": observed_ms - 40,
        "vertices": [source, quiet],
        "unknownFields": {"v1.read-bytes": "0"},
    }


def test_the_workload_samples_rows_are_the_same_both_ways(spark: Any, codec: Codec) -> None:
    import pyarrow as pa

    records = [
        signal_record("c1", "0123", 1_795_935_411_000, 4_096.0),
        signal_record("c1", "0123", 1_795_935_421_000, None),  # no source reports a backlog
        {**signal_record("c1", "0456", 1_795_935_421_000, 1.0), "vertices": []},
    ]
    pairs = [
        (f"{rec['cluster']}.{rec['jobId']}".encode(), codec.encode(r.FLINK_WORKLOAD_SIGNAL, rec))
        for rec in records
    ]
    pairs += [(b"0123", pairs[0][1])]  # keyed by Flink's job id alone: a dead letter, no row
    spark_rows, python_rows = _both(spark, codec, FLINK_SIGNALS, _messages(pairs))
    assert [row["pending_records"] for row in python_rows] == [4_096.0, None, None]
    assert [_comparable(row) for row in python_rows] == spark_rows
    found = table_schemas(spark, RescaleSchemas.of(codec.registry))
    newest = latest(python_rows, FLINK_SIGNALS.keys)
    assert sorted(row["observed_at_ms"] for row in newest) == [1_795_935_421_000] * 2
    table = pa.Table.from_pylist(newest, schema=arrow_schema(found["flink_signals"]))
    assert table.column_names == found["flink_signals_latest"].fieldNames()
