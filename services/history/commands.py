"""Sending the planner's commands to Kafka, each `commandId` once, across restarts.

The commands topic is its own ledger: at start the history service reads it
from the beginning and remembers every id it finds (per job); afterwards it
adds an id only once the broker has acknowledged it (idempotent producer,
acks=all). A restarted service therefore never re-sends a command, and a
command whose delivery failed is tried again on the next planner tick. While
the broker is away a command stays in flight (no local timeout) and is not
sent again; it counts as issued once the broker acknowledges it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from services.contracts import Codec, DecodeError, Settings
from services.contracts import records as r
from services.contracts.access import raise_refusal
from services.contracts.commands import ScalingCommand
from services.contracts.kafka import TopicReadError, librdkafka_config, read_to_end

log = logging.getLogger(__name__)


class CommandSendError(RuntimeError):
    """The broker did not acknowledge a command; it was not counted as issued."""


@dataclass
class IssuedCommands:
    """The command ids already on the commands topic, by job."""

    by_job: dict[str, set[str]] = field(default_factory=dict)

    def __contains__(self, command: ScalingCommand) -> bool:
        return command.command_id in self.by_job.get(command.job_id, set())

    def add(self, job_id: str, command_id: str) -> None:
        self.by_job.setdefault(job_id, set()).add(command_id)

    def __len__(self) -> int:
        return sum(len(ids) for ids in self.by_job.values())


def read_issued(settings: Settings, codec: Codec, timeout: float = 30.0) -> IssuedCommands:
    """Every command on the commands topic, read from the beginning to its current end."""
    topic = settings.topics.commands
    issued = IssuedCommands()
    try:
        group = f"{settings.topics.own('history')}-ledger"
        for message in read_to_end(settings, topic, group, timeout=timeout):
            _remember(issued, codec, message.value(), topic)
    except TopicReadError as error:
        raise CommandSendError(str(error)) from None
    return issued


def _remember(issued: IssuedCommands, codec: Codec, value: bytes | None, topic: str) -> None:
    try:
        record = codec.decode(value or b"", expected=frozenset({r.SCALING_COMMAND})).record
    except DecodeError as error:
        log.warning("skipping an undecodable message on %s: %s", topic, error)
        return
    issued.add(record["jobId"], record["commandId"])


class CommandSender:
    """An idempotent producer of `ScalingCommand`s that skips ids already issued or in flight."""

    def __init__(self, settings: Settings, codec: Codec, issued: IssuedCommands) -> None:
        from confluent_kafka import Producer

        self._topic = settings.topics.commands
        self._settings = settings
        self._codec = codec
        self.issued = issued
        self.in_flight: set[str] = set()
        self._producer = Producer(
            librdkafka_config(
                settings,
                **{"enable.idempotence": True, "acks": "all", "message.timeout.ms": 0},
            )
        )

    def send(
        self, commands: Iterable[ScalingCommand], timeout: float = 30.0
    ) -> list[ScalingCommand]:
        """Send the commands not issued yet; return those the broker acknowledged."""
        fresh = [c for c in commands if c not in self.issued and c.command_id not in self.in_flight]
        delivered: list[ScalingCommand] = []
        failures: list[str] = []

        def on_delivery(command: ScalingCommand) -> Any:
            def callback(error: Any, _message: Any) -> None:
                self.in_flight.discard(command.command_id)
                if error is None:
                    self.issued.add(command.job_id, command.command_id)
                    delivered.append(command)
                else:  # a refusal (a missing ACL) is no failure the next tick could mend
                    raise_refusal(error, self._settings, f"write to {self._topic}")
                    failures.append(f"{command.command_id}: {error}")

            return callback

        for command in fresh:
            value = self._codec.encode(r.SCALING_COMMAND, command.to_record())
            key = command.job_id.encode()
            self.in_flight.add(command.command_id)
            self._producer.produce(
                self._topic, key=key, value=value, on_delivery=on_delivery(command)
            )
        remaining = self._producer.flush(timeout)
        if failures or remaining:
            raise CommandSendError(
                f"{len(failures) + remaining} of {len(fresh)} commands not acknowledged: "
                + "; ".join(failures or ["still waiting for the broker"])
            )
        return delivered
