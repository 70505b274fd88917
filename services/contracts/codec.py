"""Avro single-object encoding: the wire format of every scalefold record.

    byte 0-1   0xC3 0x01              magic (Avro spec, "Single-object encoding")
    byte 2-9   CRC-64-AVRO fingerprint of the writer schema, little endian
    byte 10-   the record, Avro binary encoded with the writer schema

`decode` reads any published version and resolves it into the newest version of
the same record, so consumers are written against one schema per record.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from typing import Any

from fastavro import json_reader, json_writer, schemaless_reader, schemaless_writer
from fastavro.validation import ValidationError, validate

from services.contracts.schemas import SchemaRegistry, SchemaVersion

MAGIC = b"\xc3\x01"
HEADER_SIZE = len(MAGIC) + 8

Record = dict[str, Any]


class DecodeError(ValueError):
    """Bytes that are not a scalefold record: the reason says which check failed."""


class EncodeError(ValueError):
    """A datum that does not fit its schema: the reason names the field."""


@dataclass(frozen=True)
class Decoded:
    """A record read off the wire, already resolved into the newest schema version."""

    schema: str
    writer_version: int
    record: Record


class Codec:
    """Encodes and decodes the records of one schema registry."""

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry

    def encode(self, full_name: str, record: Record) -> bytes:
        """Write `record` with the newest version of its schema."""
        return self.encode_with(self.registry.latest(full_name), record)

    def encode_with(self, version: SchemaVersion, record: Record) -> bytes:
        """Write `record` with one particular schema version (tests, migrations)."""
        out = io.BytesIO()
        out.write(MAGIC)
        out.write(version.fingerprint)
        try:
            schemaless_writer(out, version.parsed, record)
        except (TypeError, ValueError, KeyError, AttributeError) as error:
            raise EncodeError(f"{version.full_name}: {error}") from error
        return out.getvalue()

    def validate(self, full_name: str, record: Record) -> None:
        """Raise EncodeError naming every field of `record` that breaks the schema."""
        version = self.registry.latest(full_name)
        try:
            validate(record, version.parsed, raise_errors=True)
        except ValidationError as error:
            problems = "; ".join(str(e) for e in error.errors)
            raise EncodeError(f"{full_name}: {problems}") from error

    def decode(self, data: bytes, expected: frozenset[str] | None = None) -> Decoded:
        """Read one record; `expected` limits which record names are acceptable."""
        writer = self.writer_of(data)
        if expected is not None and writer.full_name not in expected:
            wanted = ", ".join(sorted(expected))
            raise DecodeError(f"record {writer.full_name} is not one of {wanted}")
        reader = self.registry.latest(writer.full_name)
        body = io.BytesIO(data)
        body.seek(HEADER_SIZE)
        try:
            record = schemaless_reader(body, writer.parsed, reader.parsed)
        except Exception as error:  # fastavro raises many types on corrupt input
            raise DecodeError(
                f"body is not a valid {writer.full_name} v{writer.version}: "
                f"{type(error).__name__}: {error}"
            ) from error
        if body.tell() != len(data):
            raise DecodeError(
                f"{len(data) - body.tell()} trailing bytes after a "
                f"{writer.full_name} v{writer.version} record"
            )
        if not isinstance(record, dict):
            raise DecodeError(f"{writer.full_name} did not decode to a record")
        return Decoded(writer.full_name, writer.version, record)

    def writer_of(self, data: bytes) -> SchemaVersion:
        """The schema version named by a record's header."""
        if not isinstance(data, bytes | bytearray | memoryview):
            raise DecodeError(f"expected bytes, got {type(data).__name__}")
        if len(data) < HEADER_SIZE:
            raise DecodeError(f"{len(data)} bytes is shorter than the {HEADER_SIZE}-byte header")
        if data[:2] != MAGIC:
            raise DecodeError(
                f"missing the single-object magic C3 01 (got {bytes(data[:2]).hex(' ').upper()})"
            )
        fp = bytes(data[2:HEADER_SIZE])
        writer = self.registry.by_fingerprint(fp)
        if writer is None:
            raise DecodeError(f"unknown writer schema fingerprint {fp.hex()}")
        return writer

    def from_avro_json(self, full_name: str, text: str) -> Record:
        """Read one record from Avro's JSON encoding (unions wrapped: {"long": 5})."""
        version = self.registry.latest(full_name)
        try:
            records = list(json_reader(io.StringIO(text), version.parsed))
        except Exception as error:
            raise DecodeError(
                f"not {full_name} in Avro JSON ({type(error).__name__}: {error}); "
                'note that union values are wrapped, e.g. {"long": 5}'
            ) from error
        if len(records) != 1:
            raise DecodeError(f"expected one {full_name}, found {len(records)}")
        record = records[0]
        if not isinstance(record, dict):
            raise DecodeError(f"{full_name} did not decode to a record")
        return record

    def to_avro_json(self, full_name: str, record: Record) -> str:
        """Write one record in Avro's JSON encoding, keys in schema order."""
        version = self.registry.latest(full_name)
        out = io.StringIO()
        json_writer(out, version.parsed, [record])
        return json.dumps(json.loads(out.getvalue()), separators=(",", ":"))
