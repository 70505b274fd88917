"""The end of `scalefold demo --flink`: Flink's records beside the predictions, and its chart rows."""

from __future__ import annotations

from services.tools.flinkreport import flink_timeline_rows, side_by_side


def test_pairs_are_marked_where_they_differ() -> None:
    flink = [
        {
            "triggerCause": "INITIAL_SCHEDULE",
            "terminatedReason": "SUCCEEDED",
            "slots": {"g": {"postRescaleSlots": 2}},
        },
        {"triggerCause": "RECOVERABLE_FAILOVER", "terminatedReason": "SUCCEEDED", "slots": {}},
    ]
    predicted = [
        {
            "trigger_cause": "INITIAL_SCHEDULE",
            "terminated_reason": "SUCCEEDED",
            "total_post_rescale_slots": 2,
        },
    ]
    lines = side_by_side(flink, predicted)
    assert lines[2].startswith("  1") and "INITIAL_SCHEDULE -> SUCCEEDED (2 slots)" in lines[2]
    assert lines[3].startswith("* 2") and lines[3].endswith("(none)")
    assert lines[-1].startswith("  1 of 2 pairs agree")


def test_flink_records_become_chart_rows_with_their_state_spans() -> None:
    spans = [("Created", 100, 110), ("WaitingForResources", 110, 900), ("Executing", 900, None)]
    details = {
        "rescaleUuid": "afc103edd691c5267ae684fefa3ae972",
        "triggerCause": "INITIAL_SCHEDULE",
        "terminatedReason": None,
        "startTimestampInMillis": 100,
        "schedulerStates": [
            {"state": s, "enterTimestampInMillis": a, "leaveTimestampInMillis": b}
            for s, a, b in spans
        ],
    }
    (row,) = flink_timeline_rows([details])
    assert row.label == "afc103ed INITIAL_SCHEDULE -> IN PROGRESS"
    assert [(b.state, b.start_ms, b.end_ms, b.open) for b in row.bars] == [
        ("Created", 100, 110, False),
        ("WaitingForResources", 110, 900, False),
        ("Executing", 900, 900, True),
    ]
