"""A streaming query's checkpoint file that cannot be read, mended where that is safe.

Spark writes each file of a checkpoint whole (to a temporary name, then renamed), so a
crash leaves none half written; a disk fault or a hand can. Spark reads, at a query's
start, its `metadata` (the query's id), the newest `offsets/N` (what batch N reads) and
the newest `commits/N` (batch N done); one it cannot parse fails the query at every
start. Before the queries start, `mend` checks those files of each source's latest and
tables queries (the planner's checkpoint is emptied at every start):
- `commits/N` unreadable: removed; batch N runs again from `offsets/N`, which writes
  nothing twice (each table's append is idempotent per batch, the MERGE replaces a row
  only by a later revision);
- `offsets/N` unreadable and batch N in no table: removed (with its commit, if any);
  batch N is planned again. So for a latest query, whatever its batch reached: its MERGE
  replaces a row only by a later revision, over any range of offsets;
- `offsets/N` unreadable and batch N in a table already (an append, once per batch id):
  its end offsets are lost, so running it again would write rows twice or lose some: the
  service does not start, and the line says what to do;
- `metadata` unreadable: written again with the id the query's tables were written
  under (their idempotent-write app ids `history-<table>-<id>`), or a new one where no
  table depends on it (the latest queries).
"""

from __future__ import annotations

import json
import struct
import uuid
import zlib
from collections.abc import Mapping
from pathlib import Path

from services.history.paths import Layout
from services.history.queries import HistoryJobError
from services.history.resume import batches
from services.history.sinklog import DELTA_LOG, wrote_batch
from services.history.sources import SOURCES

LOG_LINES = 2
"""At least a version line and a JSON line in a file of a checkpoint's log."""
CRC_MAGIC = b"crc\0"
CRC_HEADER = 8
"""Bytes before the checksums in a Hadoop checksum file: the magic and the chunk size."""
NEWEST_COMMITS = 100
"""How many of a table's newest commits are searched for the query id (`_written_as`)."""


class CheckpointError(HistoryJobError):
    """A checkpoint file that cannot be mended safely; the message says what to do."""


def mend(layout: Layout) -> list[str]:
    """Mend the checkpoints of every source's latest and tables queries (module doc); a
    line for each file mended; CheckpointError for one that cannot be."""
    said: list[str] = []
    for source in SOURCES:
        said += mend_one(layout.checkpoint(source.latest_checkpoint), {}, layout.data_dir)
        tables = {t: layout.table(t) for t in source.appended}
        said += mend_one(layout.checkpoint(source.tables_checkpoint), tables, layout.data_dir)
    return said


def mend_one(checkpoint: Path, tables: Mapping[str, Path], data_dir: Path) -> list[str]:
    """Mend one query's checkpoint; `tables`: those its batches append to once per batch
    (Delta's idempotent writes under `history-<table>-<query id>`)."""
    if not (checkpoint / "metadata").exists():
        return []
    said: list[str] = []
    metadata = checkpoint / "metadata"
    query = _query_id(metadata)
    if query is None or not _checksum_matches(metadata, metadata.read_bytes()):
        query = _written_as(tables) or query or str(uuid.uuid4())
        _remove(metadata)  # a checksum of the old bytes would refuse the new ones
        metadata.write_text(json.dumps({"id": query}) + "\n", encoding="utf-8")
        said.append(f"checkpoint file {metadata} was unreadable; wrote it again (query id {query})")
    commits, offsets = checkpoint / "commits", checkpoint / "offsets"
    last = max(batches(commits), default=None)
    if last is not None and not _readable(commits / str(last)):
        _remove(commits / str(last))
        said.append(
            f"checkpoint file {commits / str(last)} was unreadable; removed it: batch {last} "
            "runs again, which writes nothing twice"
        )
    planned = max(batches(offsets), default=None)
    if planned is not None and not _readable(offsets / str(planned)):
        holders = [
            t for t, path in tables.items() if wrote_batch(path, planned, f"history-{t}-{query}")
        ]
        if holders or (tables and (commits / str(planned)).exists()):
            where = ", ".join(holders) or "its sinks"
            raise CheckpointError(
                f"checkpoint file {offsets / str(planned)} is unreadable and its batch "
                f"{planned} reached {where} already: which offsets it read is lost, so it "
                "cannot run again without writing rows twice or losing some. Restore the file "
                f"from a backup, or stop the service, move {data_dir} aside and start it "
                "again: the history is read again from Kafka"
            )
        _remove(offsets / str(planned))
        _remove(commits / str(planned))
        why = "had reached no table" if tables else "only MERGEs a later revision"
        said.append(
            f"checkpoint file {offsets / str(planned)} was unreadable; removed it: its batch "
            f"{planned} {why} and is planned again"
        )
    return said


def _query_id(metadata: Path) -> str | None:
    try:
        found = json.loads(metadata.read_text(encoding="utf-8"))["id"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return found if isinstance(found, str) and found else None


def _readable(path: Path) -> bool:
    """Whether a log file of Spark's parses (a version line, then JSON lines) and matches
    its checksum file, where it has one (Hadoop refuses a file that does not)."""
    try:
        data = path.read_bytes()
        lines = data.decode("utf-8").splitlines()
        if len(lines) < LOG_LINES or not lines[0].startswith("v"):
            return False
        for line in lines[1:]:
            json.loads(line)
    except (OSError, ValueError):
        return False
    return _checksum_matches(path, data)


def _checksum_matches(path: Path, data: bytes) -> bool:
    """Hadoop's local checksum file `.<name>.crc` beside `path`: b"crc\\0", the bytes per
    checksum (a big-endian int), then each chunk's CRC-32 (big-endian)."""
    try:
        kept = _crc(path).read_bytes()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    if len(kept) < CRC_HEADER or kept[:4] != CRC_MAGIC:
        return False
    (chunk,) = struct.unpack(">i", kept[4:CRC_HEADER])
    if chunk <= 0:
        return False
    sums = [zlib.crc32(data[i : i + chunk]) for i in range(0, len(data), chunk)]
    return kept[CRC_HEADER:] == b"".join(struct.pack(">I", s) for s in sums)


def _crc(path: Path) -> Path:
    return path.with_name(f".{path.name}.crc")


def _remove(path: Path) -> None:
    """A checkpoint file and its checksum file."""
    path.unlink(missing_ok=True)
    _crc(path).unlink(missing_ok=True)


def _written_as(tables: Mapping[str, Path]) -> str | None:
    """The query id the tables' newest idempotent writes name (`history-<table>-<id>`)."""
    for name, table in tables.items():
        prefix = f"history-{name}-"
        log_dir = table / DELTA_LOG
        commits = sorted(log_dir.glob("*.json"), reverse=True)[:NEWEST_COMMITS]
        for commit in commits:
            for line in commit.read_text(encoding="utf-8").splitlines():
                app = json.loads(line).get("txn", {}).get("appId", "") if line.strip() else ""
                if app.startswith(prefix):
                    return str(app[len(prefix) :])
    return None
