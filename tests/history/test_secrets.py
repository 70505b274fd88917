"""Spark prints a Kafka source's options unredacted in its parsed plan; the history
service's options therefore hold no password, only a reference to a private file."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from services.contracts.settings import Settings
from services.history.job import secrets_file
from services.history.queries import kafka_source

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

PASSWORD = "s3cret-Passw0rd"
SASL = Settings.from_env(
    {
        "SCALEFOLD_BOOTSTRAP_SERVERS": "127.0.0.1:9",
        "SCALEFOLD_SECURITY_PROTOCOL": "SASL_SSL",
        "SCALEFOLD_SASL_MECHANISM": "SCRAM-SHA-512",
        "SCALEFOLD_SASL_USERNAME": "history",
        "SCALEFOLD_SASL_PASSWORD": PASSWORD,
        "SCALEFOLD_SSL_CA_LOCATION": "/nonexistent/ca.pem",
    }
)


def test_the_parsed_plan_shows_a_jaas_option_in_clear(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    """Why there is a secrets file: an inline JAAS option is printed as it is."""
    jaas = f'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="{PASSWORD}";'
    frame = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", "127.0.0.1:9")
        .option("kafka.sasl.jaas.config", jaas)
        .option("subscribe", "t")
        .load()
    )
    frame.explain(True)
    assert PASSWORD in capsys.readouterr().out


def test_the_history_source_plan_holds_no_password(
    spark: SparkSession, capsys: pytest.CaptureFixture[str]
) -> None:
    with secrets_file(SASL) as secrets:
        assert secrets is not None
        assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
        assert stat.S_IMODE(secrets.parent.stat().st_mode) == 0o700
        assert PASSWORD in secrets.read_text()
        frame = kafka_source(spark, SASL, (SASL.topics.rescales,), secrets=secrets)
        frame.explain(True)
        plan = capsys.readouterr().out
        assert "StreamingRelation" in plan and f"${{file:{secrets}:sasl.jaas.config}}" in plan
        assert PASSWORD not in plan
        assert PASSWORD not in str(spark.sparkContext.getConf().getAll())
    assert not secrets.exists() and not secrets.parent.exists()


def test_plaintext_needs_no_secrets_file() -> None:
    with secrets_file(Settings()) as secrets:
        assert secrets is None


def test_the_secrets_file_goes_under_the_directory_asked_for(tmp_path: Path) -> None:
    """`history run --secrets-dir`: on a Spark cluster, a directory every worker sees."""
    with secrets_file(SASL, tmp_path) as secrets:
        assert secrets is not None and secrets.parent.parent == tmp_path
        assert stat.S_IMODE(secrets.parent.stat().st_mode) == 0o700
        assert stat.S_IMODE(secrets.stat().st_mode) == 0o600
        assert PASSWORD in secrets.read_text()
    assert list(tmp_path.iterdir()) == []
