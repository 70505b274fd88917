"""Files of the history on disk: the file sink's `_spark_metadata` log, the data-dir lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from services.history.sinklog import committed_files, remove_uncommitted, uncommitted_files


def _log(table: Path, name: str, entries: list[dict[str, object]]) -> None:
    log = table / "_spark_metadata"
    log.mkdir(parents=True, exist_ok=True)
    lines = ["v1", *(json.dumps(e) for e in entries)]
    (log / name).write_text("\n".join(lines))


def _file(table: Path, name: str) -> Path:
    path = table / "start_date=2024-01-01" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"PAR1")
    return path


def _add(path: Path) -> dict[str, object]:
    return {"path": path.as_uri(), "size": 4, "isDir": False, "action": "add"}


def test_committed_files_follow_batches_and_compactions(tmp_path: Path) -> None:
    a, b, c = (_file(tmp_path, f"part-{n}.parquet") for n in "abc")
    _log(tmp_path, "9.compact", [_add(a), _add(b)])
    _log(tmp_path, "10", [_add(c)])
    _log(tmp_path, "11", [{**_add(b), "action": "delete"}])
    assert committed_files(tmp_path) == [a, c]


def test_files_of_an_interrupted_batch_are_uncommitted_and_removable(tmp_path: Path) -> None:
    kept = _file(tmp_path, "part-kept.parquet")
    orphan = _file(tmp_path, "part-orphan.parquet")
    orphan.with_name(f".{orphan.name}.crc").write_bytes(b"crc")
    _log(tmp_path, "0", [_add(kept)])
    assert uncommitted_files(tmp_path) == [orphan]
    assert remove_uncommitted(tmp_path) == [orphan]
    assert not orphan.exists()
    assert not orphan.with_name(f".{orphan.name}.crc").exists()
    assert kept.exists()
    assert uncommitted_files(tmp_path) == []


def test_a_table_without_a_log_has_no_committed_files(tmp_path: Path) -> None:
    orphan = _file(tmp_path, "part-0.parquet")
    assert committed_files(tmp_path) == []
    assert uncommitted_files(tmp_path) == [orphan]
    assert committed_files(tmp_path / "missing") == []


def test_a_log_file_without_version_line_is_an_error(tmp_path: Path) -> None:
    log = tmp_path / "_spark_metadata"
    log.mkdir()
    (log / "0").write_text('{"path": "file:/x"}')
    with pytest.raises(ValueError, match="no version line"):
        committed_files(tmp_path)


def test_a_data_dir_is_used_by_one_job_at_a_time(tmp_path: Path) -> None:
    from services.history.job import HistoryJobError, exclusive

    with (
        exclusive(tmp_path),
        pytest.raises(HistoryJobError, match="another `history run`"),
        exclusive(tmp_path),
    ):
        pass
    with exclusive(tmp_path):  # released when the holder is done (or dies)
        pass
