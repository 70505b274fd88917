"""The history's Delta tables: read without Spark while the stream writes, the latest
revision kept by MERGE, small files compacted and old ones vacuumed."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.history import synthetic
from services.history.decode import RescaleSchemas, decode, valid
from services.history.paths import Layout
from services.history.sinklog import (
    committed_files,
    data_files,
    last_compacted,
    latest_version,
    uncommitted_files,
    unreferenced_files,
)
from services.history.tables import LATEST_TABLE, TABLES
from services.history.upkeep import Upkeep, UpkeepConfig, convert_legacy, keep_for
from services.history.upsert import append, merge_latest
from services.history.views import KAFKA_SOURCE_SCHEMA, latest_revisions
from tests.history.support import HistoryProcess, encoded, wait_for
from tests.kafka_support import produce

pytestmark = [pytest.mark.integration, pytest.mark.spark]

START = 1_700_000_000_000


def _offsets(table: Any) -> dict[int, list[int]]:
    """Per Kafka partition, the sorted distinct offsets a table's rows came from."""
    found: dict[int, set[int]] = {}
    partitions = table.column("kafka_partition").to_pylist()
    for partition, offset in zip(partitions, table.column("kafka_offset").to_pylist(), strict=True):
        found.setdefault(partition, set()).add(offset)
    return {partition: sorted(offsets) for partition, offsets in found.items()}


def _committed(path: Path) -> Any:
    """The Delta table at `path` as deltalake reads it, or None before its first commit
    (Spark makes `_delta_log/` a moment before it writes version 0 there)."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(str(path))
    except TableNotFoundError:
        return None


def _check_whole_batches(layout: Layout) -> int:
    """Read the tables with deltalake (no Spark) and check what a reader sees is made of
    whole committed batches; return how many raw `rescales` rows it saw."""
    seen = 0
    for name in ("rescales", "rescale_states"):
        delta = _committed(layout.table(name))
        if delta is None:
            continue
        table = delta.to_pyarrow_table(columns=["kafka_partition", "kafka_offset"])
        # A batch is a range of offsets per partition, from the topic's start: whole batches
        # leave no gap, and a row written twice would show as a repeated key.
        for partition, offsets in _offsets(table).items():
            assert offsets == list(range(len(offsets))), f"{name} partition {partition}: a gap"
        if name == "rescales":
            keys = set(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))
            assert len(keys) == table.num_rows, "raw rescales holds a message twice"
            seen = table.num_rows
    latest_delta = _committed(layout.table(LATEST_TABLE))
    if latest_delta is not None:
        latest = latest_delta.to_pyarrow_table(columns=["rescale_uuid", "revision"])
        uuids = latest.column("rescale_uuid").to_pylist()
        assert len(uuids) == len(set(uuids)), "rescales_latest holds a rescale twice"
    return seen


def test_deltalake_reads_only_committed_batches_while_the_stream_writes(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    from deltalake import DeltaTable

    records = list(synthetic.fleet(jobs=6, rescales_per_job=10, start_ms=START))
    messages = encoded(codec, records)  # 60 rescales, 300 messages
    topic = kafka.topics.rescales
    produce(kafka, topic, messages[:50])
    layout = Layout(tmp_path / "data")
    job = HistoryProcess(
        kafka,
        layout.data_dir,
        tmp_path / "run.log",
        "--no-commands",
        "--no-sql-endpoint",
        "--trigger-seconds",
        "1",
        "--optimize-minutes",
        "0.1",
    )
    done = threading.Event()

    def feed() -> None:
        for start in range(50, len(messages), 10):
            produce(kafka, topic, messages[start : start + 10])
            if done.wait(0.3):
                return

    feeder = threading.Thread(target=feed)
    try:
        wait_for(lambda: job.running() and _check_whole_batches(layout) > 0, 240, "a first batch")
        feeder.start()
        versions: set[int] = set()

        def all_seen() -> bool:
            seen = _check_whole_batches(layout)
            versions.add(DeltaTable(str(layout.table("rescales"))).version())
            return job.running() and seen == len(messages)

        wait_for(all_seen, 300, "every message in the raw rescales table")
        assert len(versions) > 1, "the reads did not overlap the stream's writes"

        def latest_revisions_only() -> bool:
            latest = _committed(layout.table(LATEST_TABLE))
            if latest is None:
                return False
            revisions = latest.to_pyarrow_table(columns=["revision"]).column("revision")
            return len(revisions) == 60 and set(revisions.to_pylist()) == {5}

        wait_for(
            latest_revisions_only,
            240,
            "the latest revision of every rescale",
        )
        latest = DeltaTable(str(layout.table(LATEST_TABLE))).to_pyarrow_table()
        assert latest.num_rows == 60
        assert set(latest.column("terminal_state").to_pylist()) == {"COMPLETED"}

        def compacted() -> bool:
            operations = {
                entry.get("operation")
                for name in (*TABLES, LATEST_TABLE)
                for entry in DeltaTable(str(layout.table(name))).history()
            }
            return job.running() and "OPTIMIZE" in operations

        wait_for(compacted, 120, "a scheduled OPTIMIZE")
    finally:
        done.set()
        if feeder.is_alive():
            feeder.join()
        job.kill()


def _batch(spark: Any, codec: Codec, records: list[dict[str, Any]], first_offset: int) -> Any:
    from datetime import UTC, datetime

    from services.contracts import records as r
    from services.history.tables import rescales

    when = datetime(2024, 1, 1, tzinfo=UTC)
    rows = [
        (rec["jobId"].encode(), codec.encode(r.RESCALE, rec), "t", 0, first_offset + i, when, 0)
        for i, rec in enumerate(records)
    ]
    raw = spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA)
    return rescales(valid(decode(raw, RescaleSchemas.of(codec.registry)))).localCheckpoint()


@pytest.mark.parametrize("relative", [False, True], ids=["absolute", "relative"])
def test_merge_keeps_the_latest_revision_and_a_replayed_batch_changes_nothing(
    spark: Any, codec: Codec, tmp_path: Path, relative: bool
) -> None:
    from deltalake import DeltaTable

    records = list(synthetic.fleet(jobs=2, rescales_per_job=3, start_ms=START))
    by_revision = sorted(records, key=lambda rec: rec["revision"])
    path = tmp_path / LATEST_TABLE
    if relative:  # as `--data-dir .run/x` gives it (Delta names tables by absolute paths only)
        path = Path(os.path.relpath(path))
    newer = _batch(spark, codec, by_revision[len(records) // 2 :], 100)
    older = _batch(spark, codec, by_revision[: len(records) // 2], 0)
    merge_latest(spark, newer, path)
    merge_latest(spark, older, path)  # older revisions arriving late do not win
    merge_latest(spark, newer, path)  # a batch run again after a crash
    merge_latest(spark, older, path)
    table = DeltaTable(str(path)).to_pyarrow_table(columns=["rescale_uuid", "revision"])
    expected: dict[str, int] = {}
    for rec in records:
        expected[rec["rescaleUuid"]] = max(expected.get(rec["rescaleUuid"], -1), rec["revision"])
    got = dict(
        zip(
            table.column("rescale_uuid").to_pylist(),
            table.column("revision").to_pylist(),
            strict=True,
        )
    )
    assert table.num_rows == len(expected)
    assert got == expected


def test_upkeep_compacts_small_files_and_vacuums_the_replaced_ones(
    spark: Any, codec: Codec, tmp_path: Path
) -> None:
    from deltalake import DeltaTable

    records = list(synthetic.fleet(jobs=2, rescales_per_job=3, start_ms=START))
    path = tmp_path / "rescales"
    for i, rec in enumerate(records):  # one small commit per record, as a trickle writes
        append(_batch(spark, codec, [rec], i), path, "test-app", i)
    append(_batch(spark, codec, [records[0]], 0), path, "test-app", 0)  # replayed: skipped
    before = committed_files(path)
    partitions = {p.parent for p in before}
    assert len(before) >= len(records)

    now = [0.0]
    created = last_compacted(path)  # never compacted: due a minute after its first commit
    assert created is not None
    config = UpkeepConfig(optimize_minutes=1, retention_hours=0)
    upkeep = Upkeep(spark, config, lambda: now[0], lambda: created)
    upkeep.run_due([path])
    assert len(committed_files(path)) == len(before), "compacted before it was due"
    now[0] = 61.0
    upkeep.run_due([path])
    after = committed_files(path)
    assert len(after) == len(partitions)  # one file per date partition
    assert data_files(path) == after  # the replaced files are vacuumed
    assert uncommitted_files(path) == [] == unreferenced_files(path)
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == len(records)
    # Idle since: nothing to compact, nothing to vacuum, so no commit (VACUUM commits its
    # START and END even when it deletes nothing)
    version = latest_version(path)
    now[0] = 122.0
    upkeep.run_due([path])
    assert latest_version(path) == version
    assert DeltaTable(str(path)).metadata().configuration["delta.dataSkippingNumIndexedCols"] == "1"
    # A restarted history keeps the table's schedule, by its Delta history (issue 49):
    compacted = last_compacted(path)
    assert compacted is not None and abs(compacted - time.time() * 1000) < 120_000

    def restarted(seconds_since: float) -> Upkeep:
        wall = int(compacted + seconds_since * 1000)
        return Upkeep(spark, UpkeepConfig(optimize_minutes=1), lambda: 5.0, lambda: wall)

    assert not restarted(30).due(path)
    assert restarted(61).due(path)
    # A table of an earlier scalefold, with Delta's 32 columns of statistics:
    spark.sql(
        f"ALTER TABLE delta.`{path}` SET TBLPROPERTIES (delta.dataSkippingNumIndexedCols = 32)"
    )
    # The retention is the table's own, to the second: VACUUM's RETAIN rounds to hours.
    keep_for(spark, path, 0.05)
    kept = DeltaTable(str(path)).metadata().configuration
    assert kept["delta.deletedFileRetentionDuration"] == "interval 180 seconds"
    assert kept["delta.dataSkippingNumIndexedCols"] == "1"  # the statistics of new tables


def test_upkeep_deletes_the_expired_log_that_a_checkpoint_stands_for(
    spark: Any, codec: Codec, tmp_path: Path
) -> None:
    """Spark deletes a table's expired commits only before the start of the day its
    retention reaches (it truncates the cutoff to the day): the upkeep deletes them to the
    second, up to the newest checkpoint, and the table reads the same."""
    from deltalake import DeltaTable

    records = list(synthetic.fleet(jobs=2, rescales_per_job=3, start_ms=START))
    path = tmp_path / "rescales"
    for i in range(25):  # 25 commits: Spark checkpoints at versions 10 and 20
        append(_batch(spark, codec, [records[i % len(records)]], i), path, "test-app", i)
    keep_for(spark, path, 0)  # the log kept 60 s
    log_dir = path / "_delta_log"
    aged = time.time() - 300
    for entry in log_dir.iterdir():
        os.utime(entry, (aged, aged))
    rows = DeltaTable(str(path)).to_pyarrow_table().num_rows
    assert (log_dir / f"{0:020d}.json").exists()

    Upkeep(spark, UpkeepConfig(optimize_minutes=1, retention_hours=0)).run(path)
    commits = sorted(int(p.name.split(".")[0]) for p in log_dir.glob("*.json"))
    assert commits[0] >= 20, commits  # the aged commits before the checkpoint at 20 are gone
    orphans = [p for p in log_dir.glob("*.crc") if p.stem.isdigit() and int(p.stem) < commits[0]]
    assert not orphans
    hadoop = [p.name[1:-4] for p in log_dir.glob(".*.crc")]  # Hadoop's, of each log file
    assert hadoop and all((log_dir / name).exists() for name in hadoop)
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == rows
    assert spark.read.format("delta").load(str(path)).count() == rows


def test_a_parquet_table_of_an_earlier_version_is_converted_in_place(
    spark: Any, codec: Codec, tmp_path: Path
) -> None:
    from deltalake import DeltaTable

    records = list(synthetic.fleet(jobs=2, rescales_per_job=2, start_ms=START))
    path = tmp_path / "rescales"
    _batch(spark, codec, records, 0).write.partitionBy("start_date").parquet(str(path))
    assert convert_legacy(spark, path)
    assert not convert_legacy(spark, path)  # once
    assert DeltaTable(str(path)).to_pyarrow_table().num_rows == len(records)
    assert uncommitted_files(path) == []
    latest = latest_revisions(spark.read.format("delta").load(str(path)))
    assert latest.count() == len({rec["rescaleUuid"] for rec in records})
