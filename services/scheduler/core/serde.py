"""JobState to bytes and back: compact JSON, one positional list per dataclass.

Field order is the dataclass's, so the bytes of a state are a function of the
state alone (byte-identical across processes). The leading format number
changes whenever a state class changes shape; a stored state of another format
is refused with a clear error rather than misread.
"""

from __future__ import annotations

import json
import types
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from enum import Enum
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from services.scheduler.core.model import JobState

FORMAT = 2


class StateFormatError(ValueError):
    """Stored bytes are not a JobState of this format."""


def dumps(job: JobState) -> bytes:
    return json.dumps([FORMAT, _encode_value(job)], separators=(",", ":")).encode()


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


def _encode_value(value: Any) -> Any:
    encoder = _ENCODERS.get(type(value))
    if encoder is None:
        encoder = _encoder_for(type(value))
    return encoder(value)


def _encoder_for(kind: type) -> Callable[[Any], Any]:
    """An encoding function per runtime type, built once (storing is on the hot path)."""
    if issubclass(kind, Enum):
        encoder: Callable[[Any], Any] = _enum_value
    elif is_dataclass(kind):
        names = tuple(f.name for f in fields(kind))
        encoder = lambda value: [_encode_value(getattr(value, n)) for n in names]  # noqa: E731
    elif issubclass(kind, tuple):
        encoder = lambda value: [_encode_value(item) for item in value]  # noqa: E731
    elif kind in (type(None), bool, int, float, str):
        encoder = _identity
    else:
        raise TypeError(f"cannot store a {kind.__name__} in a job state")
    _ENCODERS[kind] = encoder
    return encoder


def _enum_value(value: Enum) -> Any:
    return value.value


_ENCODERS: dict[type, Callable[[Any], Any]] = {}


def _decode(kind: Any, data: Any) -> Any:
    return _decoder(kind)(data)


@cache
def _decoder(kind: Any) -> Callable[[Any], Any]:
    """A decoding function for one type, built once: decoding is the service's hot path."""
    origin = get_origin(kind)
    if origin is Union or origin is types.UnionType:
        inner = _decoder(_optional(kind))
        return lambda data: None if data is None else inner(data)
    if origin is tuple:
        return _tuple_decoder(get_args(kind))
    if isinstance(kind, type) and issubclass(kind, Enum):
        return kind
    if isinstance(kind, type) and is_dataclass(kind):
        hints = _hints(kind)
        parts = [_decoder(hints[f.name]) for f in fields(kind)]
        return lambda data: kind(*[part(item) for part, item in zip(parts, data, strict=True)])
    return float if kind is float else _identity


def _identity(data: Any) -> Any:
    return data


def _optional(kind: Any) -> Any:
    options = [a for a in get_args(kind) if a is not type(None)]
    if len(options) != 1:
        raise StateFormatError(f"ambiguous union {kind}")
    return options[0]


def _tuple_decoder(args: tuple[Any, ...]) -> Callable[[Any], Any]:
    if len(args) == 2 and args[1] is Ellipsis:
        item = _decoder(args[0])
        return lambda data: tuple(item(x) for x in data)
    parts = [_decoder(arg) for arg in args]
    return lambda data: tuple(part(x) for part, x in zip(parts, data, strict=True))


@cache
def _hints(kind: type) -> dict[str, Any]:
    return get_type_hints(kind)
