"""Rows of the history's tables in, Flink 2.3's FLIP-487 JSON out: pure functions.

The shapes are those of Flink 2.3.0's `flink-runtime/.../rest/messages/job/rescales/`
as a real JobManager answered them (tests/history/golden/flink-2.3.0/):

- a rescale in `/history` and in `/overview`'s `latest` has `vertices` and `slots` as
  `{}` and `schedulerStates` as `[]`; only `/details` fills them;
- `/summary`'s statistics are Flink's `StatsSummaryDto`: `min`, `max` and `avg` are
  longs over every terminated rescale (avg truncated, as `sum / count` in Java), 0 when
  there is none; the percentiles are doubles from commons-math's `Percentile` in its
  default (LEGACY) estimation, "NaN" (a string, as Jackson writes it) when there is none;
- a resource profile scalefold does not know (null) is Flink's `ResourceProfile.UNKNOWN`:
  -1 everywhere; scalefold keeps no extended resources, so those are always `{}`.

Rows are mappings with the tables' column names (tables.py).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from services.contracts import jobconfig as keys
from services.contracts import rescalefields as fields

Row = Mapping[str, Any]
Json = dict[str, Any]

TERMINAL_STATES = ("COMPLETED", "FAILED", "IGNORED")
QUANTILES = (("p50", 50.0), ("p90", 90.0), ("p95", 95.0), ("p99", 99.0), ("p999", 99.9))
DEFAULT_HISTORY_SIZE = 100
"""What `/history` answers without `limit` when a job's settings do not say (the local
Flink's `web.adaptive-scheduler.rescale-history.size`)."""


def rescale(row: Row) -> Json:
    """A rescale as `/history` and `/overview` show it: no vertices, slots or spans."""
    return {
        "rescaleUuid": row["rescale_uuid"],
        "resourceRequirementsUuid": row["resource_requirements_uuid"],
        "rescaleAttemptId": row["rescale_attempt_id"],
        "vertices": {},
        "slots": {},
        "schedulerStates": [],
        "startTimestampInMillis": row["start_timestamp_ms"],
        "endTimestampInMillis": row["end_timestamp_ms"],
        "terminalState": row["terminal_state"],
        "triggerCause": row["trigger_cause"],
        "terminatedReason": row["terminated_reason"],
    }


def details(row: Row, vertices: Sequence[Row], slots: Sequence[Row], spans: Sequence[Row]) -> Json:
    """`/details/:rescaleuuid`: the rescale with its vertices, slots and scheduler-state spans."""
    return {
        **rescale(row),
        "vertices": {v["job_vertex_id"]: vertex(v) for v in _by(vertices, "vertex_index")},
        "slots": {s["slot_sharing_group_id"]: slot(s) for s in _by(slots, "slot_index")},
        "schedulerStates": [span(s) for s in _by(spans, "span_index")],
    }


def _by(rows: Sequence[Row], index: str) -> list[Row]:
    return sorted(rows, key=lambda row: row[index])


def vertex(row: Row) -> Json:
    return {name: row[column] for name, column in fields.VERTEX.items()}


def slot(row: Row) -> Json:
    own = {name: row[column] for name, column in fields.SLOTS.items()}
    return {**own, **{name: profile(row, prefix) for name, prefix in fields.PROFILES.items()}}


def profile(row: Row, prefix: str) -> Json:
    """Flink's ResourceProfileInfo (memory in MB); scalefold's null profile is UNKNOWN: -1."""
    values = {name: row.get(f"{prefix}_{column}") for name, column in fields.PROFILE.items()}
    known = {
        name: (-1 if value is None else int(value))
        for name, value in values.items()
        if name != "cpuCores"
    }
    cpu = values["cpuCores"]
    return {"cpuCores": -1.0 if cpu is None else float(cpu), **known, "extendedResources": {}}


def span(row: Row) -> Json:
    return {name: row[column] for name, column in fields.SPAN.items()}


def newest_first(rows: Sequence[Row]) -> list[Row]:
    """A job's rescales as Flink's `/history` lists them: the newest first."""
    return sorted(
        rows,
        key=lambda r: (r["start_timestamp_ms"], r["rescale_attempt_id"] or 0, r["rescale_uuid"]),
        reverse=True,
    )


def history(rows: Sequence[Row], limit: int, offset: int) -> list[Json]:
    """`/history`: `limit` rescales from the `offset`-th newest on."""
    return [rescale(row) for row in newest_first(rows)[offset : offset + limit]]


def counts(rows: Sequence[Row]) -> Json:
    """Flink's RescalesCounts."""
    states = [row["terminal_state"] for row in rows]
    return {
        "ignored": states.count("IGNORED"),
        "inProgress": states.count(None),
        "completed": states.count("COMPLETED"),
        "failed": states.count("FAILED"),
    }


def _by_end(rows: Sequence[Row]) -> list[Row]:
    """Terminated rescales in the order Flink's summary adds them: as they terminate."""
    done = [row for row in rows if row["terminal_state"] is not None]
    return sorted(done, key=lambda r: (r["end_timestamp_ms"], r["start_timestamp_ms"]))


def overview(rows: Sequence[Row]) -> Json:
    """`/overview`: the counts and the latest rescale of each terminal state."""
    ended = _by_end(rows)
    latest = {}
    for state in TERMINAL_STATES:
        of_state = [row for row in ended if row["terminal_state"] == state]
        latest[state.lower()] = rescale(of_state[-1]) if of_state else None
    return {"rescalesCounts": counts(rows), "latest": latest}


def percentile(ordered: Sequence[float], p: float) -> float:
    """commons-math3 `Percentile.evaluate(p)` in LEGACY estimation (Flink's), NaN if empty.

    Position p(n+1)/100; below 1 the minimum, at or above n the maximum, in between
    linear interpolation between the neighbours."""
    n = len(ordered)
    if n == 0:
        return math.nan
    if n == 1:
        return float(ordered[0])
    position = p * (n + 1) / 100
    if position < 1:
        return float(ordered[0])
    if position >= n:
        return float(ordered[-1])
    lower = math.floor(position)
    low, high = float(ordered[lower - 1]), float(ordered[lower])
    return low + (position - lower) * (high - low)


def stats(durations: Sequence[int]) -> Json:
    """Flink's StatsSummaryDto of durations in ms (negative ones skipped, as Flink does)."""
    values = [d for d in durations if d is not None and d >= 0]
    ordered = sorted(values)
    result: Json = {
        "min": ordered[0] if ordered else 0,
        "max": ordered[-1] if ordered else 0,
        "avg": sum(values) // len(values) if values else 0,
    }
    for name, p in QUANTILES:
        value = percentile(ordered, p)
        result[name] = "NaN" if math.isnan(value) else value
    return result


def summary(rows: Sequence[Row], window: int | None = None) -> Json:
    """`/summary`: counts and duration statistics, all terminated and per terminal state.

    Flink keeps min, max and avg over every rescale since the job started, the percentiles
    over the last `rescale-history.size` (a sliding window); here both are over the whole
    durable history unless `window` asks for the percentiles of the last `window` only."""
    ended = _by_end(rows)

    def block(state: str | None) -> Json:
        chosen = [r["duration_ms"] for r in ended if state is None or r["terminal_state"] == state]
        whole = stats(chosen)
        if window is None:
            return whole
        recent = stats(chosen[-window:])
        return {**whole, **{name: recent[name] for name, _ in QUANTILES}}

    return {
        "rescalesCounts": counts(rows),
        "rescalesDurationStatsInMillis": block(None),
        "completedRescalesDurationStatsInMillis": block("COMPLETED"),
        "ignoredRescalesDurationStatsInMillis": block("IGNORED"),
        "failedRescalesDurationStatsInMillis": block("FAILED"),
    }


def _millis(settings: Mapping[str, str], key: str) -> int | None:
    value = settings.get(key)
    try:
        return None if value in (None, "") else int(str(value))
    except ValueError:
        return None


SLOT_IDLE_TIMEOUT = "slot.idle.timeout"


def config(settings: Mapping[str, str]) -> Json:
    """`/config` from a rescale record's `schedulerSettings` (Flink keys, durations in ms).

    A setting the record does not hold is null: scalefold's scheduler has no slot idle
    timeout, so `slotIdleTimeoutInMillis` is null unless a producer passed the key on."""
    mode = settings.get(keys.SCHEDULER_MODE) or None
    return {
        "rescaleHistoryMax": _millis(settings, keys.HISTORY_SIZE),
        "schedulerExecutionMode": mode.upper() if mode else None,
        "submissionResourceWaitTimeoutInMillis": _millis(settings, keys.WAIT_TIMEOUT),
        "submissionResourceStabilizationTimeoutInMillis": _millis(
            settings, keys.SUBMISSION_STABILIZATION
        ),
        "slotIdleTimeoutInMillis": _millis(settings, SLOT_IDLE_TIMEOUT),
        "executingCooldownTimeoutInMillis": _millis(settings, keys.COOLDOWN),
        "executingResourceStabilizationTimeoutInMillis": _millis(
            settings, keys.EXECUTING_STABILIZATION
        ),
        "maximumDelayForTriggeringRescaleInMillis": _millis(settings, keys.MAX_DELAY),
        "rescaleOnFailedCheckpointCount": _millis(settings, keys.MAX_CHECKPOINT_FAILURES),
    }


def settings_of(row: Row) -> dict[str, str]:
    """A row's `scheduler_settings` as a dict (pyarrow gives a map as (key, value) pairs)."""
    value = row.get("scheduler_settings")
    if value is None:
        return {}
    return dict(value.items()) if isinstance(value, Mapping) else dict(value)


def history_size(settings: Mapping[str, str]) -> int:
    """The job's `web.adaptive-scheduler.rescale-history.size`, else the default."""
    size = _millis(settings, keys.HISTORY_SIZE)
    return size if size is not None and size > 0 else DEFAULT_HISTORY_SIZE


def error(message: str) -> Json:
    """Flink's error body."""
    return {"errors": [message]}
