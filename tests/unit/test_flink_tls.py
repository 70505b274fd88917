"""TLS on the secured stack's HTTP endpoints, without a broker or a Flink: the certificates
the CA signs (real openssl), Flink's `security.ssl.rest.*` as configured, the history's
REST API over HTTPS, and the shared Flink REST client verifying it (or refusing it, in
one line) against the stack's CA; the bridge's transactional-id ACL; `--flink-ca`."""

from __future__ import annotations

import argparse
import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from services.actuator.flinkbackend import FlinkBackend
from services.actuator.flinkworker import check
from services.contracts.commands import ScalingAction, ScalingCommand
from services.contracts.flinkrest import FlinkRest, FlinkTlsError, ca_arg, ca_for
from services.contracts.settings import Secret
from services.contracts.topics import Topics
from services.history.restapi.server import make_server, url_of
from services.localstack.flinkconf import FlinkConfig, RestTls, entries, render
from services.localstack.secure import grants
from services.localstack.tls import (
    FLINK_REST,
    HISTORY_REST,
    HTTPS_SERVERS,
    BrokerTls,
    make_broker_tls,
    make_ca,
)
from tests.integration.scheduler_support import ROOT

SSL = "security.ssl.rest"


@pytest.fixture(scope="module")
def material(tmp_path_factory: pytest.TempPathFactory) -> BrokerTls:
    return make_broker_tls(tmp_path_factory.mktemp("secure") / "secure")


@pytest.fixture(scope="module")
def other_ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_ca(tmp_path_factory.mktemp("other"), "someone else's CA")[0]


@pytest.fixture(scope="module")
def https(material: BrokerTls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The history's REST API over TLS (no tables: /jobs lists none), as `history serve
    --rest-cert --rest-key` runs it."""
    server = tls_server(material, tmp_path_factory.mktemp("tables"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield url_of(server)
    server.shutdown()
    server.server_close()


def tls_server(material: BrokerTls, tables: Path) -> ThreadingHTTPServer:
    history = material.server(HISTORY_REST)
    return make_server(tables, "127.0.0.1", 0, tls=(history.certificate, history.key))


def test_each_https_server_has_its_own_key_signed_by_the_ca_and_the_ca_key_is_gone(
    material: BrokerTls,
) -> None:
    assert not (material.directory / "ca.key").exists()
    keys = set()
    for name in HTTPS_SERVERS:
        server = material.server(name)
        assert server.exists()
        assert server.key.stat().st_mode & 0o777 == 0o600
        assert server.keystore.stat().st_mode & 0o777 == 0o600
        shown = subprocess.run(
            ["openssl", "x509", "-noout", "-ext", "subjectAltName,extendedKeyUsage"],
            input=server.certificate.read_text(), capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert "IP Address:127.0.0.1" in shown and "DNS:localhost" in shown
        assert "TLS Web Server Authentication" in shown
        assert "Client Authentication" not in shown  # no server key is a Kafka client's
        verified = subprocess.run(
            ["openssl", "verify", "-CAfile", str(material.ca), str(server.certificate)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert verified.returncode == 0, verified.stderr
        keys.add(server.key.read_bytes())
    assert len(keys) == len(HTTPS_SERVERS)


def test_flink_rest_tls_config_names_the_keystore_and_hides_nothing_in_repr(
    material: BrokerTls,
) -> None:
    server = material.server(FLINK_REST)
    password = server.password()
    tls = RestTls(server.keystore, material.directory / "t.p12", Secret(password), material.ca)
    config = FlinkConfig(21001, 21002, rest_tls=tls)
    keys = entries(config)
    assert keys[f"{SSL}.enabled"] == "true"
    assert keys[f"{SSL}.keystore"] == str(server.keystore)
    assert {keys[f"{SSL}.{k}-password"] for k in ("keystore", "key", "truststore")} == {password}
    assert config.rest_url == "https://127.0.0.1:21001"
    assert f'{SSL}.keystore-password: "{password}"' in render(config).splitlines()
    assert password not in repr(config)
    plain = entries(FlinkConfig(21001, 21002))
    assert not any(key.startswith("security.") for key in plain)
    assert FlinkConfig(21001, 21002).rest_url == "http://127.0.0.1:21001"


def test_the_history_rest_api_serves_https_that_the_stack_ca_verifies(
    https: str, material: BrokerTls
) -> None:
    assert https.startswith("https://127.0.0.1:")
    status, body = FlinkRest(https, 5.0, ca=material.ca).get_raw("/jobs")
    assert status == 200, body
    assert isinstance(json.loads(body), dict | list)


@pytest.mark.parametrize("trust", ["system", "other"])
def test_a_certificate_that_does_not_verify_is_one_line_never_a_downgrade(
    https: str, other_ca: Path, trust: str
) -> None:
    ca = other_ca if trust == "other" else None
    with pytest.raises(FlinkTlsError) as raised:
        FlinkRest(https, 5.0, ca=ca).overview()
    line = str(raised.value)
    assert "\n" not in line
    assert "TLS failed: certificate verify failed" in line
    assert (str(other_ca) if ca else "the system's CAs") in line


def test_an_https_url_to_a_plain_http_server_is_a_tls_failure(
    material: BrokerTls, tmp_path: Path
) -> None:
    server = make_server(tmp_path, "127.0.0.1", 0)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        plain = url_of(server)
        assert FlinkRest(plain, 5.0).get_raw("/jobs")[0] == 200
        with pytest.raises(FlinkTlsError, match="TLS failed: TLS error"):
            FlinkRest(plain.replace("http:", "https:"), 5.0, ca=material.ca).overview()
    finally:
        server.shutdown()
        server.server_close()


def test_the_actuator_fails_a_command_on_an_untrusted_flink_with_the_reason(
    https: str, other_ca: Path
) -> None:
    command = ScalingCommand(
        command_id="c1",
        job_id="x.0123",
        action=ScalingAction.SET_PARALLELISM,
        amount=2,
        reason="test",
        issued_at_millis=0,
    )
    result = FlinkBackend("x", lambda: https, None, ca=lambda: other_ca).apply(command)
    assert result.status == "FAILED"
    assert "not trusted" in result.message and "certificate verify failed" in result.message


def test_the_actuator_says_at_start_whether_flink_is_trusted(
    https: str, material: BrokerTls, other_ca: Path, tmp_path: Path
) -> None:
    """Before any command: one line, the same reason a command's outcome would carry."""
    trusted = check(FlinkBackend("x", lambda: https, None, ca=lambda: material.ca))
    assert trusted == (
        True,
        f"Flink cluster x answers at {https} (TLS, certificate verified against {material.ca})",
    )
    answers, line = check(FlinkBackend("x", lambda: https, None, ca=lambda: other_ca))
    assert not answers and "\n" not in line
    assert line.startswith("Flink cluster x: Flink's REST endpoint was not trusted: ")
    assert "certificate verify failed" in line
    missing = tmp_path / "no-such-ca.pem"
    answers, line = check(FlinkBackend("x", lambda: https, None, ca=lambda: missing))
    assert not answers and line.startswith("Flink cluster x: FileNotFoundError")


def test_the_bridge_exits_77_in_one_line_on_an_untrusted_flink(https: str, other_ca: Path) -> None:
    """Before any Kafka connection: no broker is needed to say it."""
    result = subprocess.run(
        [sys.executable, "-m", "services.cli", "bridge", "run",
         "--flink-rest", f"x={https}", "--flink-ca", f"x={other_ca}"],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
        env={
            **{k: v for k, v in os.environ.items() if not k.startswith("SCALEFOLD_")},
            "SCALEFOLD_BOOTSTRAP_SERVERS": "127.0.0.1:1",
        },
    )  # fmt: skip
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert result.returncode == 77, result.stderr
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("scalefold bridge run: Flink cluster x: https://")
    assert "certificate verify failed" in lines[0]


def test_flink_ca_is_per_cluster_or_for_every_cluster(tmp_path: Path) -> None:
    one, every = tmp_path / "one.pem", tmp_path / "every.pem"
    one.write_text("x")
    every.write_text("x")
    cas = [ca_arg(f"local={one}"), ca_arg(str(every))]
    assert cas == [("local", one), (None, every)]
    assert (ca_for("local", cas), ca_for("other", cas), ca_for("x", [])) == (one, every, None)
    with pytest.raises(argparse.ArgumentTypeError, match="no CA file"):
        ca_arg(str(tmp_path / "missing.pem"))


def test_the_bridge_may_use_its_own_transactional_ids_only() -> None:
    planned = [g for g in grants(Topics("p.")) if g.resource == "TRANSACTIONAL_ID"]
    assert [(g.principal, g.pattern, g.name, g.operation) for g in planned] == [
        ("User:bridge", "PREFIXED", "p.bridge", "WRITE")
    ]


def test_a_server_context_loads_the_pem_pair(material: BrokerTls) -> None:
    """What `make_server` does with --rest-cert/--rest-key; a wrong pair fails at start."""
    history, flink = material.server(HISTORY_REST), material.server(FLINK_REST)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(history.certificate, history.key)
    with pytest.raises(ssl.SSLError):
        context.load_cert_chain(history.certificate, flink.key)
