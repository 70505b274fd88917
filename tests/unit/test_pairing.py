"""When a pair of `flink compare` is settled (pairing.py): pure, no Spark, no tables."""

from __future__ import annotations

from typing import Any

import pytest

from services.history.conformance import CHILD_FIELDS
from services.history.pairing import conformance


def _side(uuid: str, **kw: Any) -> dict[str, Any]:
    return {
        "cluster": "local",
        "flink_job_id": "j1",
        "job_key": "local.j1",
        "rescale_uuid": uuid,
        "start_timestamp_ms": 1_000,
        "rescale_attempt_id": 1,
        "in_progress": False,
        "trigger_cause": "NEW_RESOURCE_AVAILABLE",
        "terminal_state": "COMPLETED",
        "terminated_reason": "SUCCEEDED",
        "pre_parallelism": [{"key": "v1", "value": 1}],
        "post_parallelism": [{"key": "v1", "value": 2}],
        "slots": [{"key": "default", "value": 2}],
        "scheduler_states": ["Executing", "Restarting", "Executing"],
        "state_durations": [10, 20, None],
    } | kw


def test_a_prediction_with_every_child_committed_is_settled() -> None:
    (pair,) = conformance([_side("f-1")], [_side("p-1")])
    assert pair["settled"] and pair["all_fields_agree"]


@pytest.mark.parametrize("missing", CHILD_FIELDS)
def test_a_prediction_missing_one_child_table_is_not_settled(missing: str) -> None:
    """The tables query commits each child table on its own: the vertices may be there
    and the slots not yet (the Flink demo once reported such a pair as a disagreement)."""
    (pair,) = conformance([_side("f-1")], [_side("p-1", **{missing: []})])
    assert not pair["settled"] and not pair[f"{missing}_agrees"]
