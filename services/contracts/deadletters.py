"""Dead letters: how every service records an input it cannot use, and goes on.

A dead letter keeps the input's key and bytes, so it can be repaired and
re-sent, and where it came from (topic, partition, offset), so a reader can
drop the repeats that at-least-once delivery brings. It must always be
writable, whatever the input was:

- an input without a value (a tombstone) gives an empty payload and
  `payloadNull`, distinct from an empty value;
- an input as big as the broker allows would give a dead letter bigger than
  the broker allows: its payload is cut to `PAYLOAD_LIMIT` bytes and its key to
  `KEY_LIMIT` (`payloadTruncated`, `keyTruncated`; `payloadSize` keeps the
  original size), and the reason to `REASON_LIMIT` characters.

The history service builds the same record with Spark columns
(`services/history/decode.py`), with these limits.
"""

from __future__ import annotations

from services.contracts import records as r
from services.contracts.codec import Codec, Record

PAYLOAD_LIMIT = 512 * 1024
"""Bytes of the source value a dead letter keeps: far below the broker's default
1 MiB message limit, whatever the key and reason add."""
KEY_LIMIT = 16 * 1024
"""Bytes of the source key a dead letter keeps (a key can be as big as a value)."""
REASON_LIMIT = 4_000
"""Characters of the reason a dead letter keeps."""


def cut_reason(reason: str) -> str:
    """`reason`, shortened to `REASON_LIMIT` characters with a note that it was."""
    if len(reason) <= REASON_LIMIT:
        return reason
    note = f"... ({len(reason)} characters, cut)"
    return reason[: REASON_LIMIT - len(note)] + note


def shown(data: bytes | None, limit: int = 64) -> str:
    """Bytes for a reason a person reads: their repr, cut after `limit` bytes."""
    if data is None:
        return "no key"
    if len(data) <= limit:
        return repr(data)
    return f"{data[:limit]!r}... ({len(data)} bytes)"


def dead_letter(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    error_class: str,
    reason: str,
    service: str,
    at_ms: int,
) -> Record:
    """The DeadLetter record (newest schema version) of one unusable input."""
    payload = b"" if value is None else bytes(value)
    return {
        "sourceTopic": topic,
        "sourcePartition": partition,
        "sourceOffset": offset,
        "key": None if key is None else bytes(key[:KEY_LIMIT]),
        "payload": payload[:PAYLOAD_LIMIT],
        "errorClass": error_class,
        "errorMessage": cut_reason(reason),
        "service": service,
        "timestampMillis": at_ms,
        "payloadNull": value is None,
        "payloadTruncated": len(payload) > PAYLOAD_LIMIT,
        "payloadSize": len(payload),
        "keyTruncated": key is not None and len(key) > KEY_LIMIT,
    }


def letter_key(key: bytes | None) -> bytes:
    """The Kafka key of a dead letter: the source key (cut like the record's), or empty."""
    return b"" if key is None else bytes(key[:KEY_LIMIT])


def encode_dead_letter(codec: Codec, record: Record) -> bytes:
    """A dead letter's Kafka value."""
    return codec.encode(r.DEAD_LETTER, record)
