"""The end of `scalefold demo --flink`: Flink's records beside scalefold's predictions. Pure.

Flink's side is what its REST API's `/rescales/details` answered (the records the bridge
forwards); scalefold's side is the `rescales` rows of the predicted job. They pair by
order within the job, as `flink_conformance` pairs them (docs/flink.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import zip_longest
from typing import Any

from services.history.timeline import Bar, TimelineRow


def _slots(record: Mapping[str, Any]) -> int | None:
    """Σ postRescaleSlots over the slot-sharing groups (None if Flink shows none)."""
    counts = [s.get("postRescaleSlots") for s in (record.get("slots") or {}).values()]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _cell(trigger: Any, reason: Any, slots: Any) -> str:
    return (
        f"{trigger or '-'} -> {reason or 'in progress'} ({'?' if slots is None else slots} slots)"
    )


def side_by_side(
    flink: Sequence[Mapping[str, Any]], predicted: Sequence[Mapping[str, Any]]
) -> list[str]:
    """One line per pair: the n-th rescale Flink recorded beside scalefold's n-th."""
    width = 64
    lines = [
        f"  #  {'Flink recorded':<{width}} scalefold predicted",
        f"  -  {'-' * 14:<{width}} {'-' * 19}",
    ]
    for n, (ours, theirs) in enumerate(zip_longest(flink, predicted), start=1):
        left = (
            _cell(ours["triggerCause"], ours["terminatedReason"], _slots(ours))
            if ours
            else "(none)"
        )
        right = (
            _cell(
                theirs["trigger_cause"],
                theirs["terminated_reason"],
                theirs["total_post_rescale_slots"],
            )
            if theirs
            else "(none)"
        )
        mark = " " if left == right else "*"
        lines.append(f"{mark}{n:>2}  {left:<{width}} {right}")
    agree = sum(line.startswith(" ") for line in lines[2:])
    lines.append(
        f"  {agree} of {len(lines) - 2} pairs agree on trigger, reason and slots (* : not)"
    )
    return lines


def flink_timeline_rows(records: Sequence[Mapping[str, Any]]) -> list[TimelineRow]:
    """Flink's records as timeline chart rows: its scheduler-state spans as bars."""
    rows = []
    for record in records:
        spans = record.get("schedulerStates") or []
        last = max((s.get("leaveTimestampInMillis") or 0 for s in spans), default=0)
        bars = tuple(
            Bar(
                state=str(s["state"]),
                start_ms=int(s["enterTimestampInMillis"]),
                end_ms=int(
                    s.get("leaveTimestampInMillis") or max(last, s["enterTimestampInMillis"])
                ),
                open=s.get("leaveTimestampInMillis") is None,
            )
            for s in spans
            if s.get("enterTimestampInMillis") is not None
        )
        outcome = record.get("terminatedReason") or "IN PROGRESS"
        label = f"{record['rescaleUuid'][:8]} {record.get('triggerCause')} -> {outcome}"
        rows.append(
            TimelineRow(record["rescaleUuid"], label, int(record["startTimestampInMillis"]), bars)
        )
    return sorted(rows, key=lambda r: (r.start_ms, r.rescale_uuid))
