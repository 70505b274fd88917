"""A real Flink's rescales beside scalefold's predictions of them, for the web page.

The pairing rule of `conformance.py` (the `flink_conformance` view), here on the rows
the page already holds: the n-th rescale Flink recorded for job J (by start, then
attempt id, then uuid) beside the n-th rescale scalefold predicted for
`<cluster>.<J>`. `pairs` is pure; `section` renders the pairs as a table with each
disagreeing field marked.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from itertools import zip_longest
from typing import Any

from services.contracts.render import labelled
from services.history.restapi.store import Row

SHOWN_PAIRS = 50
FIELDS = ("trigger_cause", "terminal_state", "terminated_reason", "post_parallelism", "states")


def _order(rows: Sequence[Row]) -> list[Row]:
    return sorted(
        rows,
        key=lambda r: (r["start_timestamp_ms"], r["rescale_attempt_id"] or 0, r["rescale_uuid"]),
    )


def facts(row: Row | None, kids: Mapping[str, Sequence[Row]] | None) -> dict[str, Any]:
    """What is compared of one side of a pair (None: that side has no such rescale)."""
    if row is None or kids is None:
        return dict.fromkeys(FIELDS)
    post = {
        labelled(v["job_vertex_id"], v.get("job_vertex_name")): v["post_rescale_parallelism"]
        for v in kids["vertices"]
    }
    spans = sorted(kids["states"], key=lambda s: s["span_index"])
    return {
        "trigger_cause": row["trigger_cause"],
        "terminal_state": row["terminal_state"],
        "terminated_reason": row["terminated_reason"],
        "post_parallelism": ", ".join(f"{k}={v}" for k, v in sorted(post.items())),
        "states": " > ".join(s["state"] for s in spans),
    }


def pairs(
    flink: Sequence[Row], predicted: Sequence[Row]
) -> list[tuple[int, Row | None, Row | None]]:
    """(n, Flink's n-th rescale, scalefold's n-th prediction), 1-based, either may be None."""
    matched = zip_longest(_order(flink), _order(predicted))
    return [(n, f, p) for n, (f, p) in enumerate(matched, start=1)]


def _counterpart(
    history: Any, name: str, job_id: str, rows: Sequence[Row]
) -> tuple[list[Row], list[Row], str, str] | None:
    """(Flink's rows, predicted rows, Flink job id, prediction job id), if the job has both."""
    flink_source, scalefold_source = history.sources.get("flink"), history.sources.get("scalefold")
    if flink_source is None or scalefold_source is None:
        return None
    if name == "flink":
        key = rows[0].get("job_key") or ""
        predicted = scalefold_source.jobs().rows(key)
        return (list(rows), predicted, job_id, key) if predicted else None
    cluster, _, flink_id = job_id.partition(".")
    found = flink_source.jobs().rows(flink_id) if flink_id else None
    mine = [r for r in found or [] if r.get("cluster") == cluster]
    return (mine, list(rows), flink_id, job_id) if mine else None


def section(history: Any, name: str, job_id: str, rows: Sequence[Row]) -> str:
    """The comparison table for a job a real Flink ran and scalefold predicted; else ""."""
    found = _counterpart(history, name, job_id, rows)
    if found is None:
        return ""
    flink_rows, predicted_rows, flink_id, key = found
    paired = pairs(flink_rows, predicted_rows)[-SHOWN_PAIRS:]
    kinds = ("vertices", "states")
    flink_kids = history.sources["flink"].details([f for _, f, _ in paired if f], kinds)
    predicted_kids = history.sources["scalefold"].details([p for _, _, p in paired if p], kinds)
    judged = history.sources["flink"].verdicts(key)
    lines, disagreements, ambiguous = [], 0, 0
    for n, f, p in paired:
        left = facts(f, flink_kids.get(f["rescale_uuid"]) if f else None)
        right = facts(p, predicted_kids.get(p["rescale_uuid"]) if p else None)
        verdict = judged.get(n) or {}
        doubtful = bool(verdict.get("ambiguous"))
        ambiguous += doubtful
        cells = [str(n)]
        for name_ in FIELDS:
            same = left[name_] == right[name_]
            disagreements += not same and not doubtful
            css = "agrees" if same else "ambiguous" if doubtful else "disagrees"
            cells.append(
                f'<span class="{css}">{html.escape(str(left[name_]))}<br>'
                f"{html.escape(str(right[name_]))}</span>"
            )
        why = verdict.get("ambiguity") if doubtful else None
        cells.append(f"ambiguous: {html.escape(why)}" if why else "")
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    head = "".join(f"<th>{h}</th>" for h in ("#", *FIELDS, "observation"))
    undecided = (
        f" {ambiguous} pairs the observation cannot decide are greyed, with the input "
        "and the deadline that make them so."
        if ambiguous
        else ""
    )
    return (
        f"<h2>Flink's records beside scalefold's predictions</h2>"
        f"<p>Flink job {html.escape(flink_id)}, predicted as {html.escape(key)}: each cell is "
        f"Flink's value over the prediction; {disagreements} disagreeing fields of decidable "
        f"pairs are marked.{undecided}</p>"
        f'<table class="compare"><thead><tr>{head}</tr></thead><tbody>{"".join(lines)}</tbody></table>'
    )


def agreement(history: Any, flink_id: str, rows: Sequence[Row]) -> tuple[int, int, int] | None:
    """(decidable pairs equal in every field above, decidable settled pairs, settled pairs
    the observation cannot decide) of a Flink job and its prediction (`rows`: Flink's of
    the job); None when scalefold has no prediction of it."""
    found = _counterpart(history, "flink", flink_id, rows)
    if found is None:
        return None
    flink_rows, predicted_rows, _, key = found
    judged = history.sources["flink"].verdicts(key)
    settled = [
        (n, f, p)
        for n, f, p in pairs(flink_rows, predicted_rows)
        if not (f and f["terminal_state"] is None) and not (p and p["terminal_state"] is None)
    ]
    ambiguous = sum(1 for n, _, _ in settled if (judged.get(n) or {}).get("ambiguous"))
    paired = [(f, p) for n, f, p in settled if not (judged.get(n) or {}).get("ambiguous")]
    kinds = ("vertices", "states")
    flink_kids = history.sources["flink"].details([f for f, _ in paired if f], kinds)
    predicted_kids = history.sources["scalefold"].details([p for _, p in paired if p], kinds)
    # settled as flink_conformance says: a prediction's vertices committed (they come later)
    paired = [
        (f, p)
        for f, p in paired
        if p is None or (predicted_kids.get(p["rescale_uuid"]) or {}).get("vertices")
    ]
    agreed = sum(
        1
        for f, p in paired
        if f
        and p
        and facts(f, flink_kids.get(f["rescale_uuid"]))
        == facts(p, predicted_kids.get(p["rescale_uuid"]))
    )
    return agreed, len(paired), ambiguous
