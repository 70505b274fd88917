"""`scalefold produce`: put input events on the job-events topic by hand.

Fields come from the event's Avro schema: `--jobId j1 --slots 4` or, in
kebab-case, `--job-id j1`. Values are coerced to the field's type; arrays,
maps and records take JSON. `timestamp` defaults to now. Every record is
validated against the schema before anything is sent, with a clear error.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Sequence
from typing import Any

from services.contracts import Codec, EncodeError
from services.contracts import records as r
from services.contracts.events import RUNTIME_CHECKPOINT_IDS

ALIASES = {
    "job-submitted": r.JOB_SUBMITTED,
    "tm-registered": r.TASK_MANAGER_REGISTERED,
    "taskmanager-registered": r.TASK_MANAGER_REGISTERED,
    "tm-lost": r.TASK_MANAGER_LOST,
    "taskmanager-lost": r.TASK_MANAGER_LOST,
    "lifecycle": r.JOB_LIFECYCLE_EVENT,
    "job-event": r.JOB_LIFECYCLE_EVENT,
    "requirements": r.RESOURCE_REQUIREMENTS_UPDATED,
    "configuration": r.JOB_CONFIGURATION_UPDATED,
    "timer-fired": r.TIMER_FIRED,
}


class ProduceError(ValueError):
    """A command line that does not make a valid event; the message says what to change."""


def event_type(name: str) -> str:
    """The full record name for an alias (`tm-registered`) or a simple name."""
    if name in ALIASES:
        return ALIASES[name]
    try:
        return r.full_input_name(name)
    except KeyError:
        names = sorted({*ALIASES, *(r.short_name(n) for n in r.INPUT_EVENTS)})
        raise ProduceError(f"unknown event type {name!r}; one of: {', '.join(names)}") from None


def schema_fields(codec: Codec, full_name: str) -> dict[str, Any]:
    """Field name -> Avro type of the newest version of a record."""
    schema = json.loads(codec.registry.latest(full_name).text)
    return {field["name"]: field for field in schema["fields"]}


def record_from_args(
    codec: Codec, full_name: str, args: Sequence[str], now_ms: int
) -> dict[str, Any]:
    """`--field value` pairs to a validated record (defaults filled in)."""
    fields = schema_fields(codec, full_name)
    by_option = {_kebab(name): name for name in fields} | {name: name for name in fields}
    values: dict[str, Any] = {}
    tokens = list(args)
    while tokens:
        option = tokens.pop(0)
        if not option.startswith("--") or not tokens:
            raise ProduceError(f"expected --field value pairs, got {option!r}")
        name = by_option.get(option[2:])
        if name is None:
            raise ProduceError(
                f"{r.short_name(full_name)} has no field {option[2:]!r}; fields: {', '.join(fields)}"
            )
        values[name] = _coerce(fields[name]["type"], tokens.pop(0), name)
    values.setdefault("timestamp", now_ms)
    record = {
        name: values[name] if name in values else _default(spec) for name, spec in fields.items()
    }
    missing = [name for name, value in record.items() if value is _MISSING]
    if missing:
        raise ProduceError(
            f"{r.short_name(full_name)} needs {', '.join('--' + _kebab(m) for m in missing)}"
        )
    try:
        codec.validate(full_name, record)
    except EncodeError as error:
        raise ProduceError(str(error)) from None
    if (record.get("checkpointId") or 0) >= RUNTIME_CHECKPOINT_IDS:
        raise ProduceError(
            f"checkpoint ids from {RUNTIME_CHECKPOINT_IDS} are the embedded runtime's; "
            "use a smaller one"
        )
    return record


def now_ms() -> int:
    return int(time.time() * 1000)


_MISSING = object()
NUMBERS: dict[str, type] = {"int": int, "long": int, "double": float, "float": float}


def _default(spec: dict[str, Any]) -> Any:
    return spec.get("default", _MISSING)


def _kebab(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def _coerce(kind: Any, text: str, name: str) -> Any:
    if isinstance(kind, list):  # a union: null or the one other branch
        if text.lower() in ("null", "none"):
            return None
        kind = next(k for k in kind if k != "null")
    if isinstance(kind, dict) and kind.get("type") == "enum":
        return text.upper()
    if isinstance(kind, dict) or kind in ("array", "map", "record"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise ProduceError(f"--{_kebab(name)} takes JSON here: {error}") from None
    try:
        return NUMBERS[kind](text) if kind in NUMBERS else _scalar(kind, text)
    except ValueError:
        article = "an" if str(kind)[0] in "aeiou" else "a"
        raise ProduceError(f"--{_kebab(name)} must be {article} {kind}, got {text!r}") from None


def _scalar(kind: Any, text: str) -> Any:
    if kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise ValueError(text)
        return text.lower() == "true"
    if kind == "bytes":
        return text.encode()
    return text


def paced(timestamps: Sequence[int], start_ms: int, speed: float) -> list[tuple[int, float]]:
    """For `produce --from LOG --now`: each event's new timestamp and when to send it.

    The log's times are shifted so its first event happens at `start_ms`; the
    event is sent at `(its time - the first's) / speed` seconds after the start.
    Speed compresses the waits, not the times: the scheduler folds by event
    time, so a faster run folds the same events at the same times as `replay`
    does (timers due between two events run when the later one arrives; those
    after the last event fire when the wall clock reaches them).
    """
    if speed <= 0:
        raise ProduceError(f"--speed must be positive, not {speed}")
    if not timestamps:
        return []
    first = min(timestamps)
    return [(start_ms + ts - first, (ts - first) / 1000 / speed) for ts in timestamps]
