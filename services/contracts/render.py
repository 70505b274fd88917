"""Contract records as one readable line, for every command that prints them."""

from __future__ import annotations

from typing import Any


def rescale_line(record: dict[str, Any]) -> str:
    """`#3 NEW_RESOURCE_AVAILABLE COMPLETED/SUCCEEDED src 2->4 (rev 4)`."""
    vertices = " ".join(
        f"{v['jobVertexId']} {_n(v['preRescaleParallelism'])}->{_n(v['postRescaleParallelism'])}"
        for v in record["vertices"]
    )
    ending = (
        f"{record['terminalState']}/{record['terminatedReason']}"
        if record["terminalState"]
        else "in progress"
    )
    return (
        f"{record['rescaleUuid'][:8]} attempt {record['rescaleAttemptId']} "
        f"{record['triggerCause']} {ending}: {vertices} (rev {record['revision']})"
    )


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)
