"""The REST API's table reader (restapi/store.py) over tables delta-rs writes, no Spark."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable, write_deltalake

from services.history.restapi.store import TableReader


def test_a_table_of_plain_writes_and_merges_reads_as_one(tmp_path: Path) -> None:
    # The CI failure of stop 51: delta-rs wrote the files of its MERGE with string_view
    # where its first write had string, and concatenating the two raised (a 500 on
    # every request of the Flink source).
    path = str(tmp_path / "latest")
    items = pa.list_(pa.struct([("state", pa.string())]))
    first = pa.table(
        {"job_id": ["a"], "n": [1], "spans": pa.array([[{"state": "Executing"}]], items)}
    )
    write_deltalake(path, first)
    later = pa.table({"job_id": ["b"], "n": [2], "spans": pa.array([[]], items)})
    merge = DeltaTable(path).merge(later, "s.job_id = t.job_id", source_alias="s", target_alias="t")
    merge.when_not_matched_insert_all().execute()
    assert len(DeltaTable(path).file_uris()) == 2

    version, table = TableReader(Path(path), ["job_id", "n", "spans"], "job_id").read()
    assert version == 1
    assert table.schema.field("job_id").type == pa.string()
    assert sorted(table.to_pylist(), key=lambda r: r["job_id"]) == [
        {"job_id": "a", "n": 1, "spans": [{"state": "Executing"}]},
        {"job_id": "b", "n": 2, "spans": []},
    ]
