"""Effects as JSON objects (replay's output, the decisions topic) and as readable text."""

from __future__ import annotations

import json
from typing import Any

from services.contracts.render import instant, rescale_line
from services.scheduler.core.effects import (
    Decision,
    Effect,
    Rejected,
    RescaleUpdated,
    RuntimeRequest,
)


def effect_json(effect: Effect) -> dict[str, Any]:
    """One effect as a JSON object; keys sorted when dumped, so output is byte-stable."""
    base: dict[str, Any] = {"at": effect.at, "job": effect.job_id, "seq": effect.sequence}
    if isinstance(effect, Decision):
        return {
            **base,
            "effect": "decision",
            "kind": str(effect.kind),
            "state": effect.state,
            "phase": effect.phase,
            "message": effect.message,
            "details": dict(effect.details),
            "jobStatus": None if effect.job_status is None else str(effect.job_status),
        }
    if isinstance(effect, RuntimeRequest):
        return {
            **base,
            "effect": "request",
            "kind": str(effect.kind),
            "state": effect.state,
            "executionGraphId": effect.execution_graph_id,
            "details": dict(effect.details),
        }
    if isinstance(effect, RescaleUpdated):
        return {**base, "effect": "rescale", "record": effect.record}
    return {**base, "effect": "rejected", "kind": str(effect.kind), "message": effect.message}


def dumps(effect: Effect) -> str:
    return json.dumps(effect_json(effect), sort_keys=True, separators=(",", ":"))


def seconds(ms: int) -> str:
    """An effect's time: ISO-8601 (UTC) for epoch times, `+s.mmm s` offsets for logs from 0."""
    return f"{instant(ms):>10}"


def text(effect: Effect) -> str:
    """A one-line human rendering: time, job, where, what."""
    head = f"{seconds(effect.at)}  {effect.job_id:<12}"
    if isinstance(effect, Decision):
        where = effect.state + (f"/{effect.phase}" if effect.phase else "")
        if effect.job_status is not None and effect.job_status.ends_the_job:
            where += f" [{effect.job_status}]"  # how the job ended, typed
        return f"{head} {where:<36} {effect.kind:<20} {effect.message}"
    if isinstance(effect, RuntimeRequest):
        details = " ".join(f"{k}={v}" for k, v in effect.details)
        return (
            f"{head} {'runtime':<36} {effect.kind:<20} {effect.execution_graph_id or ''} {details}"
        )
    if isinstance(effect, RescaleUpdated):
        return f"{head} {'rescale':<36} {'RECORD':<20} {rescale_line(effect.record)}"
    assert isinstance(effect, Rejected)
    return f"{head} {'dead letter':<36} {effect.kind:<20} {effect.message}"
