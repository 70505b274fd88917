"""Contract records as one readable line, for every command that prints them."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

EPOCH_FLOOR_MS = 946_684_800_000
"""2000-01-01T00:00:00Z. A smaller time is an offset: the example logs count from 0."""


def instant(ms: int) -> str:
    """A record's time for people: ISO-8601 in UTC to the millisecond
    (`2026-11-23T17:19:36.123Z`), or, for a log that counts from 0, the offset
    `+12.345s`."""
    if ms >= EPOCH_FLOOR_MS:
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return f"+{ms / 1000:.3f}s"


FLINK_ID = re.compile(r"[0-9a-f]{32}")
"""Flink's ids (JobVertexID, JobID): 16 bytes in hex."""


def rescale_line(record: dict[str, Any]) -> str:
    """`#3 NEW_RESOURCE_AVAILABLE COMPLETED/SUCCEEDED src 2->4 (rev 4)`."""
    vertices = " ".join(
        f"{vertex_label(v)} {_n(v['preRescaleParallelism'])}->{_n(v['postRescaleParallelism'])}"
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


def vertex_label(vertex: dict[str, Any]) -> str:
    """A record's vertex (`jobVertexId`, `jobVertexName`) as a person reads it (`labelled`)."""
    return labelled(vertex["jobVertexId"], vertex.get("jobVertexName"))


def labelled(vertex_id: Any, name: Any) -> str:
    """A vertex as a person reads it: its id, unless that is a Flink JobVertexID (32 hex
    digits, what the bridge's jobs carry), then its name, where it has one."""
    vid = str(vertex_id)
    return str(name) if name and FLINK_ID.fullmatch(vid) else vid


def _n(value: int | None) -> str:
    return "?" if value is None else str(value)
