"""The file sink's `_spark_metadata` log: which Parquet files a table really holds.

Spark's file sink writes a batch's files straight into the table directory and
then commits their names to `_spark_metadata/<batch>` (compacted every few
batches into `<batch>.compact`). Spark readers list only committed files; other
readers (pyarrow, DuckDB) list the directory and would also see the files of a
batch that a crash interrupted. `committed_files` gives such readers the
committed list, and `history run` deletes uncommitted files before its queries
start (no query of this table runs then, so none can be half written).

Log format: a first line `v1`, then one JSON object per file,
`{"path": "file:/...", "action": "add" | "delete", ...}`.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse

METADATA = "_spark_metadata"


def _entries(log_file: Path) -> list[dict[str, object]]:
    lines = log_file.read_text(encoding="utf-8").splitlines()
    if not lines or not lines[0].startswith("v"):
        raise ValueError(f"{log_file} is not a file sink log (no version line)")
    return [json.loads(line) for line in lines[1:] if line.strip()]


def _batch_number(log_file: Path) -> int:
    return int(log_file.name.split(".", 1)[0])


def committed_files(table_dir: Path) -> list[Path]:
    """The Parquet files of every committed batch, sorted; empty before the first commit."""
    log_dir = table_dir / METADATA
    if not log_dir.is_dir():
        return []
    logs = [p for p in log_dir.iterdir() if p.name.split(".", 1)[0].isdigit()]
    files: set[Path] = set()
    for log_file in sorted(logs, key=lambda p: (_batch_number(p), p.suffix != ".compact")):
        for entry in _entries(log_file):
            path = Path(unquote(urlparse(str(entry["path"])).path))
            if entry.get("action") == "delete":
                files.discard(path)
            else:
                files.add(path)
    return sorted(files)


def uncommitted_files(table_dir: Path) -> list[Path]:
    """Parquet files in the table that no committed batch lists (left by a crash)."""
    committed = {p.resolve() for p in committed_files(table_dir)}
    found = (p for p in table_dir.rglob("*.parquet") if METADATA not in p.parts)
    return sorted(p for p in found if p.resolve() not in committed)


def remove_uncommitted(table_dir: Path) -> list[Path]:
    """Delete `uncommitted_files`; only safe while no query writes the table."""
    removed = uncommitted_files(table_dir)
    for path in removed:
        path.unlink(missing_ok=True)
        crc = path.with_name(f".{path.name}.crc")
        crc.unlink(missing_ok=True)
    return removed
