"""The history read straight from its committed Delta tables: no Spark, no JVM.

`history summary` and `history timeline` answer from here, whether a history
service runs or not. delta-rs (the `deltalake` package) follows each table's
Delta log to the Parquet files of its newest committed version, so a file of a
batch that was not committed is never read, and DataFusion, the query engine
inside delta-rs (`QueryBuilder`), runs the few queries they need. Neither
pyspark nor pyarrow (nor numpy) is imported: a command costs about a quarter of a
second of CPU beside Python's own start (docs/benchmarks.md, where DuckDB and
the Spark Connect endpoint were measured against it). A batch is visible here the
moment its Delta commit is, as it is to the service's SQL endpoint (whose views
read each table's newest version at every query).

The tables are read as the views show them: the table `rescales_latest` is the
view `rescales` (each rescale's latest revision), and the view `rescale_states`
is its array `scheduler_states` (before 2026-12-04, the rows of the table
`rescale_states` that came with that revision's Kafka message).
A real Flink's own records (`flink_rescales_latest`, the view `flink_rescales`) have
the same columns where they mean the same; their job is `job_key`
(`<cluster>.<Flink job id>`, the id of scalefold's prediction of it), their spans the
array `scheduler_states` (`Source`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.history.flink_tables import LATEST_TABLE as FLINK_TABLE
from services.history.overview import STAT_PERCENTILES, label
from services.history.paths import Layout
from services.history.sinklog import is_delta
from services.history.tables import LATEST_TABLE

if TYPE_CHECKING:
    from arro3.core import Table
    from deltalake import QueryBuilder

Row = dict[str, Any]
STATES_TABLE = "rescale_states"


class HistoryNotFoundError(Exception):
    """The directory holds no history: the message says what is there instead."""


class HistoryUnreadableError(Exception):
    """A table's log or files could not be read; the message names the table."""


def quoted(value: str) -> str:
    """A SQL string literal (DataFusion's QueryBuilder takes no parameters)."""
    return "'" + value.replace("'", "''") + "'"


@dataclass(frozen=True)
class Lake:
    """The committed tables of one history directory (`--data-dir`)."""

    data_dir: Path

    @classmethod
    def at(cls, data_dir: Path) -> Lake:
        """The history at `data_dir`, or HistoryNotFoundError saying why there is none."""
        if not data_dir.is_dir():
            raise HistoryNotFoundError(f"no history at {data_dir}: no such directory")
        if not Layout(data_dir).tables.is_dir():
            raise HistoryNotFoundError(f"no history at {data_dir}: it has no tables/ directory")
        return cls(data_dir)

    def table_dir(self, name: str) -> Path:
        return Layout(self.data_dir).table(name)

    def committed(self, name: str) -> bool:
        return is_delta(self.table_dir(name))

    def rows(self, sql: str, tables: Mapping[str, str]) -> list[Row]:
        """The rows of `sql` over the committed `tables` (alias -> table name); every
        table must have a committed version."""
        (rows,) = self.rows_of((sql,), tables)
        return rows

    def rows_of(self, sqls: Sequence[str], tables: Mapping[str, str]) -> list[list[Row]]:
        """The rows of each of `sqls` over one version of the committed `tables`, each
        table's log read once for all of them."""
        from deltalake.exceptions import DeltaError

        try:
            builder = self._builder(tables)
            results = [builder.execute(sql).read_all() for sql in sqls]
        except (DeltaError, OSError) as error:
            names = ", ".join(sorted(tables.values()))
            raise HistoryUnreadableError(
                f"could not read {names} in {self.data_dir}: {error}"
            ) from None
        return [_as_rows(table) for table in results]

    def columns(self, name: str) -> list[str]:
        """The columns of the committed table `name`."""
        from deltalake import DeltaTable

        return [f.name for f in DeltaTable(str(self.table_dir(name))).schema().fields]

    def _builder(self, tables: Mapping[str, str]) -> QueryBuilder:
        from deltalake import DeltaTable, QueryBuilder

        builder = QueryBuilder()
        for alias, name in tables.items():
            builder = builder.register(alias, DeltaTable(str(self.table_dir(name))))
        return builder


def _as_rows(table: Table) -> list[Row]:
    columns = [table.column(i).to_pylist() for i in range(table.num_columns)]
    return [
        dict(zip(table.column_names, values, strict=True)) for values in zip(*columns, strict=True)
    ]


@dataclass(frozen=True)
class Source:
    """Where a side's rescales are: scalefold's records (and predictions), or a real
    Flink's own, and the column that names a job there."""

    name: str
    table: str
    job_column: str


SCALEFOLD = Source("scalefold", LATEST_TABLE, "job_id")
FLINK = Source("flink", FLINK_TABLE, "job_key")


def _where_job(job: str | None, prefix: str = "WHERE", column: str = "job_id") -> str:
    return f"{prefix} {column} = {quoted(job)}" if job is not None else ""


def counts_sql(job: str | None, column: str = "job_id") -> str:
    state = "terminal_state"
    return f"""SELECT count(CASE WHEN {state} IS NULL THEN 1 END) AS in_progress,
        count(CASE WHEN {state} = 'COMPLETED' THEN 1 END) AS completed,
        count(CASE WHEN {state} = 'FAILED' THEN 1 END) AS failed,
        count(CASE WHEN {state} = 'IGNORED' THEN 1 END) AS ignored,
        count(*) AS total
        FROM rescales {_where_job(job, column=column)}"""


def latest_sql(job: str | None, column: str = "job_id") -> str:
    """The newest ended rescale of each terminal state: Spark's max_by over
    (end_timestamp_ms, rescale_uuid) in overview.latest_per_terminal_state."""
    return f"""SELECT terminal_state, job_id, rescale_uuid, trigger_cause, terminated_reason,
        start_timestamp_ms, end_timestamp_ms, duration_ms FROM (
          SELECT *, row_number() OVER (PARTITION BY terminal_state
            ORDER BY end_timestamp_ms DESC NULLS LAST, rescale_uuid DESC) AS _n
          FROM rescales WHERE terminal_state IS NOT NULL {_where_job(job, "AND", column)})
        WHERE _n = 1 ORDER BY terminal_state"""


def stats_sql(job: str | None, column: str = "job_id") -> str:
    """Duration statistics per terminal state and over all terminated rescales (`ALL`);
    for each of STAT_PERCENTILES the two durations Spark's exact `percentile` interpolates
    between (`lo<k>`, `hi<k>`: ranks floor and ceil of (n - 1) * p among the `n` known
    durations, ascending), so only those leave the query (`interpolated` finishes it).
    (DataFusion's percentile_cont is an estimate: over 1587, 2251 and 13007 ms its p95 was
    11931.389 where the exact linear interpolation is 11931.4.)"""
    ended = f"FROM rescales WHERE terminal_state IS NOT NULL {_where_job(job, 'AND', column)}"
    picks = "".join(
        f", max(CASE WHEN i = floor((n - 1) * {p}) THEN d END) AS lo{k}"
        f", max(CASE WHEN i = ceil((n - 1) * {p}) THEN d END) AS hi{k}"
        for k, p in enumerate(STAT_PERCENTILES)
    )
    return f"""SELECT terminal_state, count(*) AS count, min(d) AS min, avg(d) AS avg,
        max(d) AS max, max(n) AS n{picks} FROM (
          SELECT terminal_state, d, count(d) OVER (PARTITION BY terminal_state) AS n,
            row_number() OVER (PARTITION BY terminal_state ORDER BY d ASC NULLS LAST) - 1 AS i
          FROM (SELECT terminal_state, duration_ms AS d {ended}
            UNION ALL SELECT 'ALL' AS terminal_state, duration_ms AS d {ended}))
        GROUP BY terminal_state ORDER BY terminal_state = 'ALL', terminal_state"""


def percentile(ordered: Sequence[float], p: float) -> float | None:
    """Spark's exact `percentile` of ascending values (aggregates.percentile_of_sorted):
    linear interpolation at position (n - 1) * p; None when there are none."""
    if not ordered:
        return None
    position = (len(ordered) - 1) * p
    return interpolated(position, ordered[math.floor(position)], ordered[math.ceil(position)])


def interpolated(position: float, low: float, high: float) -> float:
    """The value at `position` between the ranks floor and ceil of it, holding `low` and
    `high`."""
    lower, higher = math.floor(position), math.ceil(position)
    low, high = float(low), float(high)
    return low if lower == higher else (higher - position) * low + (position - lower) * high


def stats_row(row: Row) -> Row:
    """A row of `stats_sql` as overview.py prints it: each percentile under its label."""
    ranks = len(STAT_PERCENTILES)
    picks = {"n", *(f"{side}{k}" for k in range(ranks) for side in ("lo", "hi"))}
    known = row["n"] or 0
    return {
        **{name: value for name, value in row.items() if name not in picks},
        **{
            label(p): interpolated((known - 1) * p, row[f"lo{k}"], row[f"hi{k}"]) if known else None
            for k, p in enumerate(STAT_PERCENTILES)
        },
    }


@dataclass(frozen=True)
class Summary:
    """FLIP-487's overview and summary of a job or the fleet, as overview.py prints them."""

    counts: Row
    latest: list[Row]
    stats: list[Row]


EMPTY_COUNTS: Row = {"in_progress": 0, "completed": 0, "failed": 0, "ignored": 0, "total": 0}


def summary(lake: Lake, job: str | None, source: Source = SCALEFOLD) -> Summary:
    """The overview and duration statistics from the source's latest revisions
    (`rescales_latest`, or a real Flink's `flink_rescales_latest`); all zero before its
    first commit."""
    if not lake.committed(source.table):
        return Summary(dict(EMPTY_COUNTS), [], [])
    tables, column = {"rescales": source.table}, source.job_column
    sqls = (counts_sql(job, column), latest_sql(job, column), stats_sql(job, column))
    (counts,), latest, stats = lake.rows_of(sqls, tables)
    return Summary(
        counts,
        [with_times(row) for row in latest],
        [stats_row(row) for row in stats],
    )


def flink_keys(lake: Lake, job: str) -> list[str]:
    """The keys (`cluster.id`) of the real Flink jobs `job` names: by Flink's job id, or
    by the key itself."""
    if not lake.committed(FLINK_TABLE):
        return []
    sql = f"SELECT DISTINCT job_key FROM f WHERE {flink_job(job)} ORDER BY job_key"
    return [row["job_key"] for row in lake.rows(sql, {"f": FLINK_TABLE})]


def flink_job(job: str) -> str:
    """The SQL condition on a real Flink's table for the job `job` names: Flink's job id
    or its key (`cluster.id`)."""
    return f"(job_id = {quoted(job)} OR job_key = {quoted(job)})"


def with_times(row: Row) -> Row:
    """`start_time` and `end_time` as the views have them: UTC, from the millisecond columns."""
    from datetime import UTC, datetime, timedelta

    # naive, in UTC: what Spark's rows hold in a session whose time zone is UTC
    epoch = datetime(1970, 1, 1, tzinfo=UTC).replace(tzinfo=None)
    times = {
        name: None if row[ms] is None else epoch + timedelta(milliseconds=row[ms])
        for name, ms in (("start_time", "start_timestamp_ms"), ("end_time", "end_timestamp_ms"))
    }
    return {**row, **times}


def jobs(lake: Lake, limit: int = 10, source: Source = SCALEFOLD) -> list[str]:
    """Up to `limit` job ids with rescales, sorted: what a mistyped job id is told (a real
    Flink's jobs by Flink's job id)."""
    if not lake.committed(source.table):
        return []
    sql = f"SELECT DISTINCT job_id FROM rescales ORDER BY job_id LIMIT {int(limit) + 1}"
    return [row["job_id"] for row in lake.rows(sql, {"rescales": source.table})]


CHOSEN_COLUMNS = (
    "rescale_uuid, kafka_partition, kafka_offset, start_date, start_timestamp_ms, "
    "updated_at_ms, trigger_cause, terminal_state, terminated_reason"
)
SPAN_COLUMNS = ("span_index", "state", "enter_timestamp_ms", "leave_timestamp_ms")


def timeline_spans(lake: Lake, job: str, last: int) -> list[Row]:
    """The rows timeline.timeline_rows takes: the spans of the job's `last` most recent
    rescales, oldest first (a rescale with no span yet: one row with its spans null).

    The spans are the array `scheduler_states` of each row; a row written before rows
    kept it (null) has them in the table `rescale_states` of then, read with a second
    query with literal job and dates: delta-rs then skips the other date partitions and
    the files whose job_id statistics exclude the job, where a join would scan them all."""
    if not lake.committed(LATEST_TABLE):
        return []
    nested = "scheduler_states" in lake.columns(LATEST_TABLE)
    chosen = lake.rows(
        f"SELECT {CHOSEN_COLUMNS}{', scheduler_states' if nested else ''} FROM rescales "
        f"{_where_job(job)} ORDER BY start_timestamp_ms DESC, rescale_uuid DESC LIMIT {int(last)}",
        {"rescales": LATEST_TABLE},
    )
    old = [r for r in chosen if r.get("scheduler_states") is None]
    spans = _spans_of(lake, job, old) if old and lake.committed(STATES_TABLE) else {}
    rows = []
    for rescale in sorted(chosen, key=lambda r: (r["start_timestamp_ms"], r["rescale_uuid"])):
        own = rescale.pop("scheduler_states", None)
        key = (rescale["rescale_uuid"], rescale["kafka_partition"], rescale["kafka_offset"])
        found = spans.get(key) if own is None else _indexed(own)
        for span in found or [dict.fromkeys(SPAN_COLUMNS)]:
            rows.append({**rescale, **span})
    return rows


def _indexed(spans: Sequence[Row]) -> list[Row]:
    """An array of spans as rows of `SPAN_COLUMNS`, each with its position."""
    return [{**{c: s.get(c) for c in SPAN_COLUMNS}, "span_index": i} for i, s in enumerate(spans)]


def _spans_of(lake: Lake, job: str, chosen: Sequence[Row]) -> dict[tuple[Any, ...], list[Row]]:
    """The spans of the chosen revisions' messages, by (uuid, partition, offset)."""
    dates = ", ".join(sorted({f"DATE {quoted(str(r['start_date']))}" for r in chosen}))
    uuids = ", ".join(quoted(r["rescale_uuid"]) for r in chosen)
    found = lake.rows(
        f"SELECT rescale_uuid, kafka_partition, kafka_offset, {', '.join(SPAN_COLUMNS)} "
        f"FROM states {_where_job(job)} AND start_date IN ({dates}) "
        f"AND rescale_uuid IN ({uuids}) ORDER BY span_index",
        {"states": STATES_TABLE},
    )
    grouped: dict[tuple[Any, ...], list[Row]] = {}
    for row in found:
        key = (row["rescale_uuid"], row["kafka_partition"], row["kafka_offset"])
        grouped.setdefault(key, []).append({name: row[name] for name in SPAN_COLUMNS})
    return grouped


def flink_timeline_spans(lake: Lake, key: str, last: int) -> list[Row]:
    """`timeline_spans` of a real Flink's job (its key `cluster.id`): the spans are the
    array `scheduler_states` of each rescale's latest revision."""
    if not lake.committed(FLINK_TABLE):
        return []
    chosen = lake.rows(
        "SELECT rescale_uuid, start_timestamp_ms, trigger_cause, terminal_state, "
        f"terminated_reason, scheduler_states FROM f {_where_job(key, column='job_key')} "
        f"ORDER BY start_timestamp_ms DESC, rescale_uuid DESC LIMIT {int(last)}",
        {"f": FLINK_TABLE},
    )
    rows: list[Row] = []
    for rescale in sorted(chosen, key=lambda r: (r["start_timestamp_ms"], r["rescale_uuid"])):
        spans = _indexed(rescale.pop("scheduler_states") or []) or [dict.fromkeys(SPAN_COLUMNS)]
        rows.extend({**rescale, **span} for span in spans)
    return rows
