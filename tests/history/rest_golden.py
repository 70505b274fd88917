"""A real Flink 2.3.0's captured rescale answers (flink-2.3.0/) as scalefold records and rows.

`records()` gives, for each captured `/details` answer, the scalefold rescale record
(Avro datum of rescale.v2) that holds the same facts, with the job's captured
`/config` as its `schedulerSettings`; `rows()` the table rows the history derives from
them. What a scalefold record cannot hold is listed in `UNEQUAL` (docs/rest-api.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from services.contracts import jobconfig as keys

ANSWERS = Path(__file__).resolve().parent / "flink-2.3.0"
JOB_ID = "cc408c8079b82a80a401c5ac85881e95"
UUIDS = ("afc103edd691c5267ae684fefa3ae972", "f92913c3d29ca43b741b9115e1b16e4a")

UNEQUAL = {
    ("config", "slotIdleTimeoutInMillis"): "scalefold's scheduler has no slot idle timeout; "
    "its records' schedulerSettings do not hold slot.idle.timeout, so it is null",
}
"""(endpoint, field) -> why scalefold's answer differs from Flink's."""


def answer(name: str) -> Any:
    return json.loads((ANSWERS / f"rescales-{name}.json").read_text())


def settings() -> dict[str, str]:
    config = answer("config")
    mode = config["schedulerExecutionMode"]
    return {
        keys.SCHEDULER_MODE: "" if mode is None else mode,
        keys.COOLDOWN: str(config["executingCooldownTimeoutInMillis"]),
        keys.EXECUTING_STABILIZATION: str(config["executingResourceStabilizationTimeoutInMillis"]),
        keys.WAIT_TIMEOUT: str(config["submissionResourceWaitTimeoutInMillis"]),
        keys.SUBMISSION_STABILIZATION: str(
            config["submissionResourceStabilizationTimeoutInMillis"]
        ),
        keys.MAX_CHECKPOINT_FAILURES: str(config["rescaleOnFailedCheckpointCount"]),
        keys.MAX_DELAY: str(config["maximumDelayForTriggeringRescaleInMillis"]),
        keys.HISTORY_SIZE: str(config["rescaleHistoryMax"]),
    }


def _profile(flink: dict[str, Any]) -> dict[str, Any] | None:
    if flink["cpuCores"] == -1.0:  # ResourceProfile.UNKNOWN
        return None
    return {
        "cpuCores": flink["cpuCores"],
        "taskHeapMemoryMb": flink["taskHeapMemory"],
        "taskOffHeapMemoryMb": flink["taskOffHeapMemory"],
        "managedMemoryMb": flink["managedMemory"],
        "networkMemoryMb": flink["networkMemory"],
    }


def record(details: dict[str, Any], job_id: str = JOB_ID) -> dict[str, Any]:
    """The scalefold rescale record that holds what one `/details` answer shows."""
    slots = [
        {
            **{k: s[k] for k in ("slotSharingGroupId", "slotSharingGroupName", "desiredSlots")},
            **{k: s[k] for k in ("minimalRequiredSlots", "preRescaleSlots", "postRescaleSlots")},
            "requestResourceProfile": _profile(s["requestResourceProfile"]),
            "acquiredResourceProfile": _profile(s["acquiredResourceProfile"]),
        }
        for s in details["slots"].values()
    ]
    return {
        "jobId": job_id,
        **{k: details[k] for k in ("rescaleUuid", "resourceRequirementsUuid", "rescaleAttemptId")},
        "vertices": list(details["vertices"].values()),
        "slots": slots,
        "schedulerStates": details["schedulerStates"],
        **{k: details[k] for k in ("startTimestampInMillis", "endTimestampInMillis")},
        **{k: details[k] for k in ("triggerCause", "terminalState", "terminatedReason")},
        "revision": 1,
        "updatedAtMillis": details["endTimestampInMillis"] or details["startTimestampInMillis"],
        "transitionPhases": [],
        "availableSlots": None,
        "reactiveMode": False,
        "schedulerSettings": settings(),
        "statusMessage": None,
    }


def records() -> list[dict[str, Any]]:
    return [record(answer(f"details-{uuid}")) for uuid in UUIDS]


def latest_row(rec: dict[str, Any]) -> dict[str, Any]:
    """The `rescales_latest` columns the REST API reads, as tables.py derives them."""
    end, start = rec["endTimestampInMillis"], rec["startTimestampInMillis"]
    return {
        "job_id": rec["jobId"],
        "rescale_uuid": rec["rescaleUuid"],
        "resource_requirements_uuid": rec["resourceRequirementsUuid"],
        "rescale_attempt_id": rec["rescaleAttemptId"],
        "trigger_cause": rec["triggerCause"],
        "terminal_state": rec["terminalState"],
        "terminated_reason": rec["terminatedReason"],
        "start_timestamp_ms": start,
        "end_timestamp_ms": end,
        "duration_ms": None if end is None else end - start,
        "scheduler_settings": list(rec["schedulerSettings"].items()),
    }


def child_rows(rec: dict[str, Any]) -> tuple[list[dict[str, Any]], ...]:
    """(vertices, slots, states) rows, as tables.py explodes them."""
    vertices = [
        {"vertex_index": i, **{_snake(k): v for k, v in vertex.items()}}
        for i, vertex in enumerate(rec["vertices"])
    ]
    slots = []
    for i, group in enumerate(rec["slots"]):
        row: dict[str, Any] = {"slot_index": i}
        for k, v in group.items():
            if k.endswith("ResourceProfile"):
                prefix = k.removesuffix("ResourceProfile")
                for field, value in (v or {}).items():
                    row[f"{prefix}_{_snake(field)}"] = value
            else:
                row[_snake(k)] = v
        slots.append(row)
    states = [
        {
            "span_index": i,
            "state": s["state"],
            "enter_timestamp_ms": s["enterTimestampInMillis"],
            "leave_timestamp_ms": s["leaveTimestampInMillis"],
            "duration_ms": s["durationInMillis"],
            "stringified_exception": s["stringifiedException"],
        }
        for i, s in enumerate(rec["schedulerStates"])
    ]
    return vertices, slots, states


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
