"""The end of `scalefold demo --flink`: Flink's records beside scalefold's predictions. Pure.

Flink's side is what its REST API's `/rescales/details` answered (the records the bridge
forwards); scalefold's side is the `rescales` rows of the predicted job. They pair by
order within the job, as `flink_conformance` pairs them (docs/flink.md).

`verdict` judges the pairs `flink compare` made (services/history/pairing.py): a pair
whose prediction depends on where in its observation window an input fell is ambiguous
and judged neither way; any other pair that disagrees fails the demo. Which pairs are
ambiguous the scheduler's fold says (services/scheduler/observation.py), through
`scalefold ambiguities --format json`: the tools reach the scheduler core only through
the contracts and the command line (pyproject's import contracts).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import zip_longest
from typing import Any

from services.contracts.render import labelled
from services.history.conformance import FIELDS
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


@dataclass(frozen=True)
class Ambiguous:
    """A pair the observation cannot decide, as `scalefold ambiguities --format json`
    gives it: the pair's number and the line that says why."""

    pair_index: int
    described: str

    @classmethod
    def from_json(cls, row: Mapping[str, Any]) -> Ambiguous:
        return cls(int(row["pair_index"]), str(row["described"]))


@dataclass(frozen=True)
class Verdict:
    """The demo's last word: a line per ambiguous or disagreeing pair, then the agreement;
    `decidable_disagreements`: pairs that disagree although the observation decides them."""

    lines: tuple[str, ...]
    decidable_disagreements: int

    @property
    def status(self) -> int:
        """The demo's exit status: 1 when a decidable pair disagrees."""
        return 1 if self.decidable_disagreements else 0


def verdict(
    pairs: Sequence[Mapping[str, Any]],
    ambiguities: Sequence[Ambiguous],
    names: Mapping[str, str],
) -> Verdict:
    """Judge one job's pairs (pairing.compare's rows), pair by pair in order: an ambiguous
    pair is said so (with each input it depends on); a decidable one that disagrees names
    each field that differs (`names`: the vertices' names by id)."""
    doubtful: dict[int, list[Ambiguous]] = {}
    for ambiguity in ambiguities:
        doubtful.setdefault(ambiguity.pair_index, []).append(ambiguity)
    by_index = {int(pair["pair_index"]): pair for pair in pairs}
    lines: list[str] = []
    failed = 0
    for index in sorted(by_index.keys() | doubtful.keys()):
        if index in doubtful:
            lines += [
                f"pair {index}: ambiguous at this observation resolution: {a.described}"
                for a in doubtful[index]
            ]
            continue
        found = disagreements(by_index[index], names)
        lines += [f"pair {index} disagrees: {text}" for text in found]
        failed += bool(found)
    decidable = [pair for index, pair in by_index.items() if index not in doubtful]
    lines.append(
        f"decidable pairs: {_agreeing(decidable)} of {len(decidable)} agree; "
        f"all pairs: {_agreeing(pairs)} of {len(pairs)} "
        f"({len(by_index) - len(decidable)} ambiguous)"
    )
    return Verdict(tuple(lines), failed)


def agrees(pair: Mapping[str, Any]) -> bool:
    return pair["paired"] == "both" and all(pair[f"{name}_agrees"] for name in FIELDS)


def _agreeing(pairs: Sequence[Mapping[str, Any]]) -> int:
    return sum(1 for pair in pairs if agrees(pair))


def disagreements(pair: Mapping[str, Any], names: Mapping[str, str]) -> list[str]:
    """`<field> Flink <value> / scalefold <value>` for each field the pair disagrees in;
    a rescale only one side has is `rescale Flink ... / scalefold (none)`."""
    unsettled = "" if pair["settled"] else " (not settled yet)"
    if pair["paired"] != "both":
        flink, ours = (_rescale(pair, side) for side in ("flink", "predicted"))
        return [f"rescale Flink {flink} / scalefold {ours}{unsettled}"]
    return [
        f"{name} Flink {_shown(pair[f'flink_{name}'], names)} / "
        f"scalefold {_shown(pair[f'predicted_{name}'], names)}{unsettled}"
        for name in FIELDS
        if not pair[f"{name}_agrees"]
    ]


def _rescale(pair: Mapping[str, Any], side: str) -> str:
    if not pair[f"{side}_rescale_uuid"]:
        return "(none)"
    trigger = pair[f"{side}_trigger_cause"] or "-"
    return f"{trigger} -> {pair[f'{side}_terminated_reason'] or 'in progress'}"


def _shown(value: Any, names: Mapping[str, str]) -> str:
    """A compared value as a person reads it: `{key, value}` entries as `key=value` (a
    vertex by its name, `labelled`), a sequence of states joined by `>`."""
    if value is None:
        return "-"
    if isinstance(value, list) and value and isinstance(value[0], Mapping):
        return ", ".join(
            f"{labelled(e['key'], names.get(str(e['key'])))}={e['value']}" for e in value
        )
    if isinstance(value, list):
        return " > ".join(str(v) for v in value) or "(none)"
    return str(value)
