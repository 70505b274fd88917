"""DeadLetter v2: room for a null payload and a cut one, and v1 readers and data still work."""

from __future__ import annotations

import io
import itertools
import json
from pathlib import Path
from typing import Any

import pytest
from fastavro import schemaless_reader

from services.contracts import Codec, SchemaRegistry
from services.contracts import records as r
from services.contracts.codec import HEADER_SIZE
from services.contracts.deadletters import (
    KEY_LIMIT,
    PAYLOAD_LIMIT,
    REASON_LIMIT,
    dead_letter,
    encode_dead_letter,
    letter_key,
)

GOLDEN = Path(__file__).parent / "golden"


def letter(key: bytes | None, value: bytes | None, reason: str = "why") -> dict[str, object]:
    return dead_letter(
        topic="t",
        partition=1,
        offset=7,
        key=key,
        value=value,
        error_class="DecodeError",
        reason=reason,
        service="test",
        at_ms=5,
    )


def read_as_v1(registry: SchemaRegistry, data: bytes) -> dict[str, object]:
    """What a reader that knows only DeadLetter v1 gets (an old `tail`, an old Spark job)."""
    v1, v2 = registry.versions(r.DEAD_LETTER)[:2]
    assert data[2:HEADER_SIZE] == v2.fingerprint
    body = io.BytesIO(data[HEADER_SIZE:])
    record = schemaless_reader(body, v2.parsed, v1.parsed)
    assert isinstance(record, dict)
    return record


def test_a_tombstone_is_a_null_payload_distinct_from_an_empty_one(codec: Codec) -> None:
    tombstone = codec.decode(encode_dead_letter(codec, letter(b"k", None))).record
    empty = codec.decode(encode_dead_letter(codec, letter(b"k", b""))).record
    assert (tombstone["payload"], tombstone["payloadNull"], tombstone["payloadSize"]) == (
        b"",
        True,
        0,
    )
    assert (empty["payload"], empty["payloadNull"], empty["payloadSize"]) == (b"", False, 0)
    assert codec.decode(encode_dead_letter(codec, letter(None, None))).record["key"] is None


def test_a_value_too_big_for_the_broker_is_cut_with_a_flag(codec: Codec) -> None:
    huge_key, huge_value = b"k" * (KEY_LIMIT + 10), bytes(range(256)) * 4_000  # ~1 MB
    data = encode_dead_letter(codec, letter(huge_key, huge_value, "x" * 100_000))
    record = codec.decode(data).record
    assert record["payload"] == huge_value[:PAYLOAD_LIMIT] and record["payloadTruncated"]
    assert record["payloadSize"] == len(huge_value)
    assert record["key"] == huge_key[:KEY_LIMIT] and record["keyTruncated"]
    assert len(record["errorMessage"]) == REASON_LIMIT
    assert record["errorMessage"].endswith("(100000 characters, cut)")
    assert len(data) + len(letter_key(huge_key)) < 1_000_000  # librdkafka's default limit
    whole = codec.decode(encode_dead_letter(codec, letter(b"k", b"abc"))).record
    assert not whole["payloadTruncated"] and not whole["keyTruncated"]


def test_a_v1_dead_letter_reads_as_v2_with_defaults(codec: Codec) -> None:
    golden = json.loads((GOLDEN / "dead_letter.v1.json").read_text())
    decoded = codec.decode(bytes.fromhex(golden["hex"]))
    assert (decoded.writer_version, decoded.record["payload"]) == (1, b"\x00\x01garbage")
    assert decoded.record["payloadNull"] is False
    assert decoded.record["payloadTruncated"] is False
    assert decoded.record["payloadSize"] == -1  # unknown: v1 did not record it
    assert decoded.record["keyTruncated"] is False


@pytest.mark.parametrize("value", [None, b"", b"abc", b"z" * (PAYLOAD_LIMIT + 1)])
def test_a_v1_reader_reads_every_v2_dead_letter(
    registry: SchemaRegistry, codec: Codec, value: bytes | None
) -> None:
    """Old readers survive new data: v2 only adds fields with defaults, payload stays bytes."""
    written = letter(b"job", value)
    old = read_as_v1(registry, encode_dead_letter(codec, written))
    assert old == {k: written[k] for k in old}
    assert set(old) == {
        f["name"] for f in json.loads(registry.versions(r.DEAD_LETTER)[0].text)["fields"]
    }


def test_every_evolved_record_only_adds_fields_with_defaults(registry: SchemaRegistry) -> None:
    """schemas/README.md's rule 3, for every record with more than one version, also
    for the records nested in its fields (docs may change)."""
    for name in registry.names():
        versions = [json.loads(v.text) for v in registry.versions(name)]
        for older, newer in itertools.pairwise(versions):
            _only_adds_fields(name, older, newer)


def _only_adds_fields(where: str, older: Any, newer: Any) -> None:
    if isinstance(older, dict) and older.get("type") == "record":
        assert isinstance(newer, dict) and newer.get("type") == "record", f"{where} changed type"
        old = {f["name"]: f for f in older["fields"]}
        new = {f["name"]: f for f in newer["fields"]}
        assert set(old) <= set(new), f"{where} dropped a field"
        for field in set(new) - set(old):
            assert "default" in new[field], f"{where}.{field} was added without a default"
        for field in old:
            _only_adds_fields(f"{where}.{field}", old[field]["type"], new[field]["type"])
    elif isinstance(older, dict) and older.get("type") == "array":
        assert isinstance(newer, dict) and newer.get("type") == "array", f"{where} changed type"
        _only_adds_fields(f"{where}[]", older["items"], newer["items"])
    elif isinstance(older, dict) and older.get("type") == "enum":
        # rule 5: symbols may be added at the end (readers upgrade first), never removed
        assert isinstance(newer, dict) and newer.get("name") == older["name"], f"{where} changed"
        symbols = older["symbols"]
        assert newer["symbols"][: len(symbols)] == symbols, f"{where} removed or moved a symbol"
    elif isinstance(older, list):
        assert isinstance(newer, list) and len(older) == len(newer), f"{where} changed type"
        for branch, (a, b) in enumerate(zip(older, newer, strict=True)):
            _only_adds_fields(f"{where}|{branch}", a, b)
    else:
        assert _without_docs(older) == _without_docs(newer), f"{where} changed type"


def _without_docs(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_docs(v) for k, v in schema.items() if k != "doc"}
    if isinstance(schema, list):
        return [_without_docs(v) for v in schema]
    return schema
