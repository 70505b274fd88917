"""Files of the history on disk: the Delta log (written here by delta-rs, no Spark needed),
the data-dir lock."""

from __future__ import annotations

from pathlib import Path

import pytest

from services.history.sinklog import (
    DELTA_LOG,
    committed_files,
    data_files,
    is_delta,
    latest_version,
    orphan_checksums,
    remove_uncommitted,
    uncommitted_files,
)


def _append(table: Path, day: str, values: list[int]) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    data = pa.table({"value": values, "start_date": [day] * len(values)})
    write_deltalake(str(table), data, mode="append", partition_by=["start_date"])


def test_committed_files_follow_the_versions(tmp_path: Path) -> None:
    assert (latest_version(tmp_path), is_delta(tmp_path)) == (-1, False)
    _append(tmp_path, "2024-01-01", [1, 2])
    _append(tmp_path, "2024-01-02", [3])
    assert latest_version(tmp_path) == 1
    assert latest_version(tmp_path, known=0) == 1
    assert latest_version(tmp_path, known=7) == 1  # unknown to the log: listed again
    files = committed_files(tmp_path)
    assert files == data_files(tmp_path)
    assert {p.parent.name for p in files} == {"start_date=2024-01-01", "start_date=2024-01-02"}
    assert uncommitted_files(tmp_path) == []


def test_files_of_an_interrupted_write_are_uncommitted_and_removable(tmp_path: Path) -> None:
    _append(tmp_path, "2024-01-01", [1])
    committed = committed_files(tmp_path)
    orphan = tmp_path / "start_date=2024-01-01" / "part-00000-crashed.c000.snappy.parquet"
    orphan.write_bytes(committed[0].read_bytes())  # written, never committed
    assert uncommitted_files(tmp_path) == [orphan]
    assert remove_uncommitted(tmp_path) == [orphan]
    assert not orphan.exists()
    assert committed_files(tmp_path) == committed
    assert uncommitted_files(tmp_path) == []


def test_files_replaced_by_a_compaction_are_not_uncommitted(tmp_path: Path) -> None:
    from deltalake import DeltaTable

    for value in range(12):
        _append(tmp_path, "2024-01-01", [value])
    before = committed_files(tmp_path)
    table = DeltaTable(str(tmp_path))
    table.optimize.compact()
    table.create_checkpoint()
    for entry in (tmp_path / DELTA_LOG).glob("*.json"):  # what Delta's log cleanup does
        if int(entry.name.split(".")[0]) < table.version():
            entry.unlink()
    after = committed_files(tmp_path)
    assert len(after) == 1
    assert set(before) <= set(data_files(tmp_path))  # still on disk until VACUUM
    assert uncommitted_files(tmp_path) == []
    assert DeltaTable(str(tmp_path)).to_pyarrow_table().num_rows == 12


def test_a_directory_without_a_log_has_no_committed_files(tmp_path: Path) -> None:
    orphan = tmp_path / "start_date=2024-01-01" / "part-0.parquet"
    orphan.parent.mkdir(parents=True)
    orphan.write_bytes(b"PAR1")
    assert committed_files(tmp_path) == []
    assert uncommitted_files(tmp_path) == [orphan]
    assert committed_files(tmp_path / "missing") == []
    assert uncommitted_files(tmp_path / "missing") == []


def test_checksums_of_commits_the_log_let_go_are_orphans(tmp_path: Path) -> None:
    table = tmp_path / "t"
    for _ in range(3):
        _append(table, "2026-12-04", [1])
    log = table / DELTA_LOG
    names = [f"{version:020d}" for version in range(5)]
    for name in names:  # Spark's checksums, beside commits 0-4 (3 and 4 not written yet)
        (log / f"{name}.crc").write_text("{}")
    assert orphan_checksums(table) == []
    (log / f"{names[0]}.json").unlink()  # the expired log cleaned up, its checksums not
    assert orphan_checksums(table) == [log / f"{names[0]}.crc"]
    assert orphan_checksums(tmp_path / "none") == []
    # Hadoop's hidden checksums: of a log file gone or going, not of one there or a temp's
    hadoop = [log / f".{names[0]}.json.crc", log / f".{names[0]}.crc.crc"]
    kept = [log / f".{names[1]}.json.crc", log / f"..{names[5 - 1]}.json.1234.tmp.crc"]
    for path in (*hadoop, *kept):
        path.write_bytes(b"crc\0")
    assert orphan_checksums(table) == sorted([*hadoop, log / f"{names[0]}.crc"])


def test_a_data_dir_is_used_by_one_job_at_a_time(tmp_path: Path) -> None:
    from services.history.job import HistoryJobError, exclusive
    from services.history.paths import Layout

    with (
        exclusive(Layout(tmp_path)),
        pytest.raises(HistoryJobError, match="another `history run`"),
        exclusive(Layout(tmp_path)),
    ):
        pass
    with exclusive(Layout(tmp_path)):  # released when the holder is done (or dies)
        pass
