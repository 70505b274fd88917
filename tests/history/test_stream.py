"""The history job against the real broker: revisions, duplicates and bad bytes in, clean views out.

One topic is filled once for the module: finished and in-progress rescales sent
revision by revision, byte-identical re-sends (also of stale revisions, after the
final one), two v1 records of one rescale, and twelve kinds of unusable
messages (also keyed by another job, cut where too big). The job drains it once
(availableNow), then each test checks one part.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from services.contracts import Codec, DecodeError, SchemaRegistry, Settings
from services.contracts import records as r
from services.contracts.codec import MAGIC
from services.contracts.deadletters import KEY_LIMIT, PAYLOAD_LIMIT
from services.history import synthetic
from services.history.decode import RescaleSchemas
from services.history.job import RunOptions, run
from services.history.letters import read_metrics
from services.history.paths import Layout
from services.history.sinklog import committed_files, uncommitted_files
from services.history.tables import TABLES
from tests.history.support import drain, encoded, read_topic, views
from tests.kafka_support import Received, produce, set_topic_config, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.spark]

START = 1_700_000_000_000
V1_UUID = synthetic.stable_uuid("job-v1", "rescale", 0)


@dataclass(frozen=True)
class Scenario:
    settings: Settings
    layout: Layout
    latest: dict[str, dict[str, Any]]
    """The expected latest record per rescaleUuid."""
    valid_messages: int
    bad: list[tuple[bytes | None, bytes | None, str, str]]
    """(key, value, the reason the job must give, its error class)."""


def _rescales(rng: random.Random) -> list[list[dict[str, Any]]]:
    """Per rescale its revisions in send order: 16 finished, 4 stopped while in progress."""
    sent = []
    for job in range(4):
        for number in range(5):
            begin = START + job * 1_000 + number * 120_000
            history = synthetic.revisions(f"job-{job}", number, begin, rng, post=2 + number % 3)
            sent.append(history if number < 4 else history[:3])
    return sent


def _v1_records(registry: SchemaRegistry, codec: Codec) -> list[tuple[bytes, bytes]]:
    """A Flink-exported rescale written twice by a v1 writer: both carry revision 0."""
    v1 = registry.versions(r.RESCALE)[0]
    names = {field["name"] for field in v1.parsed["fields"]}
    spans = [("Executing", START, START + 10), ("Restarting", START + 10, None)]
    first = synthetic.rescale("job-v1", V1_UUID, spans=spans)
    spans = [
        *spans[:1],
        ("Restarting", START + 10, START + 30),
        ("Executing", START + 30, START + 30),
    ]
    final = synthetic.rescale("job-v1", V1_UUID, spans=spans, reason="SUCCEEDED")
    return [
        (b"job-v1", codec.encode_with(v1, {k: v for k, v in rec.items() if k in names}))
        for rec in (first, final)
    ]


def _bad_messages(codec: Codec, good: bytes) -> list[tuple[bytes | None, bytes | None, str, str]]:
    command = {
        "commandId": "c",
        "jobId": "j",
        "action": "RAISE_COOLDOWN",
        "amount": 1,
        "reason": "r",
        "evidence": [],
        "issuedAtMillis": 0,
    }
    name = r.RESCALE
    job = codec.decode(good).record["jobId"]
    decode_errors = [
        (b"bad-short", b"\x01\x02\x03", "3 bytes is shorter than the 10-byte header"),
        (b"bad-magic", b"\x00\x00" + good[2:], "missing the single-object magic C3 01 (got 00 00)"),
        (
            b"bad-fingerprint",
            MAGIC + b"\xff" * 8 + good[10:],
            "unknown writer schema fingerprint ffffffffffffffff",
        ),
        (b"bad-body", good[: len(good) // 2], f"body is not a valid {name} v2"),
        (b"bad-trailing", good + b"\x00\x07", f"2 trailing bytes after a {name} v2 record"),
        (
            b"bad-record",
            codec.encode(r.SCALING_COMMAND, command),
            f"record {r.SCALING_COMMAND} is not one of {name}",
        ),
        (b"bad-tombstone", None, "no value (a tombstone) where a record was expected"),
        (b"bad-empty", b"", "0 bytes is shorter than the 10-byte header"),
        (b"bad-huge", b"\x00" * 900_000, "missing the single-object magic C3 01 (got 00 00)"),
        (b"k" * (KEY_LIMIT + 1), b"\x01", "1 bytes is shorter than the 10-byte header"),
    ]
    return [(k, v, reason, "DecodeError") for k, v, reason in decode_errors] + [
        (b"\xff\xfe", good, f"the key must be the job id '{job}', got 0xfffe", "KeyMismatch"),
        (None, good, f"the key must be the job id '{job}', got no key", "KeyMismatch"),
    ]


def _messages(
    registry: SchemaRegistry, codec: Codec, rng: random.Random
) -> tuple[list[tuple[bytes, bytes | None]], dict[str, dict[str, Any]], int]:
    per_rescale = _rescales(rng)
    latest = {history[-1]["rescaleUuid"]: history[-1] for history in per_rescale}
    queues = [encoded(codec, history) for history in per_rescale]
    messages: list[tuple[bytes, bytes | None]] = []
    while any(queues):  # round-robin: rescales of different jobs interleave
        for queue in queues:
            if queue:
                messages.append(queue.pop(0))
    resent = rng.sample(messages, 25)  # a crashed scheduler re-sends, also stale revisions
    messages += resent
    messages += _v1_records(registry, codec)
    latest[V1_UUID] = {"rescaleUuid": V1_UUID, "revision": 0, "terminatedReason": "SUCCEEDED"}
    return messages, latest, len(messages)


@pytest.fixture(scope="module")
def scenario(
    broker_settings: Settings,
    spark: Any,
    codec: Codec,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Scenario]:
    settings = unique_settings(broker_settings)
    schemas = RescaleSchemas.of(codec.registry)
    messages, latest, valid_count = _messages(codec.registry, codec, random.Random(5))
    bad = _bad_messages(codec, messages[0][1] or b"")
    odd_headers: list[tuple[str | bytes, bytes | None]] = [("h", None), (b"\xfe\xff", b"\x00")]
    produce(settings, settings.topics.rescales, messages[:40])  # type: ignore[arg-type]
    produce(settings, settings.topics.rescales, [(k, v) for k, v, _, _ in bad], odd_headers)
    produce(settings, settings.topics.rescales, messages[40:])  # type: ignore[arg-type]
    layout = Layout(tmp_path_factory.mktemp("history"))
    drain(spark, settings, schemas, layout)
    yield Scenario(settings, layout, latest, valid_count, bad)


def _by_uuid(frame: Any) -> dict[str, Any]:
    return {row["rescale_uuid"]: row for row in frame.collect()}


def test_views_hold_each_rescale_once_in_its_latest_state(
    scenario: Scenario, spark: Any, schemas: RescaleSchemas
) -> None:
    found = views(spark, scenario.layout, schemas)
    assert found["raw_rescales"].count() == scenario.valid_messages
    rows = _by_uuid(found["rescales"])
    assert set(rows) == set(scenario.latest)
    for uuid, expected in scenario.latest.items():
        row = rows[uuid]
        assert row["revision"] == expected["revision"], uuid
        assert row["terminated_reason"] == expected["terminatedReason"], uuid
        if uuid == V1_UUID:
            assert row["writer_version"] == 1
            continue
        assert row["in_progress"] == (expected["terminalState"] is None)
        assert row["start_timestamp_ms"] == expected["startTimestampInMillis"]
        assert row["end_timestamp_ms"] == expected["endTimestampInMillis"]
        assert row["total_post_rescale_slots"] == expected["slots"][0]["postRescaleSlots"]
        last = expected["schedulerStates"][-1]
        assert row["current_state"] == last["state"]
        assert row["current_state_open"] == (last["leaveTimestampInMillis"] is None)


def test_children_belong_to_the_latest_revision(
    scenario: Scenario, spark: Any, schemas: RescaleSchemas
) -> None:
    found = views(spark, scenario.layout, schemas)
    spans: dict[str, list[tuple[str, int, int | None]]] = {}
    for row in found["rescale_states"].orderBy("span_index").collect():
        spans.setdefault(row["rescale_uuid"], []).append(
            (row["state"], row["enter_timestamp_ms"], row["leave_timestamp_ms"])
        )
    vertices: dict[str, list[tuple[int, int]]] = {}
    for row in found["rescale_vertices"].orderBy("vertex_index").collect():
        vertices.setdefault(row["rescale_uuid"], []).append(
            (row["desired_parallelism"], row["post_rescale_parallelism"])
        )
    slots = _by_uuid(found["rescale_slots"])
    assert found["rescale_slots"].count() == len(slots) == len(scenario.latest)
    for uuid, expected in scenario.latest.items():
        if uuid == V1_UUID:
            assert [s for s, _, _ in spans[uuid]] == ["Executing", "Restarting", "Executing"]
            continue
        assert spans[uuid] == [
            (s["state"], s["enterTimestampInMillis"], s["leaveTimestampInMillis"])
            for s in expected["schedulerStates"]
        ]
        assert vertices[uuid] == [
            (v["desiredParallelism"], v["postRescaleParallelism"]) for v in expected["vertices"]
        ]
        assert slots[uuid]["desired_slots"] == expected["slots"][0]["desiredSlots"]


def _sources(settings: Settings) -> dict[bytes | None, Received]:
    return {m.key: m for m in read_topic(settings, settings.topics.rescales)}


def test_bad_bytes_become_dead_letters_with_the_codecs_reason(
    scenario: Scenario, codec: Codec
) -> None:
    settings = scenario.settings
    letters = [
        codec.decode(m.value).record for m in read_topic(settings, settings.topics.dead_letters)
    ]
    by_key = {letter["key"]: letter for letter in letters}
    assert len(letters) == len(scenario.bad)
    sources = _sources(settings)
    for key, value, reason, error_class in scenario.bad:
        shown_key = key[:KEY_LIMIT] if key is not None else None
        letter = by_key[shown_key]
        assert letter["errorMessage"] == reason
        assert letter["errorClass"] == error_class
        assert letter["service"] == "history"
        assert letter["payload"] == (value or b"")[:PAYLOAD_LIMIT]
        assert letter["payloadNull"] is (value is None)
        assert letter["payloadSize"] == len(value or b"")
        assert letter["payloadTruncated"] is (len(value or b"") > PAYLOAD_LIMIT)
        assert letter["keyTruncated"] is (key is not None and len(key) > KEY_LIMIT)
        assert letter["sourceTopic"] == settings.topics.rescales
        assert (letter["sourcePartition"], letter["sourceOffset"]) == (
            sources[key].partition,
            sources[key].offset,
        )
        if value is not None and error_class == "DecodeError":
            # the Python codec rejects the same bytes with the same words
            with pytest.raises(DecodeError, match="^" + re.escape(reason)):
                codec.decode(value, expected=frozenset({r.RESCALE}))


def test_a_dead_letter_the_broker_refuses_is_counted_and_the_history_goes_on(
    broker_settings: Settings,
    spark: Any,
    codec: Codec,
    schemas: RescaleSchemas,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    settings = unique_settings(broker_settings)
    set_topic_config(settings, settings.topics.dead_letters, max_message_bytes="64")
    history = synthetic.revisions("refused", 0, START, random.Random(3), post=2)
    produce(settings, settings.topics.rescales, [(b"refused", None), *encoded(codec, history)])
    layout = Layout(tmp_path_factory.mktemp("refused"))
    options = RunOptions(layout, available_now=True, plan_commands=False)
    assert run(spark, settings, codec.registry, options, progress=lambda _: None) == 0
    assert views(spark, layout, schemas)["raw_rescales"].count() == len(history)
    assert read_metrics(layout.metrics)["scalefold_history_dead_letters_failed_total"] == 1
    assert read_topic(settings, settings.topics.dead_letters) == []


def test_pyarrow_and_duckdb_read_the_parquet_as_it_is(
    scenario: Scenario, spark: Any, schemas: RescaleSchemas
) -> None:
    import duckdb
    import pyarrow as pa
    import pyarrow.dataset as ds

    found = views(spark, scenario.layout, schemas)
    for table in TABLES:
        path = scenario.layout.table(table)
        assert uncommitted_files(path) == []
        committed = committed_files(path)
        assert committed, f"{table} has no committed files"
        dataset = ds.dataset(path, format="parquet", partitioning="hive")
        assert dataset.count_rows() == found[f"raw_{table}"].count(), table
    schema = ds.dataset(scenario.layout.table("rescales"), partitioning="hive").schema
    assert schema.field("start_time").type == pa.timestamp("us", tz="UTC")
    assert pa.types.is_map(schema.field("scheduler_settings").type)

    # The data files only: the Delta log's checkpoints are Parquet files too.
    glob = str(scenario.layout.table("rescales") / "start_date=*" / "*.parquet")
    ((total, uuids, revision),) = duckdb.sql(
        f"SELECT count(*), count(DISTINCT rescale_uuid), max(revision) "
        f"FROM read_parquet('{glob}', hive_partitioning = true)"
    ).fetchall()
    assert (total, uuids) == (scenario.valid_messages, len(scenario.latest))
    assert revision == 5
    # a row's spans are its array: each row's own
    ((states,),) = duckdb.sql(
        f"SELECT sum(len(scheduler_states)) FROM read_parquet('{glob}', hive_partitioning = true)"
    ).fetchall()
    assert states == found["raw_rescale_states"].count()


def test_sql_layer_exposes_summaries(
    scenario: Scenario, spark: Any, schemas: RescaleSchemas
) -> None:
    found = views(spark, scenario.layout, schemas)
    summary = {row["job_id"]: row for row in found["job_summary"].collect()}
    assert summary["job-0"]["total"] == 5
    assert summary["job-0"]["completed"] == 4
    assert summary["job-0"]["in_progress"] == 1
    assert summary["job-v1"]["reason_succeeded"] == 1
    (fleet,) = found["fleet_summary"].collect()
    assert fleet["total"] == len(scenario.latest)
    assert fleet["jobs"] == 5
