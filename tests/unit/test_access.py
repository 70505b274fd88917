"""A broker's refusal (authentication, TLS trust, ACLs) is recognised, never retried, and
said in one line that names the cause; the ACL plan gives each client only its own topics."""

from __future__ import annotations

import logging

import pytest
from confluent_kafka import KafkaError, KafkaException

from services.contracts.access import (
    KafkaAccessError,
    on_client_error,
    refusal,
    without_reported_errors,
)
from services.contracts.kafka import is_transient, retry_transient
from services.contracts.preflight import _already_exists, needs
from services.contracts.settings import Secret, Settings
from services.contracts.topics import ACCESS, Topics
from services.localstack.secure import grants

SASL = Settings.from_env(
    {
        "SCALEFOLD_BOOTSTRAP_SERVERS": "127.0.0.1:9093",
        "SCALEFOLD_SECURITY_PROTOCOL": "SASL_SSL",
        "SCALEFOLD_SASL_MECHANISM": "SCRAM-SHA-512",
        "SCALEFOLD_SASL_USERNAME": "cli",
        "SCALEFOLD_SASL_PASSWORD": "hunter2-very-secret",
    }
)
WRONG_PASSWORD = KafkaError(
    KafkaError._AUTHENTICATION,
    "sasl_ssl://127.0.0.1:9093/bootstrap: SASL authentication error: Authentication failed "
    "during authentication due to invalid credentials with SASL mechanism SCRAM-SHA-512",
)
UNTRUSTED = KafkaError(
    KafkaError._TRANSPORT,
    "sasl_ssl://127.0.0.1:9093/bootstrap: error:0A000086:SSL routines::certificate verify failed",
)
NO_ACL = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Broker: Topic authorization failed")


@pytest.mark.parametrize(
    ("error", "cause", "hint"),
    [
        (WRONG_PASSWORD, "authentication failed", "SCALEFOLD_SASL_PASSWORD"),
        (UNTRUSTED, "TLS failed", "SCALEFOLD_SSL_CA_LOCATION"),
        (KafkaError(KafkaError._SSL, "SSL handshake failed"), "TLS failed", "SSL_CA_LOCATION"),
        (NO_ACL, "not authorized for a topic", "ACLs do not allow it"),
        (
            KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "Group authorization failed"),
            "not authorized for a consumer group",
            "ACLs",
        ),
    ],
)
def test_a_refusal_names_its_cause_the_user_and_what_to_check(
    error: KafkaError, cause: str, hint: str
) -> None:
    problem = refusal(error, SASL, "read scalefold.rescales")
    assert problem is not None
    message = str(problem)
    assert message.startswith("Kafka refused user 'cli' at 127.0.0.1:9093 (SASL_SSL)")
    assert "to read scalefold.rescales" in message
    assert cause in message and hint in message
    assert "\n" not in message
    assert "hunter2" not in message


def test_other_errors_are_not_refusals() -> None:
    for code in (
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError.LEADER_NOT_AVAILABLE,
    ):
        assert refusal(KafkaError(code, "Disconnected"), SASL) is None
    assert refusal("not a KafkaError", SASL) is None


def test_a_refusal_is_never_transient_so_never_retried() -> None:
    calls = []

    def refused() -> None:
        calls.append(1)
        raise KafkaException(NO_ACL)

    assert not is_transient(KafkaException(NO_ACL))
    assert not is_transient(KafkaException(WRONG_PASSWORD))
    assert not is_transient(KafkaAccessError("refused"))
    with pytest.raises(KafkaException):
        retry_transient(refused, "a refused call", timeout=30)
    assert calls == [1]


def test_the_error_callback_raises_the_first_refusal_and_then_keeps_quiet(
    caplog: pytest.LogCaptureFixture,
) -> None:
    callback = on_client_error(SASL)
    callback(KafkaError(KafkaError._TRANSPORT, "Connection refused"))  # logged, not raised
    assert "Connection refused" in caplog.text
    with pytest.raises(KafkaAccessError, match="authentication failed"):
        callback(WRONG_PASSWORD)
    caplog.clear()
    callback(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    callback(WRONG_PASSWORD)  # the client is done for; no second error line
    assert caplog.text == ""


def test_each_client_needs_its_own_topics_and_group() -> None:
    topics = Topics("p.")
    scheduler = {(n.resource, n.name): n.operations for n in needs(topics, "scheduler")}
    assert scheduler == {
        ("topic", "p.job-events"): ("READ", "WRITE"),
        ("topic", "p.job-snapshots"): ("WRITE",),
        ("topic", "p.rescales"): ("WRITE",),
        ("topic", "p.decisions"): ("WRITE",),
        ("topic", "p.dead-letters"): ("WRITE",),
        ("group", "p.scheduler"): ("READ",),
    }


def test_acls_give_each_user_only_what_it_needs() -> None:
    topics = Topics("p.")
    planned = grants(topics)
    for user, access in ACCESS.items():
        mine = [g for g in planned if g.principal == f"User:{user}"]
        read = {g.name for g in mine if g.resource == "TOPIC" and g.operation == "READ"}
        written = {g.name for g in mine if g.resource == "TOPIC" and g.operation == "WRITE"}
        assert read - {topics.own(user) + "-"} == {topics.name(s) for s in access.reads}
        assert written - {topics.own(user) + "-"} == {topics.name(s) for s in access.writes}
        groups = [(g.pattern, g.name) for g in mine if g.resource == "GROUP"]
        assert groups == [("PREFIXED", f"p.{user}")]
    prefixed = [g for g in planned if g.pattern == "PREFIXED" and g.resource == "TOPIC"]
    assert {(g.principal, g.name) for g in prefixed} == {("User:scheduler", "p.scheduler-")}
    for operation in ("CREATE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"):  # topics --create --apply
        allowed = {(g.principal, g.name) for g in planned if g.operation == operation}
        assert allowed == {("User:cli", name) for name in topics.all()} | (
            {("User:scheduler", "p.scheduler-")} if operation == "CREATE" else set()
        )
    assert not any(g.name in {"p.", "*"} for g in planned)


def test_the_cli_may_write_only_job_events() -> None:
    written = {
        g.name for g in grants(Topics("p.")) if g.principal == "User:cli" and g.operation == "WRITE"
    }
    assert written == {"p.job-events"}


def test_a_secret_in_settings_never_prints() -> None:
    assert "hunter2" not in repr(SASL) + str(SASL)
    assert str(Secret("hunter2")) == "***"


def test_librdkafkas_own_error_lines_are_dropped_its_warnings_kept() -> None:
    def record(level: int) -> logging.LogRecord:
        return logging.LogRecord("librdkafka", level, "", 0, "FAIL ...", None, None)

    assert not without_reported_errors(record(logging.ERROR))
    assert without_reported_errors(record(logging.WARNING))


def test_a_private_topic_another_worker_just_made_is_not_a_refusal() -> None:
    # Two schedulers started at once: one creates its Faust changelogs between the
    # other's listing of the topics and its validate-only creation of them.
    made = KafkaException(KafkaError(KafkaError.TOPIC_ALREADY_EXISTS, "exists"))
    refused = KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "no"))
    assert _already_exists(made)
    assert not _already_exists(refused)
    assert not _already_exists(RuntimeError("other"))
