"""The history keeps real Flink jobs' workload samples (`flink-signals`, from the bridge) as
tables and views, like every other source (sources.FLINK_SIGNALS, signal_tables.py):
each received message once, each sample once although the bridge may send it again,
a job's newest sample in the latest table, and what is not a sample dead-lettered."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.contracts import records as r
from services.history.decode import RescaleSchemas
from services.history.paths import Layout
from services.history.signal_tables import LATEST_TABLE
from tests.history.support import drain, read_topic, views
from tests.history.test_pytables import signal_record
from tests.kafka_support import produce, unique_settings

pytestmark = pytest.mark.spark
T0 = 1_795_935_411_000


def test_samples_are_kept_once_each_jobs_newest_is_the_latest_and_bad_ones_dead_lettered(
    broker_settings: Settings, spark: Any, codec: Codec, tmp_path: Path
) -> None:
    settings = unique_settings(broker_settings)
    samples = [
        signal_record("c1", "j1", T0, 4_096.0),
        signal_record("c1", "j1", T0 + 10_000, 512.0),
        signal_record("c1", "j2", T0 + 5_000, None),
    ]
    messages = [
        (f"{s['cluster']}.{s['jobId']}".encode(), codec.encode(r.FLINK_WORKLOAD_SIGNAL, s))
        for s in samples
    ]
    messages.append(messages[1])  # the bridge sent a sample again
    messages += [(b"j1", messages[0][1]), (b"c1.j1", b"\x00")]  # not its key; not Avro
    produce(settings, settings.topics.flink_signals, messages)
    layout = Layout(tmp_path)
    schemas = RescaleSchemas.of(codec.registry)

    drain(spark, settings, schemas, layout)
    drain(spark, settings, schemas, layout)  # a second run adds nothing
    found = views(spark, layout, schemas)

    assert found["raw_flink_signals"].count() == 4  # every valid message, once
    sampled = found["flink_signals"].orderBy("observed_at_ms").collect()
    assert [(s["job_key"], s["observed_at_ms"]) for s in sampled] == [
        ("c1.j1", T0),
        ("c1.j2", T0 + 5_000),
        ("c1.j1", T0 + 10_000),
    ]
    assert [s["pending_records"] for s in sampled] == [4_096.0, None, 512.0]
    vertices = (
        found["flink_vertex_signals"]
        .where("job_id = 'j1'")
        .orderBy("observed_at_ms", "vertex_index")
    )
    first = vertices.collect()[0]
    assert (first["job_vertex_name"], first["write_records"], first["pending_records"]) == (
        "Source: Kafka -> Parse",
        20_000,
        4_096.0,
    )
    assert first["source_backlog"] == 12_288.0  # the broker's (flink_workload_signal.v2)
    assert first["source_end_offsets"] == 100_000  # what the topic received (v3)
    assert first["back_pressured_time_ms_per_second_max"] == -1.0  # as Flink gave it
    assert vertices.count() == 4  # two vertices in each of j1's two samples

    latest = spark.read.format("delta").load(str(layout.table(LATEST_TABLE))).collect()
    assert sorted((row["job_id"], row["observed_at_ms"]) for row in latest) == [
        ("j1", T0 + 10_000),
        ("j2", T0 + 5_000),
    ]

    letters = [
        codec.decode(m.value).record for m in read_topic(settings, settings.topics.dead_letters)
    ]
    assert {letter["sourceTopic"] for letter in letters} == {settings.topics.flink_signals}
    reasons = sorted((letter["errorClass"], letter["errorMessage"]) for letter in letters)
    assert reasons == [  # each once, though the topic was drained twice
        ("DecodeError", "1 bytes is shorter than the 10-byte header"),
        ("KeyMismatch", f"the key must be <cluster>.<jobId> 'c1.j1', got 0x{b'j1'.hex()}"),
    ]
