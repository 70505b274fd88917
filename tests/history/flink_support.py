"""Records of the history's Flink tests: a real Flink 2.3.0's /rescales/details answers (captured
in tests/history/flink-answers/) as `FlinkRescale` records, and scalefold rescale records
predicting the same job under `flink_job_key`."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from services.contracts import Codec
from services.contracts import records as r
from services.contracts.topics import flink_job_key

ANSWERS = Path(__file__).parent / "flink-answers"
JOB_ID = "cc408c8079b82a80a401c5ac85881e95"
"""The Flink job the captured answers are of."""
INITIAL = "afc103edd691c5267ae684fefa3ae972"
"""Its first rescale (INITIAL_SCHEDULE), then NEW_RESOURCE_AVAILABLE."""
RESCALED = "f92913c3d29ca43b741b9115e1b16e4a"
_PROFILE = ("cpuCores", "taskHeapMemory", "taskOffHeapMemory", "managedMemory", "networkMemory")


def details(rescale_uuid: str) -> dict[str, Any]:
    """Flink's /jobs/:jobid/rescales/details/:rescaleuuid answer, as captured."""
    path = ANSWERS / f"rescales-details-{rescale_uuid}.json"
    answer: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return answer


def _profile(profile: dict[str, Any] | None) -> dict[str, Any] | None:
    if profile is None:
        return None
    kept = {name: profile.get(name) for name in _PROFILE}
    return {**kept, "extendedResources": dict(profile.get("extendedResources") or {})}


def flink_record(
    answer: dict[str, Any], cluster: str, job_id: str, revision: int, observed_at: int
) -> dict[str, Any]:
    """A /details answer as the bridge forwards it: arrays sorted by id, + its identity."""
    vertices = sorted(answer["vertices"].values(), key=lambda v: v["jobVertexId"])
    slots = [
        {
            **{k: v for k, v in group.items() if not k.endswith("ResourceProfile")},
            "requestResourceProfile": _profile(group.get("requestResourceProfile")),
            "acquiredResourceProfile": _profile(group.get("acquiredResourceProfile")),
        }
        for group in sorted(answer["slots"].values(), key=lambda s: s["slotSharingGroupId"])
    ]
    fields = (
        "rescaleUuid",
        "resourceRequirementsUuid",
        "rescaleAttemptId",
        "schedulerStates",
        "startTimestampInMillis",
        "endTimestampInMillis",
        "triggerCause",
        "terminalState",
        "terminatedReason",
    )
    return {
        "cluster": cluster,
        "jobId": job_id,
        "jobName": "scalefold-sample",
        **{name: copy.deepcopy(answer.get(name)) for name in fields},
        "vertices": vertices,
        "slots": slots,
        "revision": revision,
        "observedAtMillis": observed_at,
        "unknownFields": {},
    }


def encoded_flink(codec: Codec, records: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
    """(key, value) messages on flink-rescales, keyed by `flink_job_key` as the bridge does."""
    return [
        (
            flink_job_key(rec["cluster"], rec["jobId"]).encode(),
            codec.encode(r.FLINK_RESCALE, rec),
        )
        for rec in records
    ]


def prediction(record: dict[str, Any], job_key: str, uuid: str) -> dict[str, Any]:
    """A scalefold rescale record (v2) that predicts Flink's `record` exactly, under `job_key`."""
    return {
        "jobId": job_key,
        "rescaleUuid": uuid,
        "resourceRequirementsUuid": record["resourceRequirementsUuid"] or "",
        "rescaleAttemptId": record["rescaleAttemptId"] or 0,
        "vertices": [dict(v) for v in record["vertices"]],
        "slots": [
            {
                **{k: v for k, v in group.items() if not k.endswith("ResourceProfile")},
                "requestResourceProfile": None,
                "acquiredResourceProfile": None,
            }
            for group in record["slots"]
        ],
        "schedulerStates": copy.deepcopy(record["schedulerStates"]),
        "startTimestampInMillis": record["startTimestampInMillis"],
        "endTimestampInMillis": record["endTimestampInMillis"],
        "triggerCause": record["triggerCause"],
        "terminalState": record["terminalState"],
        "terminatedReason": record["terminatedReason"],
        "revision": 1,
        "updatedAtMillis": record["endTimestampInMillis"] or record["startTimestampInMillis"],
        "transitionPhases": [],
        "availableSlots": None,
        "reactiveMode": False,
        "schedulerSettings": {},
        "statusMessage": None,
    }
