"""`flink compare` without Spark: the view `flink_conformance` and `flink_agreement`
(conformance.py, module doc) computed from the committed Delta tables with delta-rs.

The same pairs, fields and verdicts as the views, as dicts with the views' column names:
Flink's rescales from `flink_rescales_latest`, scalefold's from `rescales_latest` (both
with their children as arrays of structs; scalefold's rows of before 2026-12-04 with
theirs in child tables), numbered per job in `ORDER` and paired by number.
tests/history/test_flink.py checks both give the same rows on the same tables.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.history.conformance import ALL_FIELDS, CHILD_FIELDS, DURATIONS, FIELDS, JOB, ORDER
from services.history.flink_tables import LATEST_TABLE as FLINK_TABLE
from services.history.lake import Lake, Row, flink_job, quoted
from services.history.tables import LATEST_TABLE
from services.history.verdicts import verdict_columns

Entries = list[dict[str, Any]]
SIDE_COLUMNS = (*ORDER, "in_progress", "trigger_cause", "terminal_state", "terminated_reason")
NESTED = ("vertices", "slots", "scheduler_states")
"""The arrays of a row the comparison reads (both sources name them alike)."""


def _entries(pairs: Iterable[tuple[Any, Any]]) -> Entries:
    """`{key, value}` entries sorted by key, then value (Spark's array_sort of structs)."""
    return [{"key": k, "value": v} for k, v in sorted(pairs, key=_nulls_first)]


def _nulls_first(pair: tuple[Any, Any]) -> tuple[Any, ...]:
    return tuple((value is not None, value) for value in pair)


def _group(slot: Mapping[str, Any]) -> Any:
    return slot["slot_sharing_group_name"] or slot["slot_sharing_group_id"]


def flink_rows(lake: Lake, job: str | None) -> list[Row]:
    """Flink's latest revisions of `job` (Flink's job id or its key; every job without one)."""
    if not lake.committed(FLINK_TABLE):
        return []
    where = f"WHERE {flink_job(job)}" if job else ""
    return lake.rows(
        f"SELECT cluster, job_id, job_key, {', '.join(SIDE_COLUMNS)}, vertices, slots, "
        f"scheduler_states FROM f {where}",
        {"f": FLINK_TABLE},
    )


def flink_side(rows: Sequence[Row]) -> list[Row]:
    """Flink's rescales (`flink_rows`) in the compared columns (conformance._flink_side)."""
    return [
        {
            "cluster": row["cluster"],
            "flink_job_id": row["job_id"],
            "job_key": row["job_key"],
            **_compared(
                row, row["vertices"] or [], row["slots"] or [], row["scheduler_states"] or []
            ),
        }
        for row in rows
    ]


def _compared(row: Row, vertices: Sequence[Row], slots: Sequence[Row], spans: Sequence[Row]) -> Row:
    """A side's compared columns of one rescale (`row`) with its children."""
    return {
        **{c: row[c] for c in SIDE_COLUMNS},
        "pre_parallelism": _entries(
            (v["job_vertex_id"], v["pre_rescale_parallelism"]) for v in vertices
        ),
        "post_parallelism": _entries(
            (v["job_vertex_id"], v["post_rescale_parallelism"]) for v in vertices
        ),
        "slots": _entries((_group(s), s["post_rescale_slots"]) for s in slots),
        "scheduler_states": [s["state"] for s in spans],
        "state_durations": [s["duration_ms"] for s in spans],
    }


def predicted_side(lake: Lake, keys: Sequence[str]) -> list[Row]:
    """scalefold's rescales of the jobs `keys` in the compared columns
    (conformance.predictions): the arrays of each rescale's latest revision (of a row
    written before rows kept them, its rows in the child tables of then)."""
    if not keys or not lake.committed(LATEST_TABLE):
        return []
    among = f"job_id IN ({', '.join(quoted(k) for k in keys)})"
    nested = [c for c in NESTED if c in lake.columns(LATEST_TABLE)]
    latest = lake.rows(
        f"SELECT job_id, kafka_partition, kafka_offset, {', '.join((*SIDE_COLUMNS, *nested))} "
        f"FROM r WHERE {among}",
        {"r": LATEST_TABLE},
    )
    old = {
        row["rescale_uuid"]: (row["kafka_partition"], row["kafka_offset"])
        for row in latest
        if row.get("vertices") is None
    }

    def children(table: str, columns: str) -> dict[str, list[Row]]:
        if not old or not lake.committed(table):
            return {}
        found: dict[str, list[Row]] = {}
        sql = f"SELECT rescale_uuid, kafka_partition, kafka_offset, {columns} FROM c WHERE {among}"
        for row in lake.rows(sql, {"c": table}):
            if old.get(row["rescale_uuid"]) == (row["kafka_partition"], row["kafka_offset"]):
                found.setdefault(row["rescale_uuid"], []).append(row)
        return found

    legacy = {
        "vertices": children(
            "rescale_vertices", "job_vertex_id, pre_rescale_parallelism, post_rescale_parallelism"
        ),
        "slots": children(
            "rescale_slots", "slot_sharing_group_id, slot_sharing_group_name, post_rescale_slots"
        ),
        "scheduler_states": {
            uuid: sorted(spans, key=lambda s: s["span_index"])
            for uuid, spans in children("rescale_states", "span_index, state, duration_ms").items()
        },
    }

    def of(row: Row, column: str) -> list[Row]:
        own = row.get(column)
        return legacy[column].get(row["rescale_uuid"], []) if own is None else own

    return [
        {
            "job_key": row["job_id"],
            **_compared(row, of(row, "vertices"), of(row, "slots"), of(row, "scheduler_states")),
        }
        for row in latest
    ]


def _numbered(side: Sequence[Row]) -> dict[tuple[str, int], Row]:
    """Each row under (job_key, its number in ORDER within the job, from 1)."""
    by_job: dict[str, list[Row]] = {}
    for row in side:
        by_job.setdefault(row["job_key"], []).append(row)
    numbered = {}
    for job, rows in by_job.items():
        ordered = sorted(rows, key=lambda r: tuple((r[c] is not None, r[c]) for c in ORDER))
        for index, row in enumerate(ordered, start=1):
            numbered[(job, index)] = row
    return numbered


def conformance(flink: Sequence[Row], predicted: Sequence[Row]) -> list[Row]:
    """One row per pair, in the view's columns (conformance.conformance), by job and pair."""
    jobs = {row["job_key"]: row for row in flink}
    f = _numbered(flink)
    p = _numbered([row for row in predicted if row["job_key"] in jobs])
    pairs = []
    for job, index in sorted(f.keys() | p.keys()):
        left, right = f.get((job, index)), p.get((job, index))
        agrees = {
            name: left is not None and right is not None and left[name] == right[name]
            for name in FIELDS
        }
        origin = jobs[job]
        sides = (("flink", left), ("predicted", right))
        pairs.append(
            {
                "cluster": origin["cluster"],
                "flink_job_id": origin["flink_job_id"],
                "job_key": job,
                "pair_index": index,
                "paired": "both" if left and right else "flink_only" if left else "predicted_only",
                "settled": _settled(left, right),
                "flink_rescale_uuid": (left or {}).get("rescale_uuid"),
                "predicted_rescale_uuid": (right or {}).get("rescale_uuid"),
                "flink_start_timestamp_ms": (left or {}).get("start_timestamp_ms"),
                "predicted_start_timestamp_ms": (right or {}).get("start_timestamp_ms"),
                **{
                    column: value
                    for name in FIELDS
                    for column, value in (
                        (f"flink_{name}", (left or {}).get(name)),
                        (f"predicted_{name}", (right or {}).get(name)),
                        (f"{name}_agrees", agrees[name]),
                    )
                },
                f"{ALL_FIELDS}_agree": all(agrees.values()),
                **{f"{side}_{DURATIONS}": (row or {}).get(DURATIONS) for side, row in sides},
            }
        )
    return pairs


def _settled(flink: Row | None, predicted: Row | None) -> bool:
    """Neither side in progress, and the prediction's children all committed
    (conformance.CHILD_FIELDS): until they are, it would disagree in their fields."""
    if (flink or {}).get("in_progress") or (predicted or {}).get("in_progress"):
        return False
    return predicted is None or children_committed(predicted)


def children_committed(predicted: Mapping[str, Any], prefix: str = "") -> bool:
    """Whether every child table of a prediction (`prefix`: its columns', e.g. a pair's
    `predicted_`) has its rows committed."""
    return all(predicted[f"{prefix}{name}"] for name in CHILD_FIELDS)


def agreement(pairs: Sequence[Row]) -> list[Row]:
    """Per job and field, then over every job (`scope` = `total`): settled pairs compared,
    those that agree, the rate (conformance.agreement), ordered as `flink compare` reads."""
    names = [*FIELDS, ALL_FIELDS]
    verdicts = [f"{name}_agrees" for name in FIELDS] + [f"{ALL_FIELDS}_agree"]
    settled = [pair for pair in pairs if pair["settled"]]
    rows: list[Row] = []
    scopes: list[tuple[str, dict[str, Any], list[Row]]] = []
    for job in sorted({pair["job_key"] for pair in settled}):
        mine = [pair for pair in settled if pair["job_key"] == job]
        scopes.append(("job", {c: mine[0][c] for c in JOB}, mine))
    if settled:
        scopes.append(("total", dict.fromkeys(JOB), settled))
    for scope, job_columns, chosen in scopes:
        for index, (name, verdict) in enumerate(zip(names, verdicts, strict=True)):
            agreed = sum(1 for pair in chosen if pair[verdict])
            decidable = [pair for pair in chosen if not pair.get("ambiguous")]
            decided = sum(1 for pair in decidable if pair[verdict])
            rows.append(
                {
                    "scope": scope,
                    **job_columns,
                    "field": name,
                    "compared": len(chosen),
                    "agreed": agreed,
                    "rate": agreed / len(chosen),
                    "ambiguous": len(chosen) - len(decidable),
                    "decidable": len(decidable),
                    "decidable_agreed": decided,
                    "decidable_rate": decided / len(decidable) if decidable else None,
                    "field_index": index,
                }
            )
    return rows


@dataclass(frozen=True)
class Comparison:
    """What `flink compare` prints: the pairs, their agreement (the views' rows), and the
    vertices' names by id, as Flink's records name them."""

    pairs: list[Row]
    rates: list[Row]
    names: dict[str, str]


def judged(pairs: Sequence[Row], verdicts: Mapping[tuple[str, int], Row]) -> list[Row]:
    """`pairs` with the view's columns of their verdicts (verdicts.py): `judged` (a verdict
    is there), `ambiguous`, `ambiguity` (why), `state_durations_agree` (within the
    observation's resolution; None when not judged)."""
    out = []
    for pair in pairs:
        found = verdicts.get((pair["job_key"], int(pair["pair_index"])))
        out.append(
            {
                **pair,
                "judged": found is not None,
                "ambiguous": bool(found and found["ambiguous"]),
                "ambiguity": found["ambiguity"] if found else None,
                f"{DURATIONS}_agree": found.get("durations_agree") if found else None,
            }
        )
    return out


def compare(lake: Lake, job: str | None, verdicts: bool = True) -> Comparison:
    """The pairs of `job` (Flink's job id or its key; every job without one), their
    agreement, and the vertices' names: Flink's table read once. `verdicts`: with the
    judge's columns (`flink_verdicts`; the judge itself does without)."""
    rows = flink_rows(lake, job)
    flink = flink_side(rows)
    pairs = conformance(flink, predicted_side(lake, sorted({row["job_key"] for row in flink})))
    if verdicts:
        pairs = judged(pairs, verdict_columns(lake, job))
    names = {
        vertex["job_vertex_id"]: vertex["job_vertex_name"]
        for row in rows
        for vertex in row["vertices"] or []
        if vertex.get("job_vertex_name")
    }
    return Comparison(pairs, agreement(pairs), names)


def flink_jobs(lake: Lake) -> list[str]:
    """The keys of every real Flink job with records: what a mistyped job is told."""
    if not lake.committed(FLINK_TABLE):
        return []
    rows = lake.rows("SELECT DISTINCT job_key FROM f ORDER BY job_key", {"f": FLINK_TABLE})
    return [row["job_key"] for row in rows]
