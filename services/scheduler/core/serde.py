"""JobState to bytes and back: compact JSON, one positional list per dataclass.

Field order is the dataclass's, so the bytes of a state are a function of the
state alone (byte-identical across processes). The leading format number
changes whenever a state class changes shape; a stored state of another format
is refused with a clear error rather than misread.
"""

from __future__ import annotations

import json
import types
from dataclasses import fields, is_dataclass
from enum import Enum
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from services.scheduler.core.model import JobState

FORMAT = 1


class StateFormatError(ValueError):
    """Stored bytes are not a JobState of this format."""


def dumps(job: JobState) -> bytes:
    return json.dumps([FORMAT, _encode(job)], separators=(",", ":")).encode()


def loads(data: bytes) -> JobState:
    try:
        version, body = json.loads(data)
    except (ValueError, TypeError) as error:
        raise StateFormatError(f"not a stored job state: {error}") from error
    if version != FORMAT:
        raise StateFormatError(f"job state format {version}, this scheduler reads {FORMAT}")
    job = _decode(JobState, body)
    assert isinstance(job, JobState)
    return job


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value.value if isinstance(value, Enum) else value
    if is_dataclass(value) and not isinstance(value, type):
        return [_encode(getattr(value, f.name)) for f in fields(value)]
    if isinstance(value, tuple):
        return [_encode(item) for item in value]
    raise TypeError(f"cannot store a {type(value).__name__} in a job state")


def _decode(kind: Any, data: Any) -> Any:
    origin = get_origin(kind)
    if origin is Union or origin is types.UnionType:
        return None if data is None else _decode(_optional(kind), data)
    if origin is tuple:
        return _decode_tuple(get_args(kind), data)
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind(data)
    if isinstance(kind, type) and is_dataclass(kind):
        hints = _hints(kind)
        names = [f.name for f in fields(kind)]
        return kind(*(_decode(hints[name], item) for name, item in zip(names, data, strict=True)))
    return float(data) if kind is float else data


def _optional(kind: Any) -> Any:
    options = [a for a in get_args(kind) if a is not type(None)]
    if len(options) != 1:
        raise StateFormatError(f"ambiguous union {kind}")
    return options[0]


def _decode_tuple(args: tuple[Any, ...], data: Any) -> tuple[Any, ...]:
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_decode(args[0], item) for item in data)
    return tuple(_decode(arg, item) for arg, item in zip(args, data, strict=True))


@cache
def _hints(kind: type) -> dict[str, Any]:
    return get_type_hints(kind)
