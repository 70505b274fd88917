"""Flink's rescale records (FLIP-495, as FLIP-487's REST shows them) into FlinkRescale records.

Pure. `/jobs/:jid/rescales/history` lists a job's rescales without their vertices,
slots and states; `/rescales/details/:uuid` gives one in full. `wanted` says which
details to fetch (new rescales, and those still in progress: they change), `record`
builds the Avro datum of one revision. Fields a newer Flink adds are kept in
`unknownFields` by JSON path; the enum-like fields are open strings, so an unknown
value passes as it is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any

from services.bridge.translate import MalformedAnswerError, field
from services.contracts import rescalefields as fields

_TOP = frozenset(
    {
        "rescaleUuid",
        "resourceRequirementsUuid",
        "rescaleAttemptId",
        "vertices",
        "slots",
        "schedulerStates",
        "startTimestampInMillis",
        "endTimestampInMillis",
        "triggerCause",
        "terminalState",
        "terminatedReason",
    }
)
_VERTEX = tuple(fields.VERTEX)
_SLOTS = (*fields.SLOTS, *fields.PROFILES)
_PROFILE = tuple(fields.PROFILE)
_STATE_ALL = tuple(fields.SPAN)
_STATE = _STATE_ALL[:4]
"""A span's fields but its exception (a string where these are numbers)."""


def digest(answer: Any) -> str:
    """A stable fingerprint of an answer's content: a changed rescale has another."""
    text = json.dumps(answer, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def summaries(history: Any) -> list[Mapping[str, Any]]:
    """/rescales/history's entries, oldest first (by start, then attempt id)."""
    if not isinstance(history, list):
        raise MalformedAnswerError(
            f"rescales/history: expected a list, got {type(history).__name__}"
        )
    for i, entry in enumerate(history):
        field(entry, "rescaleUuid", str, f"rescales/history[{i}]")
    return sorted(
        history,
        key=lambda e: (
            _int_or(e.get("startTimestampInMillis"), 0),
            _int_or(e.get("rescaleAttemptId"), 0),
            e["rescaleUuid"],
        ),
    )


def _int_or(value: Any, default: int) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def in_progress(entry: Mapping[str, Any]) -> bool:
    return entry.get("terminalState") is None or entry.get("endTimestampInMillis") is None


def wanted(history: Sequence[Mapping[str, Any]], finished: frozenset[str]) -> list[str]:
    """The uuids whose details to fetch: every one not yet sent in its final form."""
    return [e["rescaleUuid"] for e in history if e["rescaleUuid"] not in finished]


def record(
    cluster: str,
    job_id: str,
    job_name: str | None,
    details: Any,
    *,
    revision: int,
    observed_at: int,
) -> dict[str, Any]:
    """The FlinkRescale datum of one revision of `details` (a /rescales/details answer)."""
    where = "rescales/details"
    uuid = field(details, "rescaleUuid", str, where)
    vertices = field(details, "vertices", (dict, type(None)), where) or {}
    slots = field(details, "slots", (dict, type(None)), where) or {}
    states = field(details, "schedulerStates", (list, type(None)), where) or []
    unknown = {f"$.{name}": _json(v) for name, v in details.items() if name not in _TOP}
    return {
        "cluster": cluster,
        "jobId": job_id,
        "jobName": job_name,
        "rescaleUuid": uuid,
        "resourceRequirementsUuid": _opt(details, "resourceRequirementsUuid", str, where),
        "rescaleAttemptId": _opt(details, "rescaleAttemptId", int, where),
        "vertices": [_vertex(key, vertices[key], unknown) for key in sorted(vertices, key=str)],
        "slots": [_slots(key, slots[key], unknown) for key in sorted(slots, key=str)],
        "schedulerStates": [_state(i, s, unknown) for i, s in enumerate(states)],
        "startTimestampInMillis": _opt(details, "startTimestampInMillis", int, where),
        "endTimestampInMillis": _opt(details, "endTimestampInMillis", int, where),
        "triggerCause": _opt(details, "triggerCause", str, where),
        "terminalState": _opt(details, "terminalState", str, where),
        "terminatedReason": _opt(details, "terminatedReason", str, where),
        "revision": revision,
        "observedAtMillis": observed_at,
        "unknownFields": unknown,
    }


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _opt(data: Mapping[str, Any], name: str, kind: type, where: str) -> Any:
    return field(data, name, (kind, type(None)), where)


def _extra(
    data: Mapping[str, Any], known: Sequence[str], path: str, unknown: dict[str, str]
) -> None:
    for name, value in data.items():
        if name not in known:
            unknown[f"{path}.{name}"] = _json(value)


def _vertex(key: str, entry: Any, unknown: dict[str, str]) -> dict[str, Any]:
    where = f"rescales/details.vertices.{key}"
    out: dict[str, Any] = {"jobVertexId": field(entry, "jobVertexId", str, where)}
    for name in _VERTEX[1:4]:
        out[name] = _opt(entry, name, str, where)
    for name in _VERTEX[4:]:
        out[name] = _opt(entry, name, int, where)
    _extra(entry, _VERTEX, f"$.vertices.{key}", unknown)
    return out


def _slots(key: str, entry: Any, unknown: dict[str, str]) -> dict[str, Any]:
    where = f"rescales/details.slots.{key}"
    out: dict[str, Any] = {
        "slotSharingGroupId": field(entry, "slotSharingGroupId", str, where),
        "slotSharingGroupName": _opt(entry, "slotSharingGroupName", str, where),
    }
    for name in ("desiredSlots", "minimalRequiredSlots", "preRescaleSlots", "postRescaleSlots"):
        out[name] = _opt(entry, name, int, where)
    for name in ("requestResourceProfile", "acquiredResourceProfile"):
        out[name] = _profile(entry.get(name), f"$.slots.{key}.{name}", unknown)
    _extra(entry, _SLOTS, f"$.slots.{key}", unknown)
    return out


def _profile(entry: Any, path: str, unknown: dict[str, str]) -> dict[str, Any] | None:
    if entry is None:
        return None
    where = path[2:]
    out: dict[str, Any] = {"cpuCores": _opt_number(entry, "cpuCores", where)}
    for name in _PROFILE[1:]:
        out[name] = _opt(entry, name, int, where)
    extended = field(entry, "extendedResources", (dict, type(None)), where) or {}
    out["extendedResources"] = {str(n): _number(v, f"{where}.{n}") for n, v in extended.items()}
    _extra(entry, (*_PROFILE, "extendedResources"), path, unknown)
    return out


def _opt_number(entry: Any, name: str, where: str) -> float | None:
    value = field(entry, name, (int, float, type(None)), where)
    return None if value is None else float(value)


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise MalformedAnswerError(f"{where}: expected a number, got {value!r:.40}")
    return float(value)


def _state(index: int, entry: Any, unknown: dict[str, str]) -> dict[str, Any]:
    where = f"rescales/details.schedulerStates[{index}]"
    out: dict[str, Any] = {"state": field(entry, "state", str, where)}
    for name in _STATE[1:]:
        out[name] = _opt(entry, name, int, where)
    out["stringifiedException"] = _opt(entry, "stringifiedException", str, where)
    _extra(entry, _STATE_ALL, f"$.schedulerStates[{index}]", unknown)
    return out
