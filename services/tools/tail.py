"""`scalefold tail`: print a topic's records decoded, one readable line each."""

from __future__ import annotations

import json
from typing import Any

from services.contracts import Codec, DecodeError
from services.contracts import records as r
from services.contracts.commands import CommandOutcome, ScalingCommand
from services.contracts.eventlog import log_line
from services.contracts.render import instant, rescale_line


def render(codec: Codec, value: bytes | None, fmt: str = "text") -> str:
    """One record as a line: JSON of the decoded record, a short text, or (`log`) a line
    of the event log `scalefold replay` reads."""
    try:
        decoded = codec.decode(value or b"")
    except DecodeError as error:
        return (
            f"# (not a scalefold record: {error})"
            if fmt == "log"
            else f"(not a scalefold record: {error})"
        )
    record = decoded.record
    if fmt == "log":
        if decoded.schema == r.TIMER_FIRED:  # replay fires the timers of its own run
            return f"# TimerFired {record['jobId']} @{record['timestamp']}"
        if decoded.schema not in r.INPUT_EVENTS:
            return f"# (not an input event: {r.short_name(decoded.schema)})"
        return log_line(codec, decoded.schema, record)
    if fmt == "json":
        return json.dumps(
            {"schema": decoded.schema, "version": decoded.writer_version, "record": record},
            default=_bytes,
            sort_keys=True,
        )
    return f"{r.short_name(decoded.schema):<26} {_text(decoded.schema, record)}"


def located(message: Any, line: str, fmt: str) -> str:
    """A rendered record after its partition and offset (`p4@17`), bar the log format,
    whose lines replay reads as they are."""
    return line if fmt == "log" else f"p{message.partition()}@{message.offset():<6} {line}"


def _text(schema: str, record: dict[str, Any]) -> str:
    if schema == r.RESCALE:
        return f"{record['jobId']} {rescale_line(record)}"
    if schema == r.SCHEDULER_DECISIONS:
        items = "; ".join(f"{i['kind']}: {i['message'] or i['details']}" for i in record["items"])
        return f"{record['jobId']} @{instant(record['timestamp'])} {items}"
    if schema == r.DEAD_LETTER:
        where = f"{record['sourceTopic']}[{record['sourcePartition']}]@{record['sourceOffset']}"
        notes = [
            "no value" if record.get("payloadNull") else "",
            f"payload cut from {record['payloadSize']} bytes"
            if record.get("payloadTruncated")
            else "",
            "key cut" if record.get("keyTruncated") else "",
        ]
        noted = f" ({', '.join(n for n in notes if n)})" if any(notes) else ""
        return (
            f"{record['errorClass']} from {where}{noted} by {record['service']}: "
            f"{record['errorMessage']}"
        )
    if schema == r.SCALING_COMMAND:
        return command_line(ScalingCommand.from_record(record))
    if schema == r.COMMAND_OUTCOME:
        return outcome_line(CommandOutcome.from_record(record))
    fields = {
        k: v
        for k, v in record.items()
        if k not in ("jobId", "timestamp") and v not in (None, {}, [])
    }
    at = record.get("timestamp")
    when = instant(at) if isinstance(at, int) else ""
    return f"{record.get('jobId', '')} @{when} {json.dumps(fields, default=_bytes)}"


def command_line(command: ScalingCommand) -> str:
    """A command, and what it was decided on when it says (its basis)."""
    line = f"{command.job_id} {command.action} {command.amount} ({command.command_id}): {command.reason}"
    return f"{line} [{command.basis.seen()}]" if command.basis is not None else line


def outcome_line(outcome: CommandOutcome) -> str:
    """An outcome: APPLIED, REJECTED, FAILED or SUPERSEDED, with its message."""
    return f"{outcome.job_id} {outcome.command_id} {outcome.status}: {outcome.message}"


def _bytes(value: Any) -> Any:
    return value.hex() if isinstance(value, bytes) else str(value)


STILL_S = 15.0
"""`tail --max N` says it is still waiting after this long without a record (then
after twice as long, and so on)."""


def waiting_line(
    topic: str, most: int | None, job: str | None, from_beginning: bool, idle: float | None
) -> str:
    """What `tail` waits for, and for how long at most (stderr, before the first poll)."""
    what = f"{most} record(s)" if most is not None else "records"
    of_job = f" of job {job}" if job else ""
    start = "from the beginning" if from_beginning else "new ones only"
    if idle is not None:
        bound = f"until {idle:g} s pass without one"
    elif most is not None:
        bound = "with no time limit (--idle SECONDS stops after a quiet spell; Ctrl-C stops)"
    else:
        bound = "until Ctrl-C"
    return f"tail: waiting for {what}{of_job} on {topic} ({start}), {bound}"


def still_line(seen: int, most: int, waited: float) -> str:
    return f"tail: {seen} of {most} record(s) so far; still waiting ({waited:.0f} s)"
