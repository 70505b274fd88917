"""The differential suite's comparison itself (pure, no cluster): pairing by order,
latest revisions, field by field."""

from __future__ import annotations

import json
from typing import Any

from tests.flink.differential import (
    agreement,
    before_losses,
    compare,
    differences,
    duplicates,
    expected_row,
    latest,
    row_view,
    unexplained,
    unseen_losses,
)


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


def test_flinks_details_become_the_row_of_flink_rescales_under_the_views_names() -> None:
    from pathlib import Path

    answers = Path(__file__).parents[1] / "unit" / "bridge" / "answers"
    uuid = "afc103edd691c5267ae684fefa3ae972"
    details = json.loads((answers / f"rescales-details-{uuid}.json").read_text())
    row = expected_row("d", "j1", "scalefold-sample", details)
    assert (row["rescale_uuid"], row["trigger_cause"], row["job_name"]) == (
        uuid,
        details["triggerCause"],
        "scalefold-sample",
    )
    assert [v["job_vertex_id"] for v in row["vertices"]] == sorted(details["vertices"])
    default = next(s for s in row["slots"] if s["slot_sharing_group_name"] == "default")
    assert (default["request_cpu_cores"], default["acquired_task_heap_memory_mb"]) == (-1.0, 316)
    assert [s["state"] for s in row["scheduler_states"]] == [
        s["state"] for s in details["schedulerStates"]
    ]
    assert row_view({**row, "kafka_offset": 7}) == row
    assert duplicates(
        [{"rescale_uuid": "a", "revision": 1}, {"rescale_uuid": "a", "revision": 2}]
        + [{"rescale_uuid": "b", "revision": 1}] * 2
    ) == [("b", 1)]


LOG = """\
2026-11-29 11:19:30,171 INFO  org.apache.flink.runtime.dispatcher.StandaloneDispatcher [] - Received JobGraph submission 'scalefold-sample' (j1).
2026-11-29 11:19:40,000 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Disconnect TaskExecutor tm-3 because: Heartbeat of TaskManager with id tm-3 timed out.
2026-11-29 11:19:41,000 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Disconnect TaskExecutor tm-4 because: TaskManager with id tm-4 is no longer reachable.
2026-11-29 11:19:42,000 INFO  org.apache.flink.runtime.jobmaster.JobMaster [] - Disconnect TaskExecutor tm-5 because: The TaskExecutor is shutting down.
"""


def test_a_taskmanager_lost_unseen_explains_what_follows_it_only() -> None:
    import time

    losses = unseen_losses(LOG, "j1", killed=["tm-4"])
    at = round(time.mktime(time.strptime("2026-11-29 11:19:40", "%Y-%m-%d %H:%M:%S")) * 1000)
    assert losses == [(at, "tm-3")]
    assert unseen_losses(LOG, "other") == []
    flink = [
        {**rescale("a", at - 9000, "INITIAL_SCHEDULE", 1), "endTimestampInMillis": at - 8000},
        {**rescale("b", at - 100, "UPDATE_REQUIREMENT", 2), "endTimestampInMillis": at + 900},
    ]
    pairs = compare(flink, [rescale("x", at - 9000, "INITIAL_SCHEDULE", 1)])
    assert before_losses(flink, pairs, losses) == pairs[:1]
    assert before_losses(flink, pairs, []) == pairs
