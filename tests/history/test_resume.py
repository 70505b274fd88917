"""Where the history's queries start: carrying on from the per-table queries of an earlier
scalefold, each table exactly where its own checkpoint stopped, and a new query where
another of the same topic committed (resume.py)."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.history import synthetic
from services.history.decode import RescaleSchemas
from services.history.paths import Layout
from services.history.restapi.store import SCALEFOLD_TABLES, Source
from services.history.resume import (
    CHECKPOINT,
    EARLIEST,
    committed_positions,
    held,
    resume_points,
    starting_offsets,
)
from services.history.tables import LATEST_TABLE, LEGACY_TABLES, NESTED, PARTITION_COLUMN, TABLES
from tests.history.support import drain, encoded, read_topic, views
from tests.kafka_support import produce, unique_settings

START = 1_700_000_000_000


def _old_checkpoint(
    path: Path, batches: dict[int, dict[int, int]], committed: list[int], query: str = "old"
) -> None:
    """A Structured Streaming checkpoint as Spark writes it: per batch the Kafka source's
    end offsets (`offsets/N`), and a commit marker for each batch that finished."""
    (path / "offsets").mkdir(parents=True)
    (path / "commits").mkdir()
    (path / "metadata").write_text(json.dumps({"id": query}))
    for batch, ends in batches.items():
        source = {"topic": {str(p): o for p, o in ends.items()}}
        (path / "offsets" / str(batch)).write_text(
            f'v1\n{{"batchWatermarkMs":0,"batchTimestampMs":0}}\n{json.dumps(source)}'
        )
        (path / "offsets" / f".{batch}.crc").write_bytes(b"")
    for batch in committed:
        (path / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}')


def _delta_table_with_transaction(path: Path, app_id: str, version: int) -> None:
    """A Delta table whose log records an idempotent write (app_id, version), as Spark's
    `txnAppId`/`txnVersion` options and Delta's streaming sink leave it."""
    import pyarrow as pa
    from deltalake import CommitProperties, Transaction, write_deltalake

    write_deltalake(
        str(path),
        pa.table({"x": [1]}),
        commit_properties=CommitProperties(app_transactions=[Transaction(app_id, version)]),
    )


def _rescales(jobs: int, per_job: int, *, seed: int, post: int) -> list[dict[str, Any]]:
    """Every revision of `per_job` rescales of each of `jobs` jobs, a minute apart."""
    rng = random.Random(seed)
    return [
        record
        for job in range(jobs)
        for number in range(per_job)
        for record in synthetic.revisions(f"job-{job}", number, START + number * 60_000, rng, post)
    ]


def _ends(sent: list[Any]) -> dict[int, int]:
    """Per partition, the offset after the last message in `sent`."""
    ends: dict[int, int] = {}
    for message in sent:
        ends[message.partition] = max(ends.get(message.partition, 0), message.offset + 1)
    return ends


def test_a_sink_holds_its_committed_batches_and_an_uncommitted_one_only_if_it_says_so(
    tmp_path: Path,
) -> None:
    checkpoint = tmp_path / "checkpoint"
    _old_checkpoint(checkpoint, {4: {0: 10, 1: 7}, 5: {0: 12, 1: 9}}, committed=[4])
    assert held(checkpoint, lambda batch: False) == {0: 10, 1: 7}
    assert held(checkpoint, lambda batch: batch == 5) == {0: 12, 1: 9}
    assert held(tmp_path / "never-ran", lambda batch: True) is None
    first = tmp_path / "first"
    _old_checkpoint(first, {0: {0: 3}}, committed=[])
    assert held(first, lambda batch: False) == {}  # its first batch never finished


def test_resume_points_are_read_from_the_old_checkpoints_once_and_kept(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    # rescales: batch 3 ran to its Delta commit (the writer's own txn id) but not its marker.
    _old_checkpoint(layout.checkpoint("rescales"), {2: {0: 5}, 3: {0: 8}}, [2], "q-raw")
    _delta_table_with_transaction(layout.table("rescales"), "history-rescales-q-raw", 3)
    # rescale_states: a child table's old query, not read (a row holds its children now)
    _old_checkpoint(layout.checkpoint("rescale_states"), {2: {0: 5}, 3: {0: 8}}, [2], "q-st")
    # dead letters are at-least-once: an unfinished batch is sent again.
    _old_checkpoint(layout.checkpoint("dead_letters"), {6: {0: 7}, 7: {0: 8}}, [6], "q-dl")

    expected = {"rescales": {0: 8}, "dead_letters": {0: 7}}
    assert resume_points(layout) == expected
    kept = layout.checkpoint(f"{CHECKPOINT}.resume.json")
    assert kept.exists()
    # Once the new query has run, the old checkpoints are not read again, the file is.
    (layout.checkpoint(CHECKPOINT)).mkdir(parents=True)
    (layout.checkpoint(CHECKPOINT) / "metadata").write_text('{"id": "new"}')
    for name in expected:
        (layout.checkpoint(name) / "offsets" / "3").unlink(missing_ok=True)
    assert resume_points(layout) == expected


@pytest.mark.parametrize(
    ("record", "expected"), [("writer", {0: 8}), ("query", {0: 5}), ("file sink", {0: 8})]
)
def test_an_old_querys_unfinished_batch_is_held_where_its_table_recorded_it(
    tmp_path: Path, record: str, expected: dict[int, int]
) -> None:
    """Batch 3 was planned, batch 2 committed: batch 3 is held if the table says so, by
    the rescales writer's own transaction id, Delta's streaming sink's (the query id;
    only batch 2 here), or an earlier scalefold's Parquet file sink log."""
    layout = Layout(tmp_path)
    _old_checkpoint(layout.checkpoint("rescales"), {2: {0: 5}, 3: {0: 8}}, [2], "q")
    table = layout.table("rescales")
    if record == "writer":
        _delta_table_with_transaction(table, "history-rescales-q", 3)
    elif record == "query":
        _delta_table_with_transaction(table, "q", 2)
    else:
        (table / "_spark_metadata").mkdir(parents=True)
        (table / "_spark_metadata" / "3").write_text("v1")
    assert resume_points(layout) == {"rescales": expected}


def test_a_new_query_starts_where_another_committed_and_elsewhere_at_the_earliest(
    tmp_path: Path,
) -> None:
    tables = tmp_path / "tables"
    _old_checkpoint(tables, {2: {0: 5, 1: 3}, 3: {0: 8, 1: 4}}, [2])  # batch 3 unfinished
    assert committed_positions(tables) == {"topic": {0: 5, 1: 3}}
    assert committed_positions(tmp_path / "never-ran") == {}
    latest = {"topic": {0: 7}, "other": {0: 2}}
    chosen = json.loads(
        starting_offsets({"topic": [0, 1, 2], "other": [0]}, latest, committed_positions(tables))
    )
    # the first position that knows a partition wins; an unknown partition from the start
    assert chosen == {"topic": {"0": 7, "1": 3, "2": EARLIEST}, "other": {"0": 2}}


def test_a_new_directory_has_nothing_to_resume(tmp_path: Path) -> None:
    layout = Layout(tmp_path)
    assert resume_points(layout) == {}
    assert not layout.checkpoint(f"{CHECKPOINT}.resume.json").exists()


@pytest.mark.integration
@pytest.mark.spark
def test_the_one_query_carries_on_where_each_old_query_stopped(
    broker_settings: Settings, spark: Any, codec: Codec, tmp_path: Path
) -> None:
    """An upgraded history: `rescales` had half of every partition, the dead letters were
    all sent. After one drain the table holds every valid message exactly once, and no
    dead letter is sent again."""
    settings = unique_settings(broker_settings)
    records = _rescales(3, 2, seed=3, post=3)
    produce(settings, settings.topics.rescales, [*encoded(codec, records), (b"job-0", b"\x01")])
    sent = read_topic(settings, settings.topics.rescales)
    valid = {(m.partition, m.offset) for m in sent if m.value != b"\x01"}
    ends = _ends(sent)
    half = {p: end // 2 for p, end in ends.items()}
    layout = Layout(tmp_path)
    _old_checkpoint(layout.checkpoint("rescales"), {0: half}, [0])
    _old_checkpoint(layout.checkpoint("dead_letters"), {0: ends}, [0])

    drain(spark, settings, RescaleSchemas.of(codec.registry), layout)

    def offsets(table: str) -> list[tuple[int, int]]:
        rows = spark.read.format("delta").load(str(layout.table(table)))
        pairs = rows.select("kafka_partition", "kafka_offset").distinct().collect()
        return sorted((row[0], row[1]) for row in pairs)

    assert offsets("rescales") == sorted((p, o) for p, o in valid if o >= half[p])
    raw = spark.read.format("delta").load(str(layout.table("rescales")))
    assert raw.count() == len([1 for p, o in valid if o >= half[p]])  # each once
    assert read_topic(settings, settings.topics.dead_letters) == []


@pytest.mark.integration
@pytest.mark.spark
def test_a_new_latest_query_merges_every_rescale_whatever_the_old_queries_held(
    broker_settings: Settings, spark: Any, codec: Codec, tmp_path: Path
) -> None:
    """An upgrade from the per-table queries: `rescales` held the first half of every
    partition (and the latest table, MERGEd after it, less). The latest query, new, starts
    from the topic's beginning (no `tables` checkpoint to start from): after one drain
    `rescales_latest` holds every rescale once, and the raw table each record once."""
    settings = unique_settings(broker_settings)
    produce(settings, settings.topics.rescales, encoded(codec, _rescales(4, 3, seed=5, post=1)))
    sent = read_topic(settings, settings.topics.rescales)
    half = {p: end // 2 for p, end in _ends(sent).items()}
    layout = Layout(tmp_path)
    kept = layout.resume_file
    kept.parent.mkdir(parents=True)
    kept.write_text(json.dumps({"rescales": half}))

    drain(spark, settings, RescaleSchemas.of(codec.registry), layout)

    uuids = {codec.decode(m.value).record["rescaleUuid"] for m in sent}
    latest = spark.read.format("delta").load(str(layout.table("rescales_latest")))
    assert sorted(row[0] for row in latest.select("rescale_uuid").collect()) == sorted(uuids)
    raw = spark.read.format("delta").load(str(layout.table("rescales")))
    assert raw.count() == len([1 for m in sent if m.offset >= half[m.partition]])


@pytest.mark.integration
@pytest.mark.spark
def test_a_history_of_child_tables_carries_on_with_the_rows_arrays(
    broker_settings: Settings, spark: Any, codec: Codec, tmp_path: Path
) -> None:
    """An upgraded history, written before a row kept its children: its tables without the
    arrays, the child tables beside them. The next drain adds the arrays to both tables,
    and the views and the REST API's details show every rescale's children as a history
    written with the arrays from the start does (the old rows' from the child tables)."""
    from pyspark.sql import functions as F

    settings = unique_settings(broker_settings)
    schemas = RescaleSchemas.of(codec.registry)
    messages = encoded(codec, _rescales(4, 3, seed=7, post=2))
    produce(settings, settings.topics.rescales, messages[: len(messages) // 2])
    upgraded, control = Layout(tmp_path / "upgraded"), Layout(tmp_path / "control")
    drain(spark, settings, schemas, upgraded)
    before = views(spark, upgraded, schemas)
    for name in LEGACY_TABLES:  # the child tables of then
        before[f"raw_{name}"].write.format("delta").partitionBy(PARTITION_COLUMN).save(
            str(upgraded.table(name))
        )
    for name in (*TABLES, LATEST_TABLE):  # and the tables, without the arrays
        path = str(upgraded.table(name))
        rows = spark.read.format("delta").load(path).drop(*NESTED).localCheckpoint()
        overwrite = rows.write.format("delta").mode("overwrite").option("overwriteSchema", "true")
        overwrite.partitionBy(PARTITION_COLUMN).save(path)
    produce(settings, settings.topics.rescales, messages[len(messages) // 2 :])
    drain(spark, settings, schemas, upgraded)
    drain(spark, settings, schemas, control)

    now, then = views(spark, upgraded, schemas), views(spark, control, schemas)
    old_rows = now["rescales"].where(F.col("vertices").isNull()).count()
    assert 0 < old_rows < now["rescales"].count()  # both kinds of row, side by side
    for name in ("rescales", *LEGACY_TABLES, *(f"raw_{name}" for name in LEGACY_TABLES)):
        columns = [c for c in then[name].columns if c not in (*NESTED, "scheduler_settings")]
        assert Counter(map(tuple, now[name].select(*columns).collect())) == Counter(
            map(tuple, then[name].select(*columns).collect())
        ), name
    stores = [
        Source(layout.table(LATEST_TABLE).parent, SCALEFOLD_TABLES)
        for layout in (upgraded, control)
    ]
    for job in ("job-0", "job-3"):
        found, expected = (store.details(store.jobs().rows(job) or []) for store in stores)
        assert found.keys() == expected.keys()
        for uuid, kinds in expected.items():
            for kind, rows in kinds.items():
                shown = [{k: row[k] for k in rows[0]} for row in found[uuid][kind]] if rows else []
                assert shown == rows, (uuid, kind)
