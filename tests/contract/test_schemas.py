"""Every schema parses, versions are consistent, and published versions never change."""

from __future__ import annotations

import io
import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from fastavro import json_reader, schemaless_reader

from services.contracts import Codec, SchemaRegistry
from services.contracts import records as r
from services.contracts.codec import HEADER_SIZE
from services.contracts.commands import (
    CommandOutcome,
    OutcomeStatus,
    ScalingAction,
    ScalingCommand,
)
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
        r.FLINK_RESCALE,
        r.FLINK_BRIDGE_OFFSET,
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


def _shape(schema: Any) -> Any:
    """A type without docs, nested records by name (they are compared on their own), enums
    by name (their symbols are compared by `_symbols`)."""
    if isinstance(schema, dict):
        if schema.get("type") == "record":
            return schema["name"]
        if schema.get("type") == "enum":
            return ("enum", schema["name"])
        return {k: _shape(v) for k, v in schema.items() if k != "doc"}
    if isinstance(schema, list):
        return [_shape(item) for item in schema]
    return schema


def _symbols(schema: Any) -> dict[str, list[str]]:
    """The symbols of every enum defined in a field's type (outside nested records)."""
    if isinstance(schema, dict) and schema.get("type") == "enum":
        return {schema["name"]: list(schema["symbols"])}
    if isinstance(schema, dict) and schema.get("type") != "record":
        return {k: v for item in schema.values() for k, v in _symbols(item).items()}
    if isinstance(schema, list):
        return {k: v for item in schema for k, v in _symbols(item).items()}
    return {}


def _records(schema: Any, found: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Every record type defined in `schema`, by name, with its fields by name."""
    if isinstance(schema, dict):
        if schema.get("type") == "record":
            found[schema["name"]] = {f["name"]: f for f in schema["fields"]}
        for value in schema.values():
            _records(value, found)
    elif isinstance(schema, list):
        for item in schema:
            _records(item, found)
    return found


def test_every_newer_version_only_adds_fields_with_defaults(registry: SchemaRegistry) -> None:
    """schemas/README.md rule 3, for every record and its nested records."""
    for name in registry.names():
        versions = registry.versions(name)
        for old, new in pairwise(versions):
            before = _records(json.loads(old.text), {})
            after = _records(json.loads(new.text), {})
            for record, fields in before.items():
                assert record in after, f"{new.path.name} drops record {record}"
                for field, spec in fields.items():
                    assert field in after[record], f"{new.path.name} drops {record}.{field}"
                    assert _shape(after[record][field]["type"]) == _shape(spec["type"]), (
                        f"{new.path.name} changes the type of {record}.{field}"
                    )
                    for enum, symbols in _symbols(spec["type"]).items():  # rule 5: appended only
                        later = _symbols(after[record][field]["type"])[enum]
                        assert later[: len(symbols)] == symbols, f"{new.path.name} drops {enum}'s"
                for field in set(after[record]) - set(fields):
                    assert "default" in after[record][field], f"{record}.{field} needs a default"


@pytest.mark.parametrize("path", GOLDEN, ids=lambda p: p.stem)
def test_every_version_reads_every_versions_golden_record(
    path: Path, registry: SchemaRegistry
) -> None:
    """Old readers read new data and new readers old data (README rule 3), byte for byte."""
    golden = json.loads(path.read_text())
    versions = registry.versions(golden["schema"])
    writer = next(v for v in versions if v.version == golden["version"])
    body = bytes.fromhex(golden["hex"])[HEADER_SIZE:]
    for reader in versions:
        if golden["avroJson"].get("action") == "SET_PARALLELISM" and reader.version == 1:
            with pytest.raises(Exception, match="SET_PARALLELISM"):  # rule 5: readers first
                schemaless_reader(io.BytesIO(body), writer.parsed, reader.parsed)
            continue
        record = schemaless_reader(io.BytesIO(body), writer.parsed, reader.parsed)
        assert isinstance(record, dict)


def test_a_v1_decision_reads_as_v2_without_a_job_status(codec: Codec) -> None:
    golden = json.loads(
        (Path(__file__).parent / "golden" / "scheduler_decision.v1.json").read_text()
    )
    decoded = codec.decode(bytes.fromhex(golden["hex"]))
    assert decoded.writer_version == 1
    assert codec.registry.latest(r.SCHEDULER_DECISIONS).version == 2
    assert [item["jobStatus"] for item in decoded.record["items"]] == [None, None]


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
    decisions = json.loads(registry.latest(r.SCHEDULER_DECISIONS).text)
    item = decisions["fields"][3]["type"]["items"]
    job_status = next(f for f in item["fields"] if f["name"] == "jobStatus")["type"][1]
    assert job_status["symbols"] == [  # org.apache.flink.api.common.JobStatus
        "INITIALIZING",
        "CREATED",
        "RUNNING",
        "FAILING",
        "FAILED",
        "CANCELLING",
        "CANCELED",
        "FINISHED",
        "RESTARTING",
        "SUSPENDED",
        "RECONCILING",
    ]
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


def test_set_parallelism_is_a_v2_command_that_v1_readers_refuse(
    codec: Codec, registry: SchemaRegistry
) -> None:
    """scaling_command.v2 adds SET_PARALLELISM (schemas/README.md rule 5: readers first): a
    v2 reader reads it with its per-vertex targets; a v1 reader cannot, and a v1 command
    reads as v2 with no targets."""
    command = {
        "commandId": "parallelism-1",
        "jobId": "local.cc408c8079b82a80a401c5ac85881e95",
        "action": "SET_PARALLELISM",
        "amount": 2,
        "reason": "by hand",
        "evidence": [],
        "issuedAtMillis": 1795935434455,
        "parallelism": {"cbc357ccb763df2852fee8c4fc7d55f2": 3},
    }
    data = codec.encode(r.SCALING_COMMAND, command)
    assert codec.decode(data).record == {**command, "basis": None, "expectedRequirements": None}
    v1 = registry.versions(r.SCALING_COMMAND)[0]
    with pytest.raises(Exception, match="SET_PARALLELISM"):
        schemaless_reader(
            io.BytesIO(data[HEADER_SIZE:]), registry.latest(r.SCALING_COMMAND).parsed, v1.parsed
        )
    golden = json.loads((Path(__file__).parent / "golden" / "scaling_command.v1.json").read_text())
    assert codec.decode(bytes.fromhex(golden["hex"])).record["parallelism"] == {}


def test_superseded_is_a_v2_outcome_that_v1_readers_refuse(
    codec: Codec, registry: SchemaRegistry
) -> None:
    """command_outcome.v2 adds the status SUPERSEDED (schemas/README.md rule 5: readers
    first): a v2 reader reads it, typed; a v1 reader cannot, and a v1 outcome reads as v2."""
    outcome = CommandOutcome(
        command_id="provision-1",
        job_id="clicks",
        action=ScalingAction.PROVISION_TASK_MANAGERS,
        status=OutcomeStatus.SUPERSEDED,
        message="job clicks holds 4 slot(s) of registered TaskManagers and 0 more are starting",
        backend="embedded",
        completed_at_millis=1795935437002,
        details={"heldSlots": "4", "startingSlots": "0", "seenSlots": "0", "neededSlots": "4"},
    )
    data = codec.encode(r.COMMAND_OUTCOME, outcome.to_record())
    assert CommandOutcome.from_record(codec.decode(data).record) == outcome
    v1 = registry.versions(r.COMMAND_OUTCOME)[0]
    with pytest.raises(Exception, match="SUPERSEDED"):
        schemaless_reader(
            io.BytesIO(data[HEADER_SIZE:]), registry.latest(r.COMMAND_OUTCOME).parsed, v1.parsed
        )
    golden = json.loads((Path(__file__).parent / "golden" / "command_outcome.v1.json").read_text())
    old = CommandOutcome.from_record(codec.decode(bytes.fromhex(golden["hex"])).record)
    assert old.status is OutcomeStatus.APPLIED


def test_v2_commands_read_as_v3_with_no_basis_and_v3_ones_typed_with_theirs(codec: Codec) -> None:
    """scaling_command.v3 adds `basis` (nullable, null by default): an operator's or an older
    planner's command is applied unchecked; a v3 one carries what its planner saw."""
    golden = Path(__file__).parent / "golden"
    v2 = json.loads((golden / "scaling_command.v2.json").read_text())
    old = ScalingCommand.from_record(codec.decode(bytes.fromhex(v2["hex"])).record)
    assert old.basis is None and old.action is ScalingAction.PROVISION_TASK_MANAGERS
    v3 = json.loads((golden / "scaling_command.v3.json").read_text())
    new = ScalingCommand.from_record(codec.decode(bytes.fromhex(v3["hex"])).record)
    assert new.basis is not None
    assert (new.basis.available_slots, new.basis.desired_slots, new.basis.revision) == (1, 4, 3)
    assert new.basis.post_rescale_slots is None
    v3_schema = next(v for v in codec.registry.versions(r.SCALING_COMMAND) if v.version == 3)
    assert codec.encode_with(v3_schema, new.to_record()).hex() == v3["hex"]


def test_v3_commands_read_as_v4_unchecked_and_v4_ones_with_the_requirements_they_expect(
    codec: Codec,
) -> None:
    """scaling_command.v4 adds `expectedRequirements` (nullable, null by default): an older
    command's targets are applied unchecked; the autoscaler's carries the bounds it saw."""
    golden = Path(__file__).parent / "golden"
    v3 = json.loads((golden / "scaling_command.v3.json").read_text())
    old = ScalingCommand.from_record(codec.decode(bytes.fromhex(v3["hex"])).record)
    assert old.expected_requirements is None
    v4 = json.loads((golden / "scaling_command.v4.json").read_text())
    new = ScalingCommand.from_record(codec.decode(bytes.fromhex(v4["hex"])).record)
    assert new.action is ScalingAction.SET_PARALLELISM and new.expected_requirements is not None
    bounds = {v: (b.lower_bound, b.upper_bound) for v, b in new.expected_requirements.items()}
    assert set(bounds.values()) == {(1, 2)} and len(bounds) == 2
    assert codec.encode(r.SCALING_COMMAND, new.to_record()).hex() == v4["hex"]
