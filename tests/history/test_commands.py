"""The commands topic as the ledger of issued commands, against the real broker (no Spark)."""

from __future__ import annotations

import pytest

from services.contracts import Codec, Settings
from services.contracts.commands import ScalingAction, ScalingCommand
from services.history.commands import CommandSender, read_issued
from tests.history.support import read_topic
from tests.kafka_support import produce

pytestmark = pytest.mark.integration


def _command(n: int, job: str = "job") -> ScalingCommand:
    return ScalingCommand(
        command_id=f"provision-{n:032x}",
        job_id=job,
        action=ScalingAction.PROVISION_TASK_MANAGERS,
        amount=n,
        reason=f"test {n}.",
        evidence=(f"r-{n}",),
        issued_at_millis=1_700_000_000_000 + n,
    )


def test_each_command_id_is_sent_once_also_by_a_new_sender(kafka: Settings, codec: Codec) -> None:
    assert len(read_issued(kafka, codec)) == 0
    sender = CommandSender(kafka, codec, read_issued(kafka, codec))
    assert [c.amount for c in sender.send([_command(1), _command(2, job="other")])] == [1, 2]
    assert sender.send([_command(1), _command(2, job="other")]) == []

    produce(kafka, kafka.topics.commands, [(b"job", b"not a command")])  # skipped, not fatal
    restarted = CommandSender(kafka, codec, read_issued(kafka, codec))
    assert restarted.issued.by_job == {
        "job": {_command(1).command_id},
        "other": {_command(2).command_id},
    }
    assert [c.amount for c in restarted.send([_command(1), _command(3)])] == [3]

    on_topic = read_topic(kafka, kafka.topics.commands)
    decoded = [codec.decode(m.value).record for m in on_topic if m.value != b"not a command"]
    assert sorted(c["amount"] for c in decoded) == [1, 2, 3]
    assert {m.key for m in on_topic} == {b"job", b"other"}  # keyed by job id
