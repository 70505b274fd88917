"""The history's committed Delta tables in memory, read with delta-rs and pyarrow (no JVM).

A table is re-read only when its Delta version changes (`sinklog.latest_version`, a
few file-existence checks), and then only its data files not read before: Delta data
files never change once committed (a compaction or MERGE writes new ones and the log
removes the old), so a new version costs the files it added. Tables with deletion
vectors (not written by the history service) are read whole by delta-rs instead.
A rescale's children are arrays of its latest row; a history written before 2026-12-04
keeps those of its old rows in child tables, whose files are sorted by rescale uuid as
they are read and sliced per rescale (sliced.py), so a page's look-up of them is a few
dictionary hits per file, not a scan of the whole table per request.

`Source` is one kind of history (scalefold's predictions, or Flink's own records once
the bridge writes them): the latest-revision table, indexed by job, and the child
tables (vertices, slots, spans), looked up by the message the latest revision came
from. Every method answers from an immutable snapshot of one version, so the HTTP
server's threads never see a half-updated index.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from services.history import decisions, verdicts
from services.history.restapi.sliced import Sliced, rows_of, slices_of
from services.history.sinklog import latest_version

Row = dict[str, Any]
MESSAGE = ("rescale_uuid", "kafka_partition", "kafka_offset")
"""The Kafka message a row came from: links a latest revision to its children."""
KINDS = ("vertices", "slots", "states")
"""A rescale's children: its vertices, slot-sharing groups and scheduler-state spans."""
NESTED = {"vertices": "vertices", "slots": "slots", "states": "scheduler_states"}
"""Each kind of child: the array column of a latest row that holds it (both sources')."""


class TableReader:
    """One Delta table's committed rows (the given columns) as a pyarrow Table; with a
    `key`, also each data file's rows sorted and sliced by that column (`parts`)."""

    def __init__(self, path: Path, columns: Sequence[str], key: str | None = None) -> None:
        self.path, self.columns, self.key = path, list(columns), key
        self._lock = threading.Lock()
        self._version = -1
        self._files: dict[str, Sliced] = {}
        self._table = self._empty()
        self._parts: list[Sliced] = []

    def _empty(self) -> pa.Table:
        return pa.table({name: pa.array([], pa.null()) for name in self.columns})

    def read(self) -> tuple[int, pa.Table]:
        """The newest committed version and its rows; (-1, empty) before the first commit."""
        with self._lock:
            self._refresh()
            return self._version, self._table

    def parts(self) -> list[Sliced]:
        """The newest committed version's rows, sliced by `key`, one part per data file."""
        with self._lock:
            self._refresh()
            return self._parts

    def _refresh(self) -> None:
        version = latest_version(self.path, self._version)
        if version != self._version:
            self._load(version)

    def _load(self, version: int) -> None:
        from deltalake import DeltaTable

        table = DeltaTable(str(self.path), version=version)
        if "deletionVectors" in (table.protocol().reader_features or []):
            self._files = {}
            self._table = table.to_pyarrow_table(columns=self.columns)
            self._parts = [self._sliced(self._table)]
        else:
            present = set(table.schema().to_arrow().names)
            wanted = [c for c in self.columns if c in present]
            files = {}
            for uri in table.file_uris():
                files[uri] = self._files.get(uri) or self._sliced(self._read_file(uri, wanted))
            self._files = files
            self._parts = list(files.values())
            self._table = _concat([part.table for part in self._parts], self._empty())
        self._version = version

    def _sliced(self, data: pa.Table) -> Sliced:
        return Sliced.of(data, self.key) if self.key else Sliced(data, {})

    def _read_file(self, uri: str, columns: list[str]) -> pa.Table:
        path = unquote(urlparse(uri).path) if "://" in uri else uri
        has = set(pq.read_schema(path).names)  # a file written before a column was added
        data = pq.read_table(path, columns=[c for c in columns if c in has])
        data = data.cast(plain_schema(data.schema))
        for name in self.columns:  # a column added to the table after this file was written
            if name not in data.column_names:
                data = data.append_column(name, pa.nulls(data.num_rows))
        return data.select(self.columns)


def plain_schema(schema: pa.Schema) -> pa.Schema:
    """`schema` with Arrow's view types as their plain kinds (string_view as string...).
    delta-rs writes the files of its MERGE with view types where its plain writes have
    plain ones, and pyarrow cannot concatenate the two kinds of one column."""
    return pa.schema([field.with_type(_plain(field.type)) for field in schema], schema.metadata)


def _plain(kind: pa.DataType) -> pa.DataType:
    if pa.types.is_string_view(kind) or pa.types.is_binary_view(kind):
        return pa.string() if pa.types.is_string_view(kind) else pa.binary()
    if pa.types.is_struct(kind):
        return pa.struct([f.with_type(_plain(f.type)) for f in kind])
    if pa.types.is_map(kind):
        key, item = kind.key_field, kind.item_field
        return pa.map_(
            key.with_type(_plain(key.type)), item.with_type(_plain(item.type)), kind.keys_sorted
        )
    nested = getattr(kind, "value_field", None)  # lists of every kind, as plain lists
    if nested is None or pa.types.is_fixed_size_list(kind):
        return kind
    element = nested.with_type(_plain(nested.type))
    large = pa.types.is_large_list(kind) or pa.types.is_large_list_view(kind)
    return pa.large_list(element) if large else pa.list_(element)


def _concat(tables: list[pa.Table], empty: pa.Table) -> pa.Table:
    if not tables:
        return empty
    return pa.concat_tables(tables, promote_options="permissive")


@dataclass(frozen=True)
class TableNames:
    """The Delta tables of one source, under the history's tables directory."""

    latest: str
    vertices: str
    slots: str
    states: str


SCALEFOLD_TABLES = TableNames(
    "rescales_latest", "rescale_vertices", "rescale_slots", "rescale_states"
)
"""scalefold's: the children are arrays in each row, and before 2026-12-04 were tables of
their own (the three named), read for the rows of then."""

LATEST_COLUMNS = (
    "job_id",
    *MESSAGE,
    "resource_requirements_uuid",
    "rescale_attempt_id",
    "trigger_cause",
    "terminal_state",
    "terminated_reason",
    "start_timestamp_ms",
    "end_timestamp_ms",
    "duration_ms",
    "updated_at_ms",
    "scheduler_settings",
    "available_slots",
    "reactive_mode",
    "cooldown_ms",
    "total_desired_slots",
    "total_minimal_required_slots",
    "total_pre_rescale_slots",
    "total_post_rescale_slots",
    "current_state",
    "current_state_enter_ms",
    "current_state_open",
    "status_message",
)
VERTEX_COLUMNS = (
    *MESSAGE,
    "vertex_index",
    "job_vertex_id",
    "job_vertex_name",
    "slot_sharing_group_id",
    "slot_sharing_group_name",
    "desired_parallelism",
    "sufficient_parallelism",
    "pre_rescale_parallelism",
    "post_rescale_parallelism",
)
_PROFILE = (
    "cpu_cores",
    *(
        f"{m}_mb"
        for m in ("task_heap_memory", "task_off_heap_memory", "managed_memory", "network_memory")
    ),
)
SLOT_COLUMNS = (
    *MESSAGE,
    "slot_index",
    "slot_sharing_group_id",
    "slot_sharing_group_name",
    "desired_slots",
    "minimal_required_slots",
    "pre_rescale_slots",
    "post_rescale_slots",
    *(f"request_{p}" for p in _PROFILE),
    *(f"acquired_{p}" for p in _PROFILE),
)
STATE_COLUMNS = (
    *MESSAGE,
    "span_index",
    "state",
    "enter_timestamp_ms",
    "leave_timestamp_ms",
    "duration_ms",
    "stringified_exception",
)


@dataclass(frozen=True)
class Jobs:
    """The latest-revision table of one version, sorted and sliced by job."""

    table: pa.Table
    slices: Mapping[str, tuple[int, int]]
    _rows: dict[str, list[Row]] = field(default_factory=dict, compare=False)
    memo: dict[str, Any] = field(default_factory=dict, compare=False)
    """What the pages and listings derive from this version, computed once per version."""

    @classmethod
    def of(cls, table: pa.Table) -> Jobs:
        if table.num_rows == 0:
            return cls(table, {})
        ordered = table.sort_by([("job_id", "ascending"), ("start_timestamp_ms", "descending")])
        return cls(ordered, slices_of(ordered.column("job_id")))

    def rows(self, job_id: str) -> list[Row] | None:
        """The job's rescales (latest revisions, newest start first); None: unknown job."""
        if job_id not in self.slices:
            return None
        if job_id not in self._rows:  # a benign race: two threads compute the same list
            start, length = self.slices[job_id]
            self._rows[job_id] = self.table.slice(start, length).to_pylist()
        return self._rows[job_id]


def children(parts: Sequence[Sliced], messages: Sequence[Row]) -> dict[str, list[Row]]:
    """The rows of a child table (`parts`, sliced by uuid) that came with each of
    `messages` (latest revisions), by uuid: the raw tables hold every revision's."""
    keys = {m["rescale_uuid"]: (m["kafka_partition"], m["kafka_offset"]) for m in messages}
    found = rows_of(parts, list(keys)) if keys else []
    result: dict[str, list[Row]] = {uuid: [] for uuid in keys}
    for row in found:
        if keys[row["rescale_uuid"]] == (row["kafka_partition"], row["kafka_offset"]):
            result[row["rescale_uuid"]].append(row)
    return result


class Source:
    """One source's tables: the jobs' latest revisions and, on demand, their children."""

    def __init__(self, tables_dir: Path, names: TableNames) -> None:
        self._latest = TableReader(tables_dir / names.latest, self.latest_columns())
        self._children = {
            "vertices": TableReader(tables_dir / names.vertices, VERTEX_COLUMNS, "rescale_uuid"),
            "slots": TableReader(tables_dir / names.slots, SLOT_COLUMNS, "rescale_uuid"),
            "states": TableReader(tables_dir / names.states, STATE_COLUMNS, "rescale_uuid"),
        }
        self._lock = threading.Lock()
        self._jobs: tuple[int, Jobs] = (-2, Jobs.of(pa.table({})))

    def decisions(self, job_key: str, last: int) -> list[Row]:
        """The autoscaler's steps of a job: none, but of a real Flink's (FlinkSource)."""
        return []

    @staticmethod
    def latest_columns() -> Sequence[str]:
        return [*LATEST_COLUMNS, *NESTED.values()]

    def jobs(self) -> Jobs:
        """The newest committed version's jobs, indexed once per version."""
        version, table = self._latest.read()
        with self._lock:
            if self._jobs[0] != version:
                self._jobs = (version, Jobs.of(table))
            return self._jobs[1]

    def details(
        self, messages: Sequence[Row], kinds: Sequence[str] = KINDS
    ) -> dict[str, dict[str, list[Row]]]:
        """uuid -> {"vertices": rows, "slots": rows, "states": rows} of each latest revision:
        the arrays of its row; a row written before rows kept them (null arrays) has its
        children looked up in the child tables of then, only the `kinds` asked for (each
        is a scan of its table), the rest empty."""
        old = [m for m in messages if m.get("vertices") is None]
        found = {
            kind: children(reader.parts(), old) if kind in kinds and old else {}
            for kind, reader in self._children.items()
        }
        return {
            m["rescale_uuid"]: _nested(m)
            if m.get("vertices") is not None
            else {kind: _ordered(kind, found[kind].get(m["rescale_uuid"], [])) for kind in found}
            for m in messages
        }


FLINK_TABLES = TableNames("flink_rescales_latest", "", "", "")
"""Flink's own records (the bridge's, services/history/flink_tables.py): one table, the
children nested in each row."""


class FlinkSource(Source):
    """Flink's records: `job_id` is Flink's job id, the children are arrays in the row."""

    def __init__(self, tables_dir: Path, names: TableNames = FLINK_TABLES) -> None:
        self._latest = TableReader(tables_dir / names.latest, self.latest_columns())
        self._children = {}
        self._lock = threading.Lock()
        self._jobs = (-2, Jobs.of(pa.table({})))
        self._verdicts = TableReader(
            tables_dir / verdicts.TABLE, [name for name, _ in verdicts.COLUMNS]
        )
        self._decisions = TableReader(
            tables_dir / decisions.TABLE, [name for name, _ in decisions.COLUMNS]
        )

    def decisions(self, job_key: str, last: int) -> list[Row]:
        """The autoscaler's `last` recorded steps of a job (`scaling_decisions`), newest first."""
        _, table = self._decisions.read()
        if not table.num_rows:
            return []
        mine = [row for row in table.to_pylist() if row["job_key"] == job_key]
        return sorted(mine, key=lambda row: -int(row["decided_at_ms"]))[:last]

    def verdicts(self, job_key: str) -> dict[int, Row]:
        """The history's verdict on each pair of a job (`flink_verdicts`), by pair."""
        _, table = self._verdicts.read()
        if not table.num_rows:
            return {}
        return {
            int(row["pair_index"]): row for row in table.to_pylist() if row["job_key"] == job_key
        }

    @staticmethod
    def latest_columns() -> Sequence[str]:
        flink_has = [c for c in LATEST_COLUMNS if c not in FLINK_LACKS]
        return [*flink_has, "cluster", "job_key", "job_name", *NESTED.values()]

    def details(
        self, messages: Sequence[Row], kinds: Sequence[str] = KINDS
    ) -> dict[str, dict[str, list[Row]]]:
        return {m["rescale_uuid"]: _nested(m) for m in messages}


FLINK_LACKS = (
    "updated_at_ms",
    "scheduler_settings",
    "available_slots",
    "reactive_mode",
    "cooldown_ms",
    "status_message",
)
"""What Flink's REST API does not show, so its table has no such column."""
_INDEX = {"vertices": "vertex_index", "slots": "slot_index", "states": "span_index"}


def _ordered(kind: str, rows: list[Row]) -> list[Row]:
    """A child table's rows of one rescale in their record's order, as its arrays have them."""
    return sorted(rows, key=lambda row: row[_INDEX[kind]])


def _nested(row: Row) -> dict[str, list[Row]]:
    return {
        kind: [{**item, _INDEX[kind]: i} for i, item in enumerate(row.get(column) or [])]
        for kind, column in NESTED.items()
    }
