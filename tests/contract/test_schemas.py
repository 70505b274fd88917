"""Every schema parses, versions are consistent, and published versions never change."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from fastavro import json_reader

from services.contracts import Codec, SchemaRegistry
from services.contracts import records as r
from services.contracts.schemas import SCHEMAS_DIR, SchemaError

GOLDEN = sorted((Path(__file__).parent / "golden").glob("*.json"))


def test_every_schema_file_parses_and_is_named_by_version(registry: SchemaRegistry) -> None:
    files = sorted(SCHEMAS_DIR.glob("*.avsc"))
    assert len(list(registry)) == len(files) >= 12
    for version in registry:
        assert version.path.name.endswith(f".v{version.version}.avsc")


def test_every_record_scalefold_uses_has_a_schema(registry: SchemaRegistry) -> None:
    used = r.INPUT_EVENTS | {
        r.RESCALE,
        r.SCHEDULER_DECISIONS,
        r.SCALING_COMMAND,
        r.COMMAND_OUTCOME,
        r.DEAD_LETTER,
    }
    assert used <= set(registry.names())


def test_every_schema_version_has_a_golden_record(registry: SchemaRegistry) -> None:
    golden = {p.stem for p in GOLDEN}
    assert {v.path.stem for v in registry} == golden


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_golden_record_round_trips_byte_for_byte(path: Path, registry: SchemaRegistry) -> None:
    """The codec writes exactly the published bytes: a changed schema breaks this."""
    golden = json.loads(path.read_text())
    version = next(v for v in registry.versions(golden["schema"]) if v.version == golden["version"])
    (record,) = json_reader(io.StringIO(json.dumps(golden["avroJson"])), version.parsed)
    data = Codec(registry).encode_with(version, record)
    assert data.hex() == golden["hex"]
    decoded = Codec(registry).decode(data)
    assert decoded.schema == golden["schema"]
    assert decoded.writer_version == golden["version"]
    if version is registry.latest(golden["schema"]):
        assert decoded.record == record


def test_a_v1_rescale_is_read_by_the_v2_reader_with_defaults(codec: Codec) -> None:
    golden = json.loads((Path(__file__).parent / "golden" / "rescale.v1.json").read_text())
    decoded = codec.decode(bytes.fromhex(golden["hex"]))
    assert decoded.writer_version == 1
    assert codec.registry.latest(r.RESCALE).version == 2
    assert decoded.record["revision"] == 0
    assert decoded.record["transitionPhases"] == []
    assert decoded.record["rescaleUuid"] == golden["avroJson"]["rescaleUuid"]
    assert decoded.record["terminatedReason"] == "SUCCEEDED"


def test_v2_rescale_only_adds_fields_with_defaults(registry: SchemaRegistry) -> None:
    """The evolution rule of schemas/README.md, checked on the one evolved record."""
    v1, v2 = (json.loads(v.text) for v in registry.versions(r.RESCALE))
    old = {f["name"]: f for f in v1["fields"]}
    new = {f["name"]: f for f in v2["fields"]}
    assert set(old) <= set(new)
    for name in set(new) - set(old):
        assert "default" in new[name], f"added field {name} needs a default"
    for name in old:
        assert old[name]["type"] == new[name]["type"], f"{name} changed type"


def test_flink_enum_values_are_exactly_flinks(registry: SchemaRegistry) -> None:
    schema = json.loads(registry.latest(r.RESCALE).text)
    fields = {f["name"]: f["type"] for f in schema["fields"]}
    assert fields["triggerCause"]["symbols"] == [
        "INITIAL_SCHEDULE",
        "UPDATE_REQUIREMENT",
        "NEW_RESOURCE_AVAILABLE",
        "RECOVERABLE_FAILOVER",
    ]
    assert fields["terminalState"][1]["symbols"] == ["COMPLETED", "FAILED", "IGNORED"]
    assert fields["terminatedReason"][1]["symbols"] == [
        "SUCCEEDED",
        "EXCEPTION_OCCURRED",
        "RESOURCE_REQUIREMENTS_UPDATED",
        "NO_RESOURCES_OR_PARALLELISMS_CHANGE",
        "JOB_FINISHED",
        "JOB_FAILED",
        "JOB_CANCELED",
        "JOB_FAILOVER_RESTARTING",
    ]


def test_a_broken_schema_directory_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "thing.v1.avsc").write_text('{"type": "record", "name": "T", "fields": [')
    with pytest.raises(SchemaError, match=r"thing\.v1\.avsc"):
        SchemaRegistry.load(tmp_path)


def test_version_gaps_are_rejected(tmp_path: Path) -> None:
    record = {"type": "record", "name": "T", "fields": [{"name": "a", "type": "int"}]}
    (tmp_path / "t.v1.avsc").write_text(json.dumps(record))
    record["fields"].append({"name": "b", "type": "int", "default": 0})
    (tmp_path / "t.v3.avsc").write_text(json.dumps(record))
    with pytest.raises(SchemaError, match=r"not 1\.\.N"):
        SchemaRegistry.load(tmp_path)
