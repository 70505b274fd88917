"""The differential suite's comparison itself (pure, no cluster): pairing by order,
latest revisions, field by field."""

from __future__ import annotations

from typing import Any

from tests.flink.differential import agreement, compare, differences, latest, unexplained


def rescale(uuid: str, start: int, cause: str, post: int, revision: int = 1) -> dict[str, Any]:
    return {
        "rescaleUuid": uuid,
        "revision": revision,
        "rescaleAttemptId": 1,
        "startTimestampInMillis": start,
        "triggerCause": cause,
        "terminalState": "COMPLETED",
        "terminatedReason": "SUCCEEDED",
        "vertices": [
            {"jobVertexId": "v1", "preRescaleParallelism": 1, "postRescaleParallelism": post}
        ],
        "slots": [{"slotSharingGroupName": "default", "postRescaleSlots": post}],
        "schedulerStates": [{"state": "Executing"}, {"state": "Restarting"}],
    }


def test_the_latest_revision_of_each_rescale_in_the_order_they_started() -> None:
    records = [
        rescale("b", 20, "NEW_RESOURCE_AVAILABLE", 2),
        rescale("a", 10, "INITIAL_SCHEDULE", 1, revision=1),
        rescale("a", 10, "INITIAL_SCHEDULE", 3, revision=2),
    ]
    assert [(r["rescaleUuid"], r["revision"]) for r in latest(records)] == [("a", 2), ("b", 1)]


def test_pairs_agree_field_by_field_and_a_missing_rescale_agrees_in_nothing() -> None:
    flink = [rescale("a", 10, "INITIAL_SCHEDULE", 1), rescale("b", 20, "NEW_RESOURCE_AVAILABLE", 2)]
    predicted = [rescale("x", 11, "INITIAL_SCHEDULE", 1)]
    pairs = compare(flink, predicted)
    assert agreement(pairs) == dict.fromkeys(
        ("triggerCause", "terminalState", "terminatedReason", "parallelism", "slots", "states"),
        0.5,
    )
    assert differences(pairs)[0] == "#1 triggerCause: flink='NEW_RESOURCE_AVAILABLE' predicted=None"
    assert agreement(compare([], []))["slots"] == 1.0
    wrong = compare(flink[:1], [rescale("x", 11, "INITIAL_SCHEDULE", 2)])
    assert differences(wrong) == [
        "#0 parallelism: flink={'v1': (1, 1)} predicted={'v1': (1, 2)}",
        "#0 slots: flink={'default': 1} predicted={'default': 2}",
    ]


def test_only_which_group_gets_a_spare_slot_is_an_explained_difference() -> None:
    flink = rescale("a", 10, "NEW_RESOURCE_AVAILABLE", 2)
    flink["slots"] = [
        {"slotSharingGroupName": "default", "postRescaleSlots": 2},
        {"slotSharingGroupName": "sums", "postRescaleSlots": 1},
    ]
    swapped = {
        **flink,
        "slots": [
            {**flink["slots"][0], "postRescaleSlots": 1},
            {**flink["slots"][1], "postRescaleSlots": 2},
        ],
    }
    assert unexplained(compare([flink], [swapped])) == []
    more = {**flink, "slots": [{**flink["slots"][0], "postRescaleSlots": 3}, flink["slots"][1]]}
    assert unexplained(compare([flink], [more])) == [
        "#0 slots: flink={'default': 2, 'sums': 1} predicted={'default': 3, 'sums': 1}"
    ]
    other_cause = {**flink, "triggerCause": "UPDATE_REQUIREMENT"}
    assert unexplained(compare([flink], [other_cause]))[0].startswith("#0 triggerCause")
    assert len(unexplained(compare([flink], []))) == 5  # four exact fields and the slots
