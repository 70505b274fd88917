"""Scaling commands and their outcomes as typed records: the planner, the actuator, the demo
and the CLI all hold these, never a dict of string literals.

They are msgspec Structs whose fields, renamed to camelCase, are exactly the Avro fields of
`schemas/scaling_command.v4.avsc` and `schemas/command_outcome.v2.avsc`: `to_record` gives
the datum the codec writes, `from_record` checks a decoded datum's types (an action or a
status outside its enum raises `msgspec.ValidationError`). The enums are the schemas' own.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from typing import Any

import msgspec


class ScalingAction(StrEnum):
    """The schema's `ScalingAction`."""

    PROVISION_TASK_MANAGERS = "PROVISION_TASK_MANAGERS"
    RELEASE_TASK_MANAGERS = "RELEASE_TASK_MANAGERS"
    RAISE_COOLDOWN = "RAISE_COOLDOWN"
    SET_PARALLELISM = "SET_PARALLELISM"


class OutcomeStatus(StrEnum):
    """The schema's `OutcomeStatus`."""

    APPLIED = "APPLIED"
    REJECTED = "REJECTED"
    """The command cannot be applied as it stands (a bad amount, a job that is not there)."""
    FAILED = "FAILED"
    """Applying it went wrong (Flink refused, did not answer)."""
    SUPERSEDED = "SUPERSEDED"
    """Its basis no longer held when the actuator checked it: not applied (command_outcome.v2)."""


class CommandBasis(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """The facts a planner's command rests on: one rescale record's revision as the
    planner saw it, and how fresh that view was. The actuator checks them against the
    cluster before it acts (actuator/evidence.py)."""

    rescale_uuid: str
    revision: int
    state: str | None = None
    available_slots: int | None = None
    desired_slots: int | None = None
    minimal_required_slots: int | None = None
    post_rescale_slots: int | None = None
    cooldown_millis: int | None = None
    observed_at_millis: int
    decided_at_millis: int
    fresh_as_of_millis: int

    def seen(self) -> str:
        """The basis in a few words, for an outcome's message."""
        slots = f"{self.available_slots} slot(s)" if self.available_slots is not None else "?"
        return (
            f"decided on {slots} ({self.state or 'no state'}, rescale {self.rescale_uuid[:8]} "
            f"revision {self.revision})"
        )


class ExpectedBounds(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A vertex's FLIP-291 bounds as a decision saw them (`ScalingCommand.expected_requirements`)."""

    lower_bound: int
    upper_bound: int


class ScalingCommand(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """`scalefold.commands.ScalingCommand` (v4)."""

    command_id: str
    job_id: str
    action: ScalingAction
    amount: int
    reason: str
    evidence: tuple[str, ...] = ()
    issued_at_millis: int
    parallelism: dict[str, int] = msgspec.field(default_factory=dict)
    basis: CommandBasis | None = None
    expected_requirements: dict[str, ExpectedBounds] | None = None
    """SET_PARALLELISM: the requirements the decision rests on, by vertex id (v4); the
    actuator applies it only while Flink still has exactly these. None: unchecked."""

    def to_record(self) -> dict[str, Any]:
        """The Avro datum (camelCase fields, the action as its symbol)."""
        record: dict[str, Any] = msgspec.to_builtins(self)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ScalingCommand:
        """A decoded datum (any version: older ones read as v4 with the defaults)."""
        return msgspec.convert(dict(record), cls)


class CommandOutcome(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """`scalefold.commands.CommandOutcome` (v2)."""

    command_id: str
    job_id: str
    action: str
    status: OutcomeStatus
    message: str = ""
    backend: str
    completed_at_millis: int
    details: dict[str, str] = msgspec.field(default_factory=dict)

    def to_record(self) -> dict[str, Any]:
        record: dict[str, Any] = msgspec.to_builtins(self)
        return record

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> CommandOutcome:
        return msgspec.convert(dict(record), cls)
