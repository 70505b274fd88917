"""Which pairs of a real Flink's rescales and scalefold's predictions the observation
cannot decide, kept as a table the views join: `flink_verdicts`.

`flink compare --job` asks the scheduler's fold of the job's recorded inputs which pairs
are ambiguous (verdict.py) each time it runs. The views `flink_conformance` and
`flink_agreement` and the web page need the same answer without a broker round trip
per query, so the history service asks it itself: a `Judge` looks at the committed
pairs every few seconds (pairing.py) and, for each Flink job whose pairs changed (a
rescale began, settled, or its prediction did), asks the injected `Finder` once more
and again `RECHECK_MS` later (an input can reach the broker after the rescale it
precedes), judges the pairs (verdict.verdict) and writes one row per pair. The table
is rewritten whole (it holds a row per pair of the observed jobs, thousands at most),
from nothing on a restart: it is derived, like the views, from what Kafka keeps.

The history service and the scheduler share only the contracts: the entry point hands
the service the `Finder` (services/cli.py, contracts/ambiguity.py). The `Judge` is in
judge.py; here the table, and its rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from services.contracts.ambiguity import AmbiguitiesUnknownError, Finder, Findings
from services.contracts.settings import Settings
from services.history.lake import Lake, Row, quoted
from services.history.verdict import Verdict

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

TABLE = "flink_verdicts"
COLUMNS = (
    ("cluster", "string"),
    ("flink_job_id", "string"),
    ("job_key", "string"),
    ("pair_index", "int"),
    ("ambiguous", "boolean"),
    ("ambiguity", "string"),
    ("ambiguities_known", "boolean"),
    ("durations_agree", "boolean"),
    ("tolerance_ms", "bigint"),
    ("judged_at_ms", "bigint"),
)
"""A row per pair: `ambiguous` and why (`ambiguity`: each input it depends on, `; `
between); `ambiguities_known` false when the scheduler's fold could not be asked (only
the restart races Flink's own records show count then); `durations_agree` whether each
span lasted as long on both sides within `tolerance_ms` (the observation's resolution
and verdict.INSTANT_SLACK_MS), null where not compared (an ambiguous pair, one that
disagrees in a field already, or an unknown resolution)."""
SEPARATOR = "; "
RECHECK_MS = 30_000
"""A job is judged again this long after its pairs last changed."""


def spark_schema() -> StructType:
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(", ".join(f"{name} {kind}" for name, kind in COLUMNS))
    assert isinstance(schema, StructType)
    return schema


def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    kinds = {"string": pa.string(), "int": pa.int32(), "boolean": pa.bool_()}
    return pa.schema([(name, kinds.get(kind, pa.int64())) for name, kind in COLUMNS])


def ask(finder: Finder | None, settings: Settings, job: str) -> tuple[Findings | None, str]:
    """The scheduler's findings for the job, or None and why they are not known."""
    if finder is None:
        return None, "no scheduler to ask"
    try:
        return finder(settings, job), ""
    except AmbiguitiesUnknownError as error:
        return None, str(error)


def rows(
    pairs: Sequence[Mapping[str, Any]], judged: Verdict, known: bool, now_ms: int
) -> list[Row]:
    """One row per pair of one job (pairing.compare's rows) as `judged` says."""
    why: dict[int, list[str]] = {}
    for index, described in judged.reasons:
        why.setdefault(index, []).append(described)
    durations = dict(judged.durations)
    by_index = sorted(((int(pair["pair_index"]), pair) for pair in pairs), key=lambda t: t[0])
    return [
        {
            "cluster": pair["cluster"],
            "flink_job_id": pair["flink_job_id"],
            "job_key": pair["job_key"],
            "pair_index": index,
            "ambiguous": index in judged.ambiguous,
            "ambiguity": SEPARATOR.join(why[index]) if index in why else None,
            "ambiguities_known": known,
            "durations_agree": durations.get(index),
            "tolerance_ms": judged.tolerance_ms,
            "judged_at_ms": now_ms,
        }
        for index, pair in by_index
    ]


def verdict_columns(lake: Lake, job: str | None) -> dict[tuple[str, int], Row]:
    """The committed verdicts by (job key, pair), of `job` (every job without one)."""
    if not lake.committed(TABLE):
        return {}
    where = f"WHERE flink_job_id = {quoted(job)} OR job_key = {quoted(job)}" if job else ""
    found = lake.rows(f"SELECT * FROM v {where}", {"v": TABLE})
    return {(row["job_key"], int(row["pair_index"])): row for row in found}
