"""The Avro schemas of `schemas/`, loaded once and indexed by fingerprint.

Every `.avsc` file is named `<name>.v<N>.avsc`; all versions of one record share
its Avro full name. A record on the wire names its writer schema by the
CRC-64-AVRO fingerprint of that schema's Parsing Canonical Form (Avro
single-object encoding), so a reader can always tell which version wrote it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fastavro import parse_schema
from fastavro.schema import fingerprint, to_parsing_canonical_form

_FILE_NAME = re.compile(r"^(?P<stem>[a-z0-9_]+)\.v(?P<version>[1-9][0-9]*)\.avsc$")

SCHEMAS_DIR = Path(__file__).resolve().parents[2] / "schemas"
"""Where the schemas live in a source checkout (and in the Docker images)."""


class SchemaError(Exception):
    """The schema directory is inconsistent: a broken file or a clashing version."""


@dataclass(frozen=True)
class SchemaVersion:
    """One published version of one record schema."""

    full_name: str
    version: int
    path: Path
    text: str
    fingerprint: bytes
    parsed: Any = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        """The record's simple name, e.g. `Rescale`."""
        return self.full_name.rsplit(".", 1)[-1]


class SchemaRegistry:
    """All versions of all schemas, by full name and by fingerprint."""

    def __init__(self, versions: list[SchemaVersion]) -> None:
        self._by_fingerprint: dict[bytes, SchemaVersion] = {}
        self._by_name: dict[str, list[SchemaVersion]] = {}
        for version in versions:
            clash = self._by_fingerprint.get(version.fingerprint)
            if clash is not None:
                raise SchemaError(f"{version.path.name} is identical to {clash.path.name}")
            self._by_fingerprint[version.fingerprint] = version
            self._by_name.setdefault(version.full_name, []).append(version)
        for name, history in self._by_name.items():
            history.sort(key=lambda v: v.version)
            numbers = [v.version for v in history]
            if numbers != list(range(1, len(numbers) + 1)):
                raise SchemaError(f"{name}: versions {numbers} are not 1..N without gaps")

    @classmethod
    def load(cls, directory: Path = SCHEMAS_DIR) -> SchemaRegistry:
        """Parse every `*.avsc` file of `directory`."""
        if not directory.is_dir():
            raise SchemaError(f"schema directory {directory} does not exist")
        return cls([_load_file(path) for path in sorted(directory.glob("*.avsc"))])

    def latest(self, full_name: str) -> SchemaVersion:
        """The newest version of a record: what writers write and readers read into."""
        try:
            return self._by_name[full_name][-1]
        except KeyError:
            raise SchemaError(f"no schema named {full_name}") from None

    def versions(self, full_name: str) -> list[SchemaVersion]:
        """Every published version of a record, oldest first."""
        return list(self._by_name.get(full_name, []))

    def by_fingerprint(self, fingerprint_bytes: bytes) -> SchemaVersion | None:
        """The version that wrote a record, or None for an unknown writer."""
        return self._by_fingerprint.get(fingerprint_bytes)

    def names(self) -> list[str]:
        """Full names of all records, sorted."""
        return sorted(self._by_name)

    def __iter__(self) -> Iterator[SchemaVersion]:
        for name in self.names():
            yield from self._by_name[name]


def _load_file(path: Path) -> SchemaVersion:
    match = _FILE_NAME.match(path.name)
    if match is None:
        raise SchemaError(f"{path.name}: schema files are named <name>.v<N>.avsc")
    text = path.read_text(encoding="utf-8")
    try:
        raw: Mapping[str, Any] = json.loads(text)
        parsed = parse_schema(dict(raw))
    except Exception as error:
        raise SchemaError(f"{path.name}: {error}") from error
    canonical = to_parsing_canonical_form(parsed)
    assert isinstance(parsed, dict), f"{path.name}: a schema file holds one record"
    full_name = str(parsed["name"])
    return SchemaVersion(
        full_name=full_name,
        version=int(match["version"]),
        path=path,
        text=text,
        # fastavro returns the fingerprint already in the little-endian byte
        # order that the single-object header needs.
        fingerprint=bytes.fromhex(fingerprint(canonical, "CRC-64-AVRO")),
        parsed=parsed,
    )
