"""Settings are read once, validated, and never leak secrets."""

from __future__ import annotations

import logging

import pytest

from services.contracts.kafka import librdkafka_config, redacted, spark_kafka_options
from services.contracts.settings import Secret, Settings, SettingsError

SASL_ENV = {
    "SCALEFOLD_BOOTSTRAP_SERVERS": "kafka-1:9093,kafka-2:9093",
    "SCALEFOLD_TOPIC_PREFIX": "prod.",
    "SCALEFOLD_SECURITY_PROTOCOL": "sasl_ssl",
    "SCALEFOLD_SASL_MECHANISM": "SCRAM-SHA-512",
    "SCALEFOLD_SASL_USERNAME": "scheduler",
    "SCALEFOLD_SASL_PASSWORD": "hunter2-very-secret",
    "SCALEFOLD_SSL_CA_LOCATION": "/etc/ca.pem",
}


def test_defaults_point_at_loopback() -> None:
    settings = Settings.from_env({})
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert settings.topics.job_events == "scalefold.job-events"


def test_fallback_applies_only_without_the_variable() -> None:
    assert Settings.from_env({}, bootstrap_fallback="127.0.0.1:5").bootstrap_servers.endswith(":5")
    env = {"SCALEFOLD_BOOTSTRAP_SERVERS": "b:1"}
    assert Settings.from_env(env, bootstrap_fallback="x:5").bootstrap_servers == "b:1"


def test_sasl_settings_pass_through_to_every_client() -> None:
    settings = Settings.from_env(SASL_ENV)
    config = librdkafka_config(settings)
    assert config["security.protocol"] == "SASL_SSL"
    assert config["sasl.password"] == "hunter2-very-secret"
    assert config["ssl.ca.location"] == "/etc/ca.pem"
    spark = spark_kafka_options(settings)
    assert "ScramLoginModule" in spark["kafka.sasl.jaas.config"]
    assert spark["kafka.ssl.truststore.location"] == "/etc/ca.pem"


def test_secrets_never_print(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.from_env(SASL_ENV)
    caplog.set_level(logging.INFO)
    logging.getLogger("t").info("settings %s %r", settings, settings)
    logging.getLogger("t").info("config %s", redacted(librdkafka_config(settings)))
    logging.getLogger("t").info("spark %s", redacted(spark_kafka_options(settings)))
    assert "hunter2" not in caplog.text
    assert "***" in caplog.text
    assert str(Secret("x")) == "***"


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"SCALEFOLD_SECURITY_PROTOCOL": "TLS"}, "not one of PLAINTEXT"),
        ({"SCALEFOLD_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}, "SASL mechanism None"),
        (
            {"SCALEFOLD_SECURITY_PROTOCOL": "SASL_PLAINTEXT", "SCALEFOLD_SASL_MECHANISM": "PLAIN"},
            "needs a SASL username and password",
        ),
    ],
)
def test_invalid_security_settings_are_clear_errors(env: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        Settings.from_env(env)


def test_overrides_ignore_unset_flags() -> None:
    settings = Settings.from_env({}).with_overrides(bootstrap_servers=None, topic_prefix="x.")
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert settings.topics.rescales == "x.rescales"
