"""The verdict on a job's pairs (pairing.py): which pairs disagree although the
observation decides them, and which it cannot decide.

A pair whose prediction depends on where in its observation window an input fell is
*ambiguous at this observation resolution* and judged neither way: the scheduler's fold
says which (services/scheduler/observation.py; contracts/ambiguity.py carries its answer,
services/cli.py hands `flink compare` the question). Any other pair that disagrees is
named field by field, and fails `flink compare --strict` (the Flink demo).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from services.contracts.ambiguity import EXISTENCE, AmbiguousPair
from services.contracts.render import labelled
from services.history.conformance import DURATIONS, FIELDS


@dataclass(frozen=True)
class Verdict:
    """The last word on a job's pairs: a line per ambiguous or disagreeing pair, then the
    agreement; `decidable_disagreements`: pairs that disagree although the observation
    decides them; `ambiguous`: the numbers of the pairs it cannot decide."""

    lines: tuple[str, ...]
    decidable_disagreements: int
    ambiguous: frozenset[int] = frozenset()
    reasons: tuple[tuple[int, str], ...] = ()
    """(pair, what makes it ambiguous), a pair once per input it depends on."""
    durations: tuple[tuple[int, bool], ...] = ()
    """(pair, its spans' durations agree within `tolerance_ms`), of each decidable pair
    whose spans were compared (both sides settled, the same states)."""
    tolerance_ms: int | None = None
    """How far a span's duration may differ (None: the observation's resolution is not
    known, durations are not judged)."""

    @property
    def status(self) -> int:
        """`flink compare --strict`'s exit status (the Flink demo's): 1 when a decidable
        pair disagrees."""
        return 1 if self.decidable_disagreements else 0


INSTANT_SLACK_MS = 1_000
"""What a span of Flink's may take beyond the prediction's that the observation does not
show and the core does not model: cancelling the tasks in Restarting (until the JobMaster
releases a killed TaskManager: 0.02-1.48 s), building the graph before Executing is
entered (0.1-1.9 s); 20 demo runs at load 8.7-24.9, 2026-12-03: docs/flink-conformance.md,
"Instants". Measured beyond 1 s in a few runs, those passed within the resolution added
to it; a later release fails `--strict` (Flink's heartbeat settings bound it; unused)."""


def verdict(
    pairs: Sequence[Mapping[str, Any]],
    ambiguities: Sequence[AmbiguousPair],
    names: Mapping[str, str],
    resolution_ms: int | None = None,
) -> Verdict:
    """Judge one job's pairs (pairing.compare's rows), pair by pair in order: an ambiguous
    pair is said so (with each input it depends on); a decidable one that disagrees names
    each field that differs (`names`: the vertices' names by id); one that agrees in
    every field has each span's duration compared, within `resolution_ms` (the
    observation's: contracts/ambiguity.py `Findings`) and INSTANT_SLACK_MS; a span
    further apart (`pair N spans apart: ...`) is a disagreement too (docs/flink-conformance.md,
    "Instants")."""
    tolerance = None if resolution_ms is None else resolution_ms + INSTANT_SLACK_MS
    doubtful: dict[int, list[AmbiguousPair]] = {}
    kept = undecided(ambiguities, pairs)
    for ambiguity in [*kept, *shifted(kept, pairs), *restart_races(pairs)]:
        doubtful.setdefault(ambiguity.pair_index, []).append(ambiguity)
    by_index = {int(pair["pair_index"]): pair for pair in pairs}
    lines: list[str] = []
    durations: list[tuple[int, bool]] = []
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
        if not found and tolerance is not None and comparable(by_index[index]):
            far = apart(by_index[index], tolerance)
            durations.append((index, not far))
            lines += [f"pair {index} spans apart: {text}" for text in far]
            failed += bool(far)
    decidable = [pair for index, pair in by_index.items() if index not in doubtful]
    spans_apart = sum(not close for _, close in durations)  # pairs agreeing but in durations
    lines.append(
        f"decidable pairs: {_agreeing(decidable) - spans_apart} of {len(decidable)} agree; "
        f"all pairs: {_agreeing(pairs) - spans_apart} of {len(pairs)} "
        f"({len(by_index) - len(decidable)} ambiguous)"
    )
    reasons = tuple(
        (index, a.described)
        for index in sorted(by_index.keys() & doubtful.keys())
        for a in doubtful[index]
    )
    ambiguous = frozenset(by_index.keys() & doubtful.keys())
    return Verdict(tuple(lines), failed, ambiguous, reasons, tuple(durations), tolerance)


def undecided(
    ambiguities: Sequence[AmbiguousPair], pairs: Sequence[Mapping[str, Any]]
) -> list[AmbiguousPair]:
    """The ambiguities Flink's own records do not settle. An input's window leaves open
    which side of a deadline it fell on, and so which of two predictions is right from the
    first pair it changes on; where Flink's rescale of that pair agrees with the prediction
    in every field the other side would change, Flink took the prediction's side, and the
    input decides nothing more (its later pairs are judged as any other)."""
    by_index = {int(pair["pair_index"]): pair for pair in pairs}
    causes: dict[str, list[AmbiguousPair]] = {}
    for ambiguity in ambiguities:
        causes.setdefault(ambiguity.cause or ambiguity.described, []).append(ambiguity)
    kept: list[AmbiguousPair] = []
    for group in causes.values():
        first = min(group, key=lambda a: a.pair_index)
        pair = by_index.get(first.pair_index)
        settled = (
            pair is not None
            and pair["paired"] == "both"
            and all(pair.get(f"{name}_agrees", True) for name in first.fields)
        )
        if not settled:
            kept += group
    return kept


def shifted(
    ambiguities: Sequence[AmbiguousPair], pairs: Sequence[Mapping[str, Any]]
) -> list[AmbiguousPair]:
    """Every pair after the first whose rescale exists in one case only (an ambiguity in
    EXISTENCE) and is not ambiguous already: the pairing by start is shifted from there,
    so they pair what the other case would not (a demo's fifth Flink rescale with no
    prediction, 2026-12-03, followed from its first pair's window)."""
    first = min((a.pair_index for a in ambiguities if EXISTENCE in a.fields), default=None)
    if first is None:
        return []
    named = {a.pair_index for a in ambiguities}
    return [
        AmbiguousPair(
            str(pair["job_key"]),
            int(pair["pair_index"]),
            (),
            f"it follows pair {first}: a rescale that happens in one case only shifts "
            "the pairing from there",
        )
        for pair in sorted(pairs, key=lambda pair: int(pair["pair_index"]))
        if int(pair["pair_index"]) > first and int(pair["pair_index"]) not in named
    ]


RACE = (
    "Flink restarted on the lost TaskManager's slots before its JobMaster had released "
    "them (Restarting > CreatingExecutionGraph), where the prediction waited for resources: "
    "whether the release came before the restart delay's end is a race inside the "
    "JobManager that no REST answer shows"
)
"""Why a failover after a TaskManager loss cannot be decided when Flink restarted straight
into a new graph (docs/flink-conformance.md, "A TaskManager killed with a restart
strategy"); tests/flink/differential.py `before_straight_restarts` leaves such pairs out."""


def restart_races(pairs: Sequence[Mapping[str, Any]]) -> list[AmbiguousPair]:
    """The first failover Flink restarted straight into a new graph while the prediction
    went through WaitingForResources, and every pair after it (they follow from it)."""
    ordered = sorted(pairs, key=lambda pair: int(pair["pair_index"]))
    for at, pair in enumerate(ordered):
        flink, ours = pair.get("flink_scheduler_states"), pair.get("predicted_scheduler_states")
        if (
            pair.get("flink_trigger_cause") == "RECOVERABLE_FAILOVER"
            and _after(flink, "Restarting") == "CreatingExecutionGraph"
            and _after(ours, "Restarting") == "WaitingForResources"
        ):
            first = int(pair["pair_index"])
            return [
                AmbiguousPair(
                    str(later["job_key"]),
                    int(later["pair_index"]),
                    (),
                    RACE if later is pair else f"it follows pair {first}'s race",
                )
                for later in ordered[at:]
            ]
    return []


def _after(states: Any, state: str) -> str | None:
    """The state that followed `state`'s first span, if any."""
    names = list(states or [])
    return names[names.index(state) + 1] if state in names[:-1] else None


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
        f"{name} Flink {shown(pair[f'flink_{name}'], names)} / "
        f"scalefold {shown(pair[f'predicted_{name}'], names)}{unsettled}"
        for name in FIELDS
        if not pair[f"{name}_agrees"]
    ]


def comparable(pair: Mapping[str, Any]) -> bool:
    """Whether a pair's spans can be compared one by one: both sides settled, through
    the same states."""
    flink, ours = pair.get(f"flink_{DURATIONS}"), pair.get(f"predicted_{DURATIONS}")
    return (
        pair["paired"] == "both"
        and pair["settled"]
        and pair["scheduler_states_agrees"]
        and flink is not None
        and ours is not None
        and len(flink) == len(ours)
    )


def apart(pair: Mapping[str, Any], tolerance_ms: int) -> list[str]:
    """`state_durations Flink ... / scalefold ...` when a span of a comparable pair lasted
    more than `tolerance_ms` longer or shorter on one side (a span open on either side
    is not compared)."""
    states = pair["flink_scheduler_states"]
    flink, ours = pair[f"flink_{DURATIONS}"], pair[f"predicted_{DURATIONS}"]
    far = [
        i
        for i, (a, b) in enumerate(zip(flink, ours, strict=True))
        if a is not None and b is not None and abs(a - b) > tolerance_ms
    ]
    if not far:
        return []

    def spans(durations: Sequence[int | None]) -> str:
        return ", ".join(f"{states[i]} {_seconds(durations[i])}" for i in far)

    return [
        f"{DURATIONS} Flink {spans(flink)} / scalefold {spans(ours)} "
        f"(more than the {tolerance_ms / 1000:.1f} s the observation allows)"
    ]


def _seconds(ms: int | None) -> str:
    return "-" if ms is None else f"{ms / 1000:.3f} s"


def _rescale(pair: Mapping[str, Any], side: str) -> str:
    if not pair[f"{side}_rescale_uuid"]:
        return "(none)"
    trigger = pair[f"{side}_trigger_cause"] or "-"
    return f"{trigger} -> {pair[f'{side}_terminated_reason'] or 'in progress'}"


def shown(value: Any, names: Mapping[str, str]) -> str:
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
