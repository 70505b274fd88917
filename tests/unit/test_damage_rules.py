"""The history's damage rules without Spark: which checkpoint files are mended, which are
refused (checkpoints.py), and what a failure is said to mean (diagnosis.py)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

from services.history import checkpoints
from services.history.checkpoints import CheckpointError, mend_one
from services.history.diagnosis import diagnosis

QUERY = "5b0c5f9e-0d4e-4a8e-9b43-9d2b1d3c1a77"
OFFSETS = 'v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"t":{"0":12}}'
COMMIT = 'v1\n{"nextBatchWatermarkMs":0}'


def _write(path: Path, text: str, *, checksum: bool = True) -> None:
    """A file as Hadoop's local filesystem writes it: the bytes and `.<name>.crc`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode()
    path.write_bytes(data)
    if checksum:
        sums = b"".join(
            struct.pack(">I", zlib.crc32(data[i : i + 512])) for i in range(0, len(data), 512)
        )
        path.with_name(f".{path.name}.crc").write_bytes(b"crc\0" + struct.pack(">i", 512) + sums)


def _checkpoint(tmp_path: Path, batches: int = 3) -> Path:
    checkpoint = tmp_path / "checkpoints" / "tables"
    _write(checkpoint / "metadata", json.dumps({"id": QUERY}))
    for batch in range(batches):
        _write(checkpoint / "offsets" / str(batch), OFFSETS)
        _write(checkpoint / "commits" / str(batch), COMMIT)
    return checkpoint


def test_a_sound_checkpoint_is_left_alone(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    before = sorted(p.name for p in checkpoint.rglob("*"))
    assert mend_one(checkpoint, {}, tmp_path) == []
    assert sorted(p.name for p in checkpoint.rglob("*")) == before


def test_an_unreadable_newest_commit_is_removed_with_its_checksum(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    (checkpoint / "commits" / "2").write_bytes(b'v1\n{"nextBatch')
    said = mend_one(checkpoint, {}, tmp_path)
    assert said == [
        f"checkpoint file {checkpoint / 'commits' / '2'} was unreadable; removed it: batch 2 "
        "runs again, which writes nothing twice"
    ]
    assert not (checkpoint / "commits" / "2").exists()
    assert not (checkpoint / "commits" / ".2.crc").exists()
    assert (checkpoint / "offsets" / "2").exists()


def test_a_flipped_byte_that_still_parses_fails_the_checksum(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    path = checkpoint / "commits" / "2"
    path.write_text(COMMIT.replace("0", "7"), encoding="utf-8")  # valid JSON, other bytes
    assert len(mend_one(checkpoint, {}, tmp_path)) == 1
    assert not path.exists()


def test_an_unreadable_plan_no_sink_holds_is_removed(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    _write(checkpoint / "offsets" / "3", "v1\n{broken", checksum=False)  # batch 3: planned only
    said = mend_one(checkpoint, {"rescales": tmp_path / "tables" / "rescales"}, tmp_path)
    assert said == [
        f"checkpoint file {checkpoint / 'offsets' / '3'} was unreadable; removed it: its batch "
        "3 had reached no table and is planned again"
    ]


def test_an_unreadable_plan_of_a_committed_batch_is_refused_with_what_to_do(
    tmp_path: Path,
) -> None:
    checkpoint = _checkpoint(tmp_path)
    (checkpoint / "offsets" / "2").write_bytes(b"")
    tables = {"rescales": tmp_path / "tables" / "rescales"}  # batch 2 committed: in them
    with pytest.raises(CheckpointError) as refused:
        mend_one(checkpoint, tables, tmp_path / "data")
    message = str(refused.value)
    assert f"checkpoint file {checkpoint / 'offsets' / '2'} is unreadable" in message
    assert f"move {tmp_path / 'data'} aside" in message
    assert (checkpoint / "offsets" / "2").exists()  # nothing deleted


def test_an_unreadable_plan_of_a_latest_query_is_removed_whatever_it_reached(
    tmp_path: Path,
) -> None:
    checkpoint = _checkpoint(tmp_path)  # a latest query's: it appends to no table
    (checkpoint / "offsets" / "2").write_bytes(b"v1\n{")
    said = mend_one(checkpoint, {}, tmp_path)
    assert said == [
        f"checkpoint file {checkpoint / 'offsets' / '2'} was unreadable; removed it: its batch "
        "2 only MERGEs a later revision and is planned again"
    ]
    assert not (checkpoint / "offsets" / "2").exists()
    assert not (checkpoint / "commits" / "2").exists()
    assert (checkpoint / "offsets" / "1").exists()


def test_unreadable_metadata_gets_the_id_the_tables_were_written_under(tmp_path: Path) -> None:
    checkpoint = _checkpoint(tmp_path)
    (checkpoint / "metadata").write_text('{"id": "', encoding="utf-8")
    table = tmp_path / "tables" / "rescales"
    commit = {"txn": {"appId": f"history-rescales-{QUERY}", "version": 2}}
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / f"{0:020d}.json").write_text(json.dumps(commit) + "\n")
    said = mend_one(checkpoint, {"rescales": table}, tmp_path)
    assert said == [
        f"checkpoint file {checkpoint / 'metadata'} was unreadable; wrote it again "
        f"(query id {QUERY})"
    ]
    assert json.loads((checkpoint / "metadata").read_text())["id"] == QUERY
    assert not (checkpoint / ".metadata.crc").exists()


def test_a_checkpoint_never_started_is_not_looked_at(tmp_path: Path) -> None:
    assert mend_one(tmp_path / "nothing", {}, tmp_path) == []
    assert checkpoints.NEWEST_COMMITS > 0


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            "java.io.IOException: No space left on device\n\tat java.base/...",
            "the disk holding /d is full",
        ),
        (
            "org.apache.spark.SparkFileNotFoundException: [FAILED_READ_FILE.FILE_NOT_EXIST] "
            "File file:/d/tables/rescales/start_date=2023-11-14/part-0001.c000.snappy.parquet "
            "does not exist. FileNotFoundException",
            "a data file of the history is gone: /d/tables/rescales/start_date=2023-11-14/"
            "part-0001.c000.snappy.parquet; restart the history service",
        ),
        (  # delta-rs' MERGE into a table whose file is gone (deltalake 1.6)
            "Generic DeltaTable error: Parquet error: Failed to fetch metadata for file "
            "d/t/x.parquet: Object Store error: Object at location /d/t/x.parquet not found: "
            "No such file or directory (os error 2)",
            "a data file of the history is gone: /d/t/x.parquet;",
        ),
    ],
)
def test_a_known_failure_is_said_in_one_line(error: str, expected: str) -> None:
    said = diagnosis(error, Path("/d"))
    assert said is not None
    assert expected in said
    assert "\n" not in said


def test_any_other_failure_is_left_to_its_own_text() -> None:
    assert diagnosis("Kafka broker not available", Path("/d")) is None
    assert diagnosis("/d/x.parquet", Path("/d")) is None  # a path alone says nothing gone
