"""The opt-in heap snapshots of a worker (adapters/heap.py) and their comparison."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from bench import heapdiff
from services.scheduler.adapters import heap


def test_nothing_is_traced_unless_asked() -> None:
    assert heap.start_from({}) is None


def test_snapshots_are_written_and_what_grew_between_them_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    env = {heap.ENV_DIR: str(tmp_path), "SCALEFOLD_HEAP_SNAPSHOT_SECONDS": "0.05"}
    stop = heap.start_from(env)
    assert stop is not None
    kept = []
    try:
        deadline = time.monotonic() + 20
        while len(list(tmp_path.glob("heap-*.tracemalloc"))) < 3 and time.monotonic() < deadline:
            kept.append(bytearray(256 * 1024))  # what the comparison must find
            time.sleep(0.02)
    finally:
        stop()
    assert len(list(tmp_path.glob("heap-*.tracemalloc"))) >= 3
    assert heapdiff.main([str(tmp_path), "--top", "3"]) == 0
    printed = capsys.readouterr().out
    assert "test_heap.py" in printed and "KiB in" in printed
