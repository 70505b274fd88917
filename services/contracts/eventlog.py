"""The event log: JSON-lines files of input events (`examples/*.jsonl`).

Log format: one event per line, `{"type": "<record name>", "event": {<Avro JSON>}}`,
for example

    {"type": "TaskManagerRegistered", "event": {"jobId": "j1", "timestamp": 5000,
     "taskManagerId": "tm-1", "slots": 2}}

Blank lines and lines starting with `#` are skipped. Fields with defaults may be
left out; union values are wrapped as Avro's JSON encoding says ({"long": 5}).
`scalefold replay` folds such a log offline; `scalefold produce --from` sends it;
`scalefold tail job-events --format log` writes one from the topic (`log_line`).
"""

from __future__ import annotations

import json
from pathlib import Path

from services.contracts import records as r
from services.contracts.codec import Codec, DecodeError
from services.contracts.events import Event, from_record


class LogError(ValueError):
    """A log line that is not an input event; the message names file and line."""


def read_log(path: Path, codec: Codec) -> list[Event]:
    events = []
    with path.open(encoding="utf-8") as lines:
        for number, line in enumerate(lines, 1):
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            events.append(parse_line(line, codec, f"{path}:{number}"))
    return events


def parse_line(line: str, codec: Codec, where: str) -> Event:
    try:
        entry = json.loads(line)
        name = r.full_input_name(entry["type"])
        record = codec.from_avro_json(name, json.dumps(entry["event"]))
    except KeyError as error:
        known = ", ".join(sorted(r.short_name(n) for n in r.INPUT_EVENTS))
        raise LogError(f"{where}: missing or unknown {error}; types are {known}") from None
    except (ValueError, DecodeError) as error:
        raise LogError(f"{where}: {error}") from None
    return from_record(name, record)


def log_line(codec: Codec, schema: str, record: dict[str, object]) -> str:
    """One input event, decoded from the topic, as a line of the log (the inverse of
    `parse_line`): unions wrapped as Avro's JSON encoding says."""
    event = json.loads(codec.to_avro_json(schema, record))
    return json.dumps({"type": r.short_name(schema), "event": event}, separators=(", ", ": "))
