"""The scheduler's tables on a real RocksDB: a batch's states written as one WriteBatch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import faust
import pytest

from services.scheduler.adapters.app import OFFSET_CODEC, AwaitedTable, _awaited_table


class _Changelog:
    """Where the table sends its changelog records (the service's `Output`)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, bytes, bytes, int]] = []

    def send(self, topic: str, key: bytes, value: bytes, partition: int, **_: Any) -> None:
        self.sent.append((topic, key, value, partition))


def _table(tmp_path: Path, store: str) -> tuple[AwaitedTable, _Changelog]:
    app = faust.App("batched-test", broker="kafka://127.0.0.1:9", store=store, datadir=tmp_path)
    table = _awaited_table(app, "folded", OFFSET_CODEC, "offsets")
    changelog = _Changelog()
    table.output = changelog  # type: ignore[assignment]
    table.partition_of.update({"a": 1, "b": 2})
    return table, changelog


def test_a_batch_reaches_rocksdb_at_its_end_each_key_in_its_partition(tmp_path: Path) -> None:
    table, changelog = _table(tmp_path, "rocksdb://")
    store: Any = table.data
    with table.batched():
        table["a"] = 5
        table["b"] = 7
        assert len(changelog.sent) == 2  # the changelog records go out at once
        assert store._db_for_partition(1).get(b"a") is None
        with pytest.raises(RuntimeError, match="puts wait in a batch"):
            table.get("a")
    assert store._db_for_partition(1).get(b"a") == b"5"
    assert store._db_for_partition(2).get(b"b") == b"7"
    assert store._db_for_partition(1).get(b"b") is None
    assert (table["a"], table["b"]) == (5, 7)
    assert [(key, partition) for _, key, _, partition in changelog.sent] == [(b"a", 1), (b"b", 2)]


def test_outside_a_batch_a_write_lands_at_once(tmp_path: Path) -> None:
    table, _ = _table(tmp_path, "rocksdb://")
    table["a"] = 3
    assert table.data._db_for_partition(1).get(b"a") == b"3"  # type: ignore[attr-defined]
    assert table.get("a") == 3


def test_a_memory_table_takes_the_same_calls(tmp_path: Path) -> None:
    table, _ = _table(tmp_path, "memory://")
    with table.batched():
        table["a"] = 5
        assert table["a"] == 5
    assert table["a"] == 5
