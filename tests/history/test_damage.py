"""Damage to the history's own files (issue 49): a data file someone deleted is mended
from Kafka at the next start, and a full disk is named, waited out, and loses nothing."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.history import synthetic
from services.history.decode import RescaleSchemas
from services.history.paths import Layout
from services.history.sinklog import committed_files
from services.history.tables import LATEST_TABLE
from tests.disk_support import fill, small_disk
from tests.history.support import HistoryProcess, encoded, views, wait_for
from tests.kafka_support import produce
from tests.patience import patient

pytestmark = [pytest.mark.integration, pytest.mark.spark]

START = 1_700_000_000_000
DAMAGED = ("rescales", LATEST_TABLE)


def _messages(codec: Codec) -> list[tuple[bytes, bytes]]:
    return encoded(codec, synthetic.fleet(jobs=6, rescales_per_job=10, start_ms=START))


def _drained(kafka: Settings, layout: Layout, log: Path) -> str:
    job = HistoryProcess(kafka, layout.data_dir, log, "--available-now", "--no-commands")
    assert job.wait(240) == 0, job.tail()
    return log.read_text(errors="replace")


def _counts(spark: Any, layout: Layout, schemas: RescaleSchemas) -> dict[str, int]:
    found = views(spark, layout, schemas)
    return {
        "rescales": found["raw_rescales"].count(),
        "rescale_vertices": found["raw_rescale_vertices"].count(),
        LATEST_TABLE: found["rescales"].count(),
    }


def test_a_deleted_data_file_is_mended_from_kafka_at_the_next_start(
    kafka: Settings, codec: Codec, spark: Any, schemas: RescaleSchemas, tmp_path: Path
) -> None:
    messages = _messages(codec)  # 60 rescales, 300 messages
    layout = Layout(tmp_path / "data")
    produce(kafka, kafka.topics.rescales, messages[:150])
    _drained(kafka, layout, tmp_path / "run-1.log")
    produce(kafka, kafka.topics.rescales, messages[150:])
    _drained(kafka, layout, tmp_path / "run-2.log")
    whole = _counts(spark, layout, schemas)
    assert whole["rescales"] == len(messages)
    assert whole[LATEST_TABLE] == 60

    gone = {table: committed_files(layout.table(table))[0] for table in DAMAGED}
    for path in gone.values():
        path.unlink()
    with pytest.raises(Exception, match=r"(?i)not.?found|does not exist|FileNotFound"):
        views(spark, layout, schemas)["raw_rescales"].select("kafka_offset").collect()

    said = _drained(kafka, layout, tmp_path / "run-3.log")
    for table, path in gone.items():
        assert f"table {table}: 1 data file(s) its Delta log names were gone ({path})" in said
    assert said.count("rows again from Kafka") == len(DAMAGED)
    assert " lost: " not in said
    assert _counts(spark, layout, schemas) == whole
    raw = views(spark, layout, schemas)["raw_rescales"]
    assert raw.select("kafka_partition", "kafka_offset").distinct().count() == len(messages)
    vertices = views(spark, layout, schemas)["raw_rescale_vertices"]
    keys = ("kafka_partition", "kafka_offset", "vertex_index")
    assert vertices.select(*keys).distinct().count() == whole["rescale_vertices"]


def test_a_full_disk_is_named_and_waited_out_and_loses_nothing(
    kafka: Settings, codec: Codec, spark: Any, schemas: RescaleSchemas, tmp_path: Path
) -> None:
    """The queries that cannot write are retried, the disk named; killed and started
    again on the disk still full (as a supervisor does), the service runs on, named it
    again; once there is room every message is in the history, once."""
    messages = _messages(codec)
    first, rest = messages[:100], messages[100:]
    produce(kafka, kafka.topics.rescales, first)
    with small_disk(tmp_path / "disk", 96) as disk:
        layout = Layout(disk / "data")
        full = f"the disk holding {layout.data_dir} is full"
        options = ("--trigger-seconds", "1", "--no-commands")
        job = HistoryProcess(kafka, layout.data_dir, tmp_path / "run-1.log", *options)
        try:
            wait_for(
                lambda: job.running() and _raw_count(spark, layout, schemas) == len(first),
                240,
                "the first messages in the history",
            )
            filler = fill(disk)
            produce(kafka, kafka.topics.rescales, rest)
            wait_for(
                lambda: job.running() and full in job.log.read_text(),
                240,
                "the full disk named in the log",
            )
            job.kill()
            job = HistoryProcess(kafka, layout.data_dir, tmp_path / "run-2.log", *options)
            wait_for(
                lambda: job.running() and full in job.log.read_text(),
                240,
                "the full disk named by the service started on it",
            )
            time.sleep(patient(10))  # past the local stack's 10 s: a start, not a failed one
            assert job.running()
            filler.unlink()
            wait_for(
                lambda: job.running() and _raw_count(spark, layout, schemas) == len(messages),
                240,
                "every message in the history once there is room",
            )
        finally:
            job.kill()
        found = views(spark, layout, schemas)
        raw = found["raw_rescales"]
        assert raw.select("kafka_partition", "kafka_offset").distinct().count() == len(messages)
        assert found["rescales"].count() == 60


def _raw_count(spark: Any, layout: Layout, schemas: RescaleSchemas) -> int:
    try:
        return int(views(spark, layout, schemas)["raw_rescales"].count())
    except Exception:  # no table yet, or a commit being read as it is written
        return -1


def test_an_unreadable_checkpoint_file_is_mended_or_named(
    kafka: Settings, codec: Codec, spark: Any, schemas: RescaleSchemas, tmp_path: Path
) -> None:
    messages = _messages(codec)
    layout = Layout(tmp_path / "data")
    produce(kafka, kafka.topics.rescales, messages[:150])
    _drained(kafka, layout, tmp_path / "run-1.log")
    tables, latest = layout.checkpoint("tables"), layout.checkpoint("latest")
    commit = _newest(tables / "commits")
    commit.write_bytes(b"\x00garbage")
    (latest / "metadata").write_text('{"id": ', encoding="utf-8")

    produce(kafka, kafka.topics.rescales, messages[150:])
    said = _drained(kafka, layout, tmp_path / "run-2.log")
    assert f"checkpoint file {commit} was unreadable; removed it" in said
    assert f"checkpoint file {latest / 'metadata'} was unreadable; wrote it again" in said
    found = views(spark, layout, schemas)
    raw = found["raw_rescales"]
    assert raw.count() == len(messages)  # the batch run again wrote nothing twice
    assert raw.select("kafka_partition", "kafka_offset").distinct().count() == len(messages)
    assert found["rescales"].count() == 60

    offsets = _newest(tables / "offsets")
    offsets.write_text("v1\n{not json", encoding="utf-8")
    job = HistoryProcess(kafka, layout.data_dir, tmp_path / "run-3.log", "--available-now")
    assert job.wait(240) != 0
    assert f"checkpoint file {offsets} is unreadable and its batch {offsets.name} reached" in (
        job.tail(200)
    )


def _newest(log_dir: Path) -> Path:
    """The newest file of a checkpoint's log (its checksum files left aside)."""
    return max((p for p in log_dir.iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
