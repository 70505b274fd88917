"""Settings are read once, validated, and never leak secrets."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from services.contracts.kafka import (
    SparkSecretsError,
    librdkafka_config,
    redacted,
    spark_kafka_options,
    spark_secrets,
)
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
    spark = spark_kafka_options(settings, Path("/run/kafka.properties"))
    assert spark["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert spark["kafka.ssl.truststore.location"] == "/etc/ca.pem"
    assert "ScramLoginModule" in spark_secrets(settings)


def test_spark_options_hold_no_password_only_a_reference_to_the_secrets_file() -> None:
    settings = Settings.from_env(SASL_ENV)
    spark = spark_kafka_options(settings, Path("/run/kafka.properties"))
    assert spark["kafka.sasl.jaas.config"] == "${file:/run/kafka.properties:sasl.jaas.config}"
    assert spark["kafka.config.providers.file.class"].endswith("FileConfigProvider")
    assert not any("hunter2" in value for value in spark.values())
    with pytest.raises(SparkSecretsError):
        spark_kafka_options(settings)  # never inline


def test_spark_secrets_escape_for_jaas_and_java_properties() -> None:
    """Java's Properties then JAAS's StreamTokenizer read this back as the password
    a"b\\c<newline>d (checked once by hand with kafka-clients 3.9's FileConfigProvider
    and JaasContext): each layer's backslash escapes, and no raw line break."""
    env = {**SASL_ENV, "SCALEFOLD_SASL_PASSWORD": 'a"b\\c\nd'}
    text = spark_secrets(Settings.from_env(env))
    assert text.count("\n") == 1 and text.endswith("\n")  # one properties line
    assert text.startswith("sasl.jaas.config=org.apache.kafka.common.security.scram.")
    assert text.endswith(r'username="scheduler" password="a\\"b\\\\c\\nd";' + "\n")


def test_plaintext_spark_needs_no_secrets() -> None:
    spark = spark_kafka_options(Settings.from_env({}))
    assert spark == {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "kafka.security.protocol": "PLAINTEXT",
    }


def test_passwords_can_come_from_files(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("from-a-file\n")
    env = {
        **SASL_ENV,
        "SCALEFOLD_SASL_PASSWORD": "",
        "SCALEFOLD_SASL_PASSWORD_FILE": str(tmp_path / "pw"),
    }
    security = Settings.from_env(env).security
    assert security.sasl_password is not None
    assert security.sasl_password.reveal() == "from-a-file"
    both = {**SASL_ENV, "SCALEFOLD_SASL_PASSWORD_FILE": str(tmp_path / "pw")}
    password = Settings.from_env(both).security.sasl_password
    assert password is not None and password.reveal() == "hunter2-very-secret"  # the value wins


def test_an_unreadable_password_file_is_a_clear_error(tmp_path: Path) -> None:
    env = {
        **SASL_ENV,
        "SCALEFOLD_SASL_PASSWORD": "",
        "SCALEFOLD_SASL_PASSWORD_FILE": str(tmp_path / "no"),
    }
    with pytest.raises(
        SettingsError, match=r"cannot read SCALEFOLD_SASL_PASSWORD_FILE .*No such file"
    ):
        Settings.from_env(env)


def test_secrets_never_print(caplog: pytest.LogCaptureFixture) -> None:
    settings = Settings.from_env(SASL_ENV)
    caplog.set_level(logging.INFO)
    logging.getLogger("t").info("settings %s %r", settings, settings)
    logging.getLogger("t").info("config %s", redacted(librdkafka_config(settings)))
    logging.getLogger("t").info("spark %s", spark_kafka_options(settings, Path("/s")))
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
