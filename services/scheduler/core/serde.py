"""JobState to bytes and back, with msgspec: compact JSON, one positional array per struct.

The state classes are `msgspec.Struct(array_like=True)`, so a state encodes as
nested JSON arrays in field order: the bytes of a state are a function of the
state alone (byte-identical across processes), and decoding checks every field
against its type. msgspec replaced a hand-written recursive encoder that took
about 60 % of the fold + store time (docs/benchmarks.md has the comparison).

The leading format number changes whenever a state class changes shape. A state
of the format before (3) is read and brought up to date (`_from_format_3`), so a
scheduler of this version carries on from its predecessor's changelog; one of
any other format is refused with a clear error rather than misread. A state read
loses the timers of the states and phases it has left, which earlier schedulers
kept until due: they never run, and the fold no longer keeps them.
"""

from __future__ import annotations

import msgspec
from msgspec.structs import replace

from services.scheduler.core.guards import live
from services.scheduler.core.model import JobState
from services.scheduler.core.timeline import terminated

# 3: msgspec structs (the encoding of format 2 with Profile as a JSON object).
# 4: the timeline no longer stores the ids of the recent rescales (up to 64 uuids, more
#    than half of a running job's state): they are derived from the rescale count; nor
#    does it keep a terminated rescale, whose last record has been emitted.
FORMAT = 4
STATE_FORMAT = f"msgspec-json/{FORMAT}"
"""What a state of this format is called where it leaves the scheduler (job-snapshots)."""


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
    try:
        if version == FORMAT:
            return _without_stale_timers(_STATE.decode(body))
        if version == FORMAT - 1:
            return _without_stale_timers(_from_format_3(msgspec.json.decode(body)))
    except (msgspec.DecodeError, msgspec.ValidationError, IndexError, TypeError) as error:
        raise StateFormatError(f"not a stored job state of format {version}: {error}") from error
    raise StateFormatError(
        f"job state format {version}, this scheduler reads {FORMAT - 1}..{FORMAT}"
    )


def _without_stale_timers(job: JobState) -> JobState:
    """`job` without the timers of states and phases it has left, which never run: a
    scheduler before 2026-11-27 stored them until due, this one drops them on leaving."""
    timers = live(job.state, job.timers)
    return job if len(timers) == len(job.timers) else replace(job, timers=timers)


_JOB_TIMELINE = list(JobState.__struct_fields__).index("timeline")
_TIMELINE_RECENT = 2
"""Format 3's positions: the job's timeline, and in it the recent rescale ids (after
`size` and `current`), which format 4 derives instead of storing."""


def _from_format_3(job: list[object]) -> JobState:
    """A format-3 state as format 4: without the recent ids, and without the rescale kept
    after it terminated (format 4 lets it go; nothing reads it again)."""
    timeline = job[_JOB_TIMELINE]
    if not isinstance(timeline, list):
        raise TypeError(f"a timeline is an array, not {type(timeline).__name__}")
    del timeline[_TIMELINE_RECENT]
    state = msgspec.convert(job, JobState)
    current = state.timeline.current
    if current is not None and terminated(current):
        state = replace(state, timeline=replace(state.timeline, current=None))
    return state
