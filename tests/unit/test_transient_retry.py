"""Transient broker errors are retried, anything else is raised at once."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, KafkaException

from services.contracts.access import KafkaUnreachableError
from services.contracts.kafka import is_transient, retry_transient


def _error(code: int) -> KafkaException:
    return KafkaException(KafkaError(code, "from the test"))


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.NOT_LEADER_FOR_PARTITION,  # the actuator's start-up failure, 1 in 3 runs
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH,  # ensure_topics on a fresh broker, seen once
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._DESTROY_BROKER,  # the actuator's end-offset request, CI 2026-11-27 (chaos)
    ],
)
def test_leader_elections_and_broker_restarts_are_transient(code: int) -> None:
    assert is_transient(_error(code))


@pytest.mark.parametrize(
    "error",
    [
        _error(KafkaError.TOPIC_AUTHORIZATION_FAILED),
        _error(KafkaError.SASL_AUTHENTICATION_FAILED),
        ValueError("not Kafka"),
    ],
)
def test_other_errors_are_not(error: BaseException) -> None:
    assert not is_transient(error)


def test_a_transient_error_is_retried_until_the_call_succeeds() -> None:
    calls = []

    def flaky() -> int:
        calls.append(1)
        if len(calls) < 3:
            raise _error(KafkaError.NOT_LEADER_FOR_PARTITION)
        return 42

    assert retry_transient(flaky, "a flaky call", timeout=10) == 42
    assert len(calls) == 3


def test_a_permanent_error_is_raised_at_once() -> None:
    calls = []

    def denied() -> int:
        calls.append(1)
        raise _error(KafkaError.TOPIC_AUTHORIZATION_FAILED)

    with pytest.raises(KafkaException):
        retry_transient(denied, "a denied call", timeout=10)
    assert len(calls) == 1


def test_transient_errors_that_outlast_the_timeout_end_in_one_line_and_status_69() -> None:
    calls = []

    def never() -> int:
        calls.append(1)
        raise _error(KafkaError.LEADER_NOT_AVAILABLE)

    with pytest.raises(KafkaUnreachableError) as raised:
        retry_transient(never, "the end offset of job-events[3]", timeout=0.3)
    assert len(calls) > 1
    assert str(raised.value) == (
        "gave up on the end offset of job-events[3] after 0.3 s of transient errors, "
        "the last LEADER_NOT_AVAILABLE: from the test"
    )
    assert raised.value.exit_code == 69  # what the entry point exits with, after that line
    assert isinstance(raised.value.__cause__, KafkaException)
