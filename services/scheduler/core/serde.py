"""JobState to bytes and back, with msgspec: compact JSON, one positional array per struct.

The state classes are `msgspec.Struct(array_like=True)`, so a state encodes as
nested JSON arrays in field order: the bytes of a state are a function of the
state alone (byte-identical across processes), and decoding checks every field
against its type. msgspec replaced a hand-written recursive encoder that took
about 60 % of the fold + store time (docs/benchmarks.md has the comparison).

The leading format number changes whenever a state class changes shape; a
stored state of another format is refused with a clear error rather than misread.
"""

from __future__ import annotations

import msgspec

from services.scheduler.core.model import JobState

# 3: msgspec structs (the encoding of format 2 with Profile as a JSON object).
# 4: the timeline no longer stores the ids of the recent rescales (up to 64 uuids, more
#    than half of a running job's state): they are derived from the rescale count; nor
#    does it keep a terminated rescale, whose last record has been emitted.
FORMAT = 4


class StateFormatError(ValueError):
    """Stored bytes are not a JobState of this format."""


_ENCODER = msgspec.json.Encoder()
_ENVELOPE = msgspec.json.Decoder(tuple[int, msgspec.Raw])
_STATE = msgspec.json.Decoder(JobState)


def dumps(job: JobState) -> bytes:
    return _ENCODER.encode((FORMAT, job))


def loads(data: bytes) -> JobState:
    try:
        version, body = _ENVELOPE.decode(data)
    except msgspec.DecodeError as error:
        raise StateFormatError(f"not a stored job state: {error}") from error
    if version != FORMAT:
        raise StateFormatError(f"job state format {version}, this scheduler reads {FORMAT}")
    try:
        return _STATE.decode(body)
    except msgspec.DecodeError as error:
        raise StateFormatError(f"not a stored job state of format {FORMAT}: {error}") from error
