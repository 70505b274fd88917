"""The secured broker's material for containers (services/localstack/material.py): one
directory per holder, each with only its own secret; kept on a second run. Real openssl."""

from __future__ import annotations

import subprocess
from pathlib import Path

from services.localstack.material import make, subject_names
from services.localstack.secure import USERS


def test_each_holder_gets_the_ca_and_its_own_secret_only(tmp_path: Path) -> None:
    written = make(tmp_path, ["kafka"])
    assert written == ["authority", "broker", *USERS, "flink", "history-api", "ca"]
    authority = tmp_path / "authority"
    for user in USERS:
        files = sorted(p.name for p in (tmp_path / user).iterdir())
        assert files == sorted(["ca.pem", f"{user}.password"])
        assert (tmp_path / user / f"{user}.password").read_text() == (
            authority / f"{user}.password"
        ).read_text()
        assert (tmp_path / user).stat().st_mode & 0o777 == 0o700
        assert (tmp_path / user / f"{user}.password").stat().st_mode & 0o777 == 0o600
    broker = tmp_path / "broker"
    assert sorted(p.name for p in broker.iterdir()) == ["broker.p12", "broker.properties", "ca.pem"]
    keystore_password = (authority / "broker.password").read_text().strip()
    assert (broker / "broker.properties").read_text() == (
        f"ssl.keystore.password={keystore_password}\n"
    )
    assert not (authority / "ca.key").exists()  # nobody can mint another certificate
    # The broker's certificate names the compose hostname and loopback.
    text = subprocess.run(
        ["openssl", "pkcs12", "-in", str(authority / "broker.p12"), "-nokeys", "-clcerts",
         "-passin", f"file:{authority / 'broker.password'}"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    listed = subprocess.run(
        ["openssl", "x509", "-noout", "-ext", "subjectAltName"],
        input=text, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "DNS:kafka" in listed and "IP Address:127.0.0.1" in listed


def test_the_https_servers_get_their_own_key_and_the_ca_only(tmp_path: Path) -> None:
    """The JobManager's REST endpoint (a PKCS#12 keystore and a truststore of the CA, as
    Flink reads them) and the history's REST API (PEM), signed for the compose names."""
    make(tmp_path, ["kafka", "jobmanager", "history-api"])
    flink, history = tmp_path / "flink", tmp_path / "history-api"
    assert sorted(p.name for p in flink.iterdir()) == [
        "ca.pem", "flink-rest-truststore.p12", "flink-rest.p12", "flink-rest.password",
    ]  # fmt: skip
    assert sorted(p.name for p in history.iterdir()) == [
        "ca.pem", "history-rest.key", "history-rest.pem",
    ]  # fmt: skip
    assert [p.name for p in (tmp_path / "ca").iterdir()] == ["ca.pem"]
    assert all(p.stat().st_mode & 0o777 == 0o600 for p in [*flink.iterdir(), *history.iterdir()])
    # Verified against the CA alone, for the names the compose network gives them.
    for name in ("jobmanager", "history-api"):
        done = subprocess.run(
            ["openssl", "verify", "-CAfile", str(history / "ca.pem"),
             "-verify_hostname", name, str(history / "history-rest.pem")],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
    password = (flink / "flink-rest.password").read_text().strip()
    trusted = subprocess.run(
        ["keytool", "-list", "-keystore", str(flink / "flink-rest-truststore.p12"),
         "-storetype", "PKCS12", "-storepass", password],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert "trustedCertEntry" in trusted


def test_a_second_run_keeps_the_certificates_and_passwords(tmp_path: Path) -> None:
    make(tmp_path, ["kafka"])
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    make(tmp_path, ["kafka"])
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_subject_names_hold_the_hostnames_localhost_and_loopback() -> None:
    assert subject_names(["kafka", "kafka-2"]) == (
        "DNS:kafka,DNS:kafka-2,DNS:localhost,IP:127.0.0.1"
    )
