"""The demo's running story names a real Flink job's vertices as Flink does."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from services.contracts import Codec
from services.contracts import records as r
from services.contracts.settings import Settings
from services.tools.demo import Watcher

SOURCE, SUM = "cbc357ccb763df2852fee8c4fc7d55f2", "90bea66dc1c231edf33913ecd54406c1"


def rescale(terminal: str | None) -> Any:
    vertices = [
        {"jobVertexId": SOURCE, "jobVertexName": "Source: Numbers", "postRescaleParallelism": 2},
        {
            "jobVertexId": SUM,
            "jobVertexName": "Sum -> Discard: Writer",
            "postRescaleParallelism": 1,
        },
        {"jobVertexId": "enrich", "jobVertexName": "Enrich", "postRescaleParallelism": 1},
    ]
    record = {
        "jobId": "local.j",
        "vertices": vertices,
        "terminalState": terminal,
        "terminatedReason": "SUCCEEDED" if terminal else None,
        "triggerCause": "INITIAL_SCHEDULE",
    }
    return SimpleNamespace(schema=r.RESCALE, record=record)


def test_vertex_ids_of_a_flink_job_are_printed_as_its_vertex_names(
    codec: Codec, capsys: pytest.CaptureFixture[str]
) -> None:
    watcher = Watcher(Settings(), codec, 0.0)
    watcher.show(rescale(None))  # names learned from the first revision
    decision = {
        "jobId": "local.j",
        "items": [
            {
                "kind": "STATE_TRANSITION",
                "message": f"CreatingExecutionGraph -> Executing: running with {SOURCE}=2, {SUM}=1",
            }
        ],
    }
    watcher.slots.fold = lambda record: None  # type: ignore[method-assign]
    watcher.show(SimpleNamespace(schema=r.SCHEDULER_DECISIONS, record=decision))
    watcher.show(rescale("COMPLETED"))
    out = capsys.readouterr().out
    assert "running with Source: Numbers=2, Sum -> Discard: Writer=1" in out, out
    # a producer's job keeps its own ids: people chose them
    assert "(Source: Numbers=2, Sum -> Discard: Writer=1, enrich=1)" in out, out
