"""The raw tables' rows in Python, from decoded records: the latest writers' and the planner's path.

The `rescales` and `flink_rescales` transforms (tables.py, flink_tables.py) are Spark
column expressions: the tables queries append with them, in bulk, on a cluster if
there is one. A latest table's batch is a handful of records, due within seconds; a
Spark job that decodes it and a Spark MERGE that writes it cost seconds of CPU a batch
(docs/benchmarks.md). The latest writers (writers.py) and the planner (planning.py)
therefore decode the collected bytes with the contracts' codec and build the same rows
here, column for column; tests/history/test_pytables.py holds the two definitions equal
over the same messages, every column, for both sources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from services.contracts import Codec, DecodeError
from services.contracts import records as r
from services.contracts import rescalefields as fields
from services.history.signal_tables import VERTEX as VERTEX_SIGNAL
from services.history.tables import (
    COOLDOWN_KEY,
    EXECUTING,
    PARTITION_COLUMN,
    PHASE_FIELDS,
    SPAN_FIELDS,
)

Record = Mapping[str, Any]
Row = dict[str, Any]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Message:
    """One decoded Kafka message: the record and where it came from."""

    record: Record
    writer_version: int
    partition: int
    offset: int
    timestamp_ms: int | None


def decoded(
    codec: Codec, name: str, key: bytes | None, value: bytes | None, where: tuple[int, int, Any]
) -> Message | None:
    """The message of `name`'s topic at `where` (partition, offset, Kafka timestamp), or
    None where the tables query dead-letters it: undecodable, another record, keyed by
    another job (decode.py's checks)."""
    try:
        result = codec.decode(value or b"", expected=frozenset({name}))
    except DecodeError:
        return None
    record = result.record
    job = f"{record['cluster']}.{record['jobId']}" if name in r.FLINK_KEYED else record["jobId"]
    if key != job.encode():
        return None
    partition, offset, stamp = where
    millis = None if stamp is None else int(stamp.timestamp() * 1000)
    return Message(record, result.writer_version, partition, offset, millis)


def _time(ms: int | None) -> datetime | None:
    return None if ms is None else _EPOCH + timedelta(milliseconds=ms)


def _start_date(ms: int) -> date:
    return (_EPOCH + timedelta(milliseconds=ms)).date()


def slot_total(slots: Sequence[Record], field: str) -> int | None:
    """tables.slot_total: Σ `field` over the groups, None when no group has a value."""
    values = [s[field] for s in slots if s.get(field) is not None]
    return sum(values) if values else None


def downtime(record: Record) -> int | None:
    """tables.downtime: the closed spans' lengths outside Executing, once terminated."""
    if record.get("terminalState") is None:
        return None
    total = 0
    for span in record.get("schedulerStates") or []:
        if span["state"] == EXECUTING:
            continue
        length = span.get("durationInMillis")
        if length is None and span.get("leaveTimestampInMillis") is not None:
            length = span["leaveTimestampInMillis"] - span["enterTimestampInMillis"]
        total += length or 0
    return total


def _common(record: Record) -> Row:
    """The columns both sources derive alike (tables.rescales, flink_tables.flink_rescales)."""
    spans = record.get("schedulerStates") or []
    last = spans[-1] if spans else None
    slots = record.get("slots") or []
    start, end = record["startTimestampInMillis"], record.get("endTimestampInMillis")
    return {
        "resource_requirements_uuid": record.get("resourceRequirementsUuid"),
        "rescale_attempt_id": record.get("rescaleAttemptId"),
        "trigger_cause": record.get("triggerCause"),
        "terminal_state": record.get("terminalState"),
        "terminated_reason": record.get("terminatedReason"),
        "in_progress": record.get("terminalState") is None,
        "start_timestamp_ms": start,
        "end_timestamp_ms": end,
        "duration_ms": None if end is None else end - start,
        "downtime_ms": downtime(record),
        "vertex_count": len(record.get("vertices") or []),
        "total_desired_slots": slot_total(slots, "desiredSlots"),
        "total_minimal_required_slots": slot_total(slots, "minimalRequiredSlots"),
        "total_pre_rescale_slots": slot_total(slots, "preRescaleSlots"),
        "total_post_rescale_slots": slot_total(slots, "postRescaleSlots"),
        "current_state": last["state"] if last else None,
        "current_state_enter_ms": last["enterTimestampInMillis"] if last else None,
        "current_state_open": last is not None and last.get("leaveTimestampInMillis") is None,
        "start_time": _time(start),
        "end_time": _time(end),
    }


def _cooldown(settings: Mapping[str, str]) -> int | None:
    try:
        return int(settings[COOLDOWN_KEY]) if COOLDOWN_KEY in settings else None
    except ValueError:
        return None


def rescale_row(message: Message) -> Row:
    """A `rescales` row (tables.rescales) of one message."""
    record = message.record
    settings = dict(record.get("schedulerSettings") or {})
    return {
        "job_id": record["jobId"],
        "rescale_uuid": record["rescaleUuid"],
        "revision": record.get("revision", 0),
        "kafka_partition": message.partition,
        "kafka_offset": message.offset,
        **_common(record),
        "updated_at_ms": record.get("updatedAtMillis"),
        "available_slots": record.get("availableSlots"),
        "reactive_mode": record.get("reactiveMode"),
        "scheduler_settings": settings,
        "cooldown_ms": _cooldown(settings),
        "status_message": record.get("statusMessage"),
        **_nested(record),
        "updated_at": _time(record.get("updatedAtMillis")),
        "writer_version": message.writer_version,
        "kafka_timestamp": _time(message.timestamp_ms),
        PARTITION_COLUMN: _start_date(record["startTimestampInMillis"]),
    }


def _renamed(items: Sequence[Record] | None, names: Mapping[str, str]) -> list[Row]:
    return [{column: item.get(name) for name, column in names.items()} for item in items or []]


def _slot(group: Record, names: Mapping[str, str] = fields.PROFILE) -> Row:
    """A slot-sharing group's row; `names`: its profiles' fields (Flink's or the `rescale`
    record's, `fields.scalefold_profile`)."""
    row = {column: group.get(name) for name, column in fields.SLOTS.items()}
    for nested, prefix in fields.PROFILES.items():
        profile = group.get(nested) or {}
        row |= {f"{prefix}_{column}": profile.get(name) for name, column in names.items()}
    return row


def _nested(record: Record) -> Row:
    """tables.NESTED: the record's arrays of flat structs (None where the record has none,
    as Spark's `transform` of a null array)."""
    profile = fields.scalefold_profile()
    slots = record.get("slots")
    return {
        "vertices": _renamed_or_none(record.get("vertices"), fields.VERTEX),
        "slots": None if slots is None else [_slot(group, profile) for group in slots],
        "scheduler_states": _renamed_or_none(record.get("schedulerStates"), SPAN_FIELDS),
        "transition_phases": _renamed_or_none(record.get("transitionPhases"), PHASE_FIELDS),
    }


def _renamed_or_none(items: Sequence[Record] | None, names: Mapping[str, str]) -> list[Row] | None:
    return None if items is None else _renamed(items, names)


def flink_rescale_row(message: Message) -> Row:
    """A `flink_rescales` row (flink_tables.flink_rescales) of one message."""
    record = message.record
    cluster, job = record["cluster"], record["jobId"]
    return {
        "cluster": cluster,
        "job_id": job,
        "job_key": f"{cluster}.{job}",
        "rescale_uuid": record["rescaleUuid"],
        "revision": record.get("revision"),
        "kafka_partition": message.partition,
        "kafka_offset": message.offset,
        "job_name": record.get("jobName"),
        **_common(record),
        "observed_at_ms": record.get("observedAtMillis"),
        "vertices": _renamed(record.get("vertices"), fields.VERTEX),
        "slots": [_slot(group) for group in record.get("slots") or []],
        "scheduler_states": _renamed(record.get("schedulerStates"), fields.SPAN),
        "unknown_fields": dict(record.get("unknownFields") or {}),
        "observed_at": _time(record.get("observedAtMillis")),
        "writer_version": message.writer_version,
        "kafka_timestamp": _time(message.timestamp_ms),
        PARTITION_COLUMN: _start_date(record["startTimestampInMillis"]),
    }


def flink_signal_row(message: Message) -> Row:
    """A `flink_signals` row (signal_tables.flink_signals) of one message."""
    record = message.record
    cluster, job, observed = record["cluster"], record["jobId"], record["observedAtMillis"]
    vertices = _renamed(record.get("vertices"), VERTEX_SIGNAL)
    pending = [v["pending_records"] for v in vertices if v["pending_records"] is not None]
    return {
        "cluster": cluster,
        "job_id": job,
        "job_key": f"{cluster}.{job}",
        "revision": 0,
        "kafka_partition": message.partition,
        "kafka_offset": message.offset,
        "job_name": record.get("jobName"),
        "job_state": record["jobState"],
        "observed_at_ms": observed,
        "job_manager_ms": record.get("jobManagerMillis"),
        "vertex_count": len(vertices),
        "pending_records": sum(pending, 0.0) if pending else None,
        "vertices": vertices,
        "unknown_fields": dict(record.get("unknownFields") or {}),
        "observed_at": _time(observed),
        "writer_version": message.writer_version,
        "kafka_timestamp": _time(message.timestamp_ms),
        PARTITION_COLUMN: _start_date(observed),
    }
