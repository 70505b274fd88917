"""The Delta log of a history table: which Parquet files a table really holds.

Every table of the history is a Delta Lake table: Parquet data files plus the
transaction log `_delta_log/` (one JSON file per committed version, a Parquet
checkpoint every ten). A writer writes its files first and commits them by
writing the next version's JSON file atomically; readers that follow the log
(Spark, `deltalake`, DuckDB's delta extension) never see a file of a version
that was not committed. Readers that list the directory (plain pyarrow, DuckDB's
`read_parquet`) would: `committed_files` gives them the committed list, and
`history run` deletes the files no commit ever named before its queries start
(no query of the table runs then, so none can be half written). Files that
compaction replaced stay named by the log's `remove` actions until VACUUM
deletes them after the retention.

`committed_files` asks `deltalake` (delta-rs), which reads the log, checkpoints
included, as the protocol says; `uncommitted_files` adds the paths of the log's
`remove` actions, read from the same JSON commits and checkpoints.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import unquote, urlparse

DELTA_LOG = "_delta_log"


def is_delta(table_dir: Path) -> bool:
    """Whether a Delta table was committed at `table_dir` (its log holds a version)."""
    return latest_version(table_dir) >= 0


def latest_version(table_dir: Path, known: int = -1) -> int:
    """The newest committed version of the table; -1 before the first commit.

    `known`: a version read before; then only the commits after it are looked for (the
    log holds a day of commits, tens of thousands of files, until it is cleaned up)."""
    log_dir = table_dir / DELTA_LOG
    if known >= 0 and (log_dir / f"{known:020d}.json").exists():
        version = known
        while (log_dir / f"{version + 1:020d}.json").exists():
            version += 1
        return version
    try:
        names = [p.name for p in (table_dir / DELTA_LOG).iterdir()]
    except OSError:
        return -1
    versions = [int(n.split(".", 1)[0]) for n in names if n.endswith(".json") and n[0].isdigit()]
    return max(versions, default=-1)


def wrote_batch(table_dir: Path, batch: int, *app_ids: str) -> bool:
    """Whether the table committed `batch`, or a later one, of a query writing under any of
    `app_ids` (Delta's idempotent writes: `txnAppId`, `txnVersion` = the batch id)."""
    if not is_delta(table_dir):
        return False
    from deltalake import DeltaTable

    delta = DeltaTable(str(table_dir))
    versions = (delta.transaction_version(app_id) for app_id in app_ids)
    return any(v is not None and v >= batch for v in versions)


def committed_files(table_dir: Path) -> list[Path]:
    """The Parquet files of the table's newest version, sorted; empty before the first commit."""
    if not is_delta(table_dir):
        return []
    from deltalake import DeltaTable

    uris = DeltaTable(str(table_dir)).file_uris()  # absolute, as paths or file: URIs
    return sorted(Path(unquote(urlparse(uri).path)) for uri in uris)


def _named_in_log(table_dir: Path) -> set[str]:
    """Every data file path a retained log entry adds or removes (relative, unquoted)."""
    import pyarrow.parquet as pq

    log_dir = table_dir / DELTA_LOG
    names: set[str] = set()
    for entry in sorted(log_dir.iterdir()):
        if entry.name.endswith(".json") and entry.name[0].isdigit():
            for line in entry.read_text(encoding="utf-8").splitlines():
                action = json.loads(line) if line.strip() else {}
                for kind in ("add", "remove"):
                    if kind in action:
                        names.add(unquote(action[kind]["path"]))
        elif ".checkpoint." in entry.name and entry.name.endswith(".parquet"):
            checkpoint = pq.read_table(entry, columns=["add", "remove"])
            for kind in ("add", "remove"):
                for item in checkpoint.column(kind).to_pylist():
                    if item is not None:
                        names.add(unquote(item["path"]))
    return names


def data_files(table_dir: Path) -> list[Path]:
    """The Parquet files on disk under the table, committed or not (its log left out), sorted."""
    return sorted(p for p in table_dir.rglob("*.parquet") if DELTA_LOG not in p.parts)


def uncommitted_files(table_dir: Path) -> list[Path]:
    """Parquet files in the table that no committed version names (left by a crash)."""
    if not table_dir.is_dir():
        return []
    named = _named_in_log(table_dir) if (table_dir / DELTA_LOG).is_dir() else set()
    return [p for p in data_files(table_dir) if str(p.relative_to(table_dir)) not in named]


def unreferenced_files(table_dir: Path) -> list[Path]:
    """Parquet files in the table that its newest version does not hold: replaced by a
    compaction and not vacuumed yet, or left by a crash. What VACUUM may delete, once
    the retention lets it; none, and VACUUM has nothing to do."""
    held = {path.resolve() for path in committed_files(table_dir)}
    return [p for p in data_files(table_dir) if p.resolve() not in held]


def remove_uncommitted(table_dir: Path) -> list[Path]:
    """Delete `uncommitted_files`; only safe while no query writes the table. A table of
    Spark's Parquet file sink (an earlier scalefold's, not yet converted) is left alone."""
    if (table_dir / "_spark_metadata").is_dir() and not is_delta(table_dir):
        return []
    removed = uncommitted_files(table_dir)
    for path in removed:
        path.unlink(missing_ok=True)
        crc = path.with_name(f".{path.name}.crc")
        crc.unlink(missing_ok=True)
    return removed


LOG_FILE = re.compile(r"\d{20}\.(json|crc|checkpoint\.parquet)")
"""The name of a log file Delta keeps (a commit, its checksum, a checkpoint)."""


def orphan_checksums(table_dir: Path) -> list[Path]:
    """The log's checksum files (`<version>.crc`) whose commit (`<version>.json`) is gone,
    and Hadoop's checksums (`.<name>.crc`) of log files that are gone.
    Spark writes a checksum beside each commit it makes (OPTIMIZE, VACUUM, its appends);
    delta-rs, which MERGEs the latest tables and cleans their expired log, deletes the
    commits but not Spark's checksums: they stayed for ever (a month benchmark's
    `rescales_latest` log held 53 of them among 92 commits)."""
    log = table_dir / DELTA_LOG
    if not log.is_dir():
        return []
    oldest = min((path.stem for path in log.glob("*.json")), default=None)
    # the names are zero-padded versions: as strings they sort as numbers
    own = {p for p in log.glob("*.crc") if oldest and p.stem.isdigit() and p.stem < oldest}
    # Hadoop's local checksum of a log file (`.<name>.crc`, hidden) whose file is gone or
    # goes now: Spark writes one beside every file, delta-rs's cleanup deletes only the file
    # (a log file's, not a temporary one's that a commit is renaming this instant)
    hidden = {
        p
        for p in log.glob(".*.crc")
        if LOG_FILE.match(name := p.name.removeprefix(".").removesuffix(".crc"))
        and ((target := log / name) in own or not target.exists())
    }
    return sorted({*own, *hidden})


def last_compacted(table_dir: Path, within: int = 200) -> int | None:
    """When the table was last compacted, in wall ms, by its own log: the newest OPTIMIZE
    commit among its last `within` commits; without one, when it was created if its whole
    log is that short; None (long overdue) when `within` commits passed without one. Read
    with `deltalake` (a few tens of ms), so a restarted writer keeps the table's schedule."""
    if not is_delta(table_dir):
        return None
    from deltalake import DeltaTable

    commits = DeltaTable(str(table_dir)).history(limit=within)  # newest first
    for commit in commits:
        if commit.get("operation") == "OPTIMIZE":
            return int(commit["timestamp"])
    oldest = commits[-1] if commits else None
    if oldest is None or len(commits) >= within or oldest.get("version") not in (0, None):
        return None
    return int(oldest["timestamp"])
