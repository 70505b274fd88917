"""The differential suite's comparison: Flink's rescales against scalefold's prediction.

Pure: both sides as records of the same shape (Flink's /details as the bridge forwards
it, schemas/flink_rescale.v1; the scheduler's rescale record, schemas/rescale.v2), the
latest revision of each rescale, paired by order within the job (FLINK.md: the n-th
rescale Flink recorded with the n-th the scheduler recorded, by startTimestampInMillis,
ties by rescaleAttemptId), and compared field by field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

FIELDS = ("triggerCause", "terminalState", "terminatedReason", "parallelism", "slots", "states")
"""What is compared: the cause, the end and its reason, (pre, post) parallelism per
vertex id, post-rescale slots per slot-sharing group NAME, the scheduler states' names."""


def latest(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The newest revision of each rescale, in the order the job recorded them."""
    newest: dict[str, dict[str, Any]] = {}
    for record in records:
        seen = newest.get(record["rescaleUuid"])
        if seen is None or record.get("revision", 0) >= seen.get("revision", 0):
            newest[record["rescaleUuid"]] = record
    return sorted(
        newest.values(),
        key=lambda r: (r["startTimestampInMillis"] or 0, r["rescaleAttemptId"] or 0),
    )


def view(record: dict[str, Any]) -> dict[str, Any]:
    """The compared fields of one record."""
    return {
        "triggerCause": record["triggerCause"],
        "terminalState": record["terminalState"],
        "terminatedReason": record["terminatedReason"],
        "parallelism": {
            v["jobVertexId"]: (v.get("preRescaleParallelism"), v.get("postRescaleParallelism"))
            for v in record["vertices"]
        },
        "slots": {s["slotSharingGroupName"]: s.get("postRescaleSlots") for s in record["slots"]},
        "states": [span["state"] for span in record["schedulerStates"]],
    }


def compare(
    flink: list[dict[str, Any]], predicted: list[dict[str, Any]]
) -> list[dict[str, tuple[Any, Any]]]:
    """Per pair of rescales, each field's (Flink's, predicted) value; a rescale the other
    side lacks is paired with None."""
    pairs = []
    for index in range(max(len(flink), len(predicted))):
        real = view(flink[index]) if index < len(flink) else dict.fromkeys(FIELDS)
        guess = view(predicted[index]) if index < len(predicted) else dict.fromkeys(FIELDS)
        pairs.append({name: (real[name], guess[name]) for name in FIELDS})
    return pairs


def agreement(pairs: list[dict[str, tuple[Any, Any]]]) -> dict[str, float]:
    """Per field, the share of pairs in which both sides agree (1.0 with no rescale)."""
    if not pairs:
        return dict.fromkeys(FIELDS, 1.0)
    return {name: sum(p[name][0] == p[name][1] for p in pairs) / len(pairs) for name in FIELDS}


def differences(pairs: list[dict[str, tuple[Any, Any]]]) -> list[str]:
    """One line per field that differs, `#n field: flink=... predicted=...`."""
    return [
        f"#{index} {name}: flink={real!r} predicted={guess!r}"
        for index, pair in enumerate(pairs)
        for name, (real, guess) in pair.items()
        if real != guess
    ]


EXACT = ("triggerCause", "terminalState", "terminatedReason", "states")
"""The fields the prediction must get right in every scenario measured so far."""


def unexplained(pairs: list[dict[str, tuple[Any, Any]]]) -> list[str]:
    """The differences no documented deviation explains (docs/flink-conformance.md, "Against a real
    Flink 2.3.0"): every difference in EXACT, a rescale one side lacks, and slots that
    differ in more than which group got a spare slot (the groups and their total)."""
    found = []
    for index, pair in enumerate(pairs):
        for name in EXACT:
            real, guess = pair[name]
            if real != guess:
                found.append(f"#{index} {name}: flink={real!r} predicted={guess!r}")
        real_slots, guess_slots = pair["slots"]
        if real_slots != guess_slots and not same_total(real_slots, guess_slots):
            found.append(f"#{index} slots: flink={real_slots!r} predicted={guess_slots!r}")
    return found


def same_total(real: dict[str, Any] | None, guess: dict[str, Any] | None) -> bool:
    """The same groups with the same number of slots between them."""
    if real is None or guess is None or set(real) != set(guess):
        return False
    return sum(v or 0 for v in real.values()) == sum(v or 0 for v in guess.values())
