"""FLIP-487's rescale fields and the history's column names: the one field map.

A rescale's nested elements (its vertices, slot-sharing groups, resource profiles and
scheduler-state spans) have the same fields in Flink 2.3's REST answers, in the Avro
records (`rescale`, `flink_rescale`) and, in snake_case, in the history's tables. Each
map below goes from the camelCase field to its column, in the order Flink lists them:
the Flink bridge keeps these fields of Flink's answers (services/bridge/rescales.py),
the history's tables rename them to the columns (services/history/tables.py,
flink_tables.py) and its REST API back (services/history/restapi/flinkjson.py).
"""

from __future__ import annotations

from collections.abc import Mapping

VERTEX: Mapping[str, str] = {
    "jobVertexId": "job_vertex_id",
    "jobVertexName": "job_vertex_name",
    "slotSharingGroupId": "slot_sharing_group_id",
    "slotSharingGroupName": "slot_sharing_group_name",
    "desiredParallelism": "desired_parallelism",
    "sufficientParallelism": "sufficient_parallelism",
    "preRescaleParallelism": "pre_rescale_parallelism",
    "postRescaleParallelism": "post_rescale_parallelism",
}
SLOTS: Mapping[str, str] = {
    "slotSharingGroupId": "slot_sharing_group_id",
    "slotSharingGroupName": "slot_sharing_group_name",
    "desiredSlots": "desired_slots",
    "minimalRequiredSlots": "minimal_required_slots",
    "preRescaleSlots": "pre_rescale_slots",
    "postRescaleSlots": "post_rescale_slots",
}
"""A slot-sharing group's own fields; its two profiles are `PROFILES`."""
PROFILES: Mapping[str, str] = {
    "requestResourceProfile": "request",
    "acquiredResourceProfile": "acquired",
}
"""A slot-sharing group's resource profiles, flattened into `<prefix>_<column>` columns."""
PROFILE: Mapping[str, str] = {
    "cpuCores": "cpu_cores",
    "taskHeapMemory": "task_heap_memory_mb",
    "taskOffHeapMemory": "task_off_heap_memory_mb",
    "managedMemory": "managed_memory_mb",
    "networkMemory": "network_memory_mb",
}
"""A ResourceProfile as Flink's REST API (and `flink_rescale`) names it, in MB; scalefold's
`rescale` record names the memories with an `Mb` suffix (`scalefold_profile`)."""
SPAN: Mapping[str, str] = {
    "state": "state",
    "enterTimestampInMillis": "enter_timestamp_ms",
    "leaveTimestampInMillis": "leave_timestamp_ms",
    "durationInMillis": "duration_ms",
    "stringifiedException": "stringified_exception",
}


def scalefold_profile() -> dict[str, str]:
    """`PROFILE` with the `rescale` record's field names (`taskHeapMemoryMb`, ...)."""
    return {(f if f == "cpuCores" else f"{f}Mb"): column for f, column in PROFILE.items()}


def inverse(fields: Mapping[str, str]) -> dict[str, str]:
    """column -> camelCase field."""
    return {column: name for name, column in fields.items()}
