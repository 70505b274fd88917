"""`scalefold local up --secure --flink`, as a user runs it: Flink's REST endpoint over TLS
with the stack's own CA, and the bridge forwarding a real rescale from it onto the
secured broker as its own user (SASL_SSL, ACLs, a Kafka transaction).

One stack in a temporary run directory: the secured broker and a real Flink 2.3.0 (a
JobManager, three TaskManagers: the sample job's two slot-sharing groups take two slots
at parallelism 1, the rescale of one of them to 2 a third); the bridge started as `local up` starts it. `scalefold
flink submit` and `flink requirements` (PUT /resource-requirements: the rescale) talk to
the TLS endpoint; an unverified certificate is refused in one line (the bridge, Flink's
client); then every file of the run, Flink's logs included, is searched for every
password of the stack.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec
from services.contracts.flinkrest import FlinkRest
from services.contracts.settings import Settings
from services.localstack import secure, stack
from services.localstack.broker import LocalBroker
from services.localstack.tls import make_ca
from tests.flink.flink_support import wait_for
from tests.integration.scheduler_support import ROOT
from tests.kafka_support import Received, consume
from tests.patience import patient

SUM = "Sum -> Discard: Writer"  # its own vertex at parallelism 1 (the source chains Bucket)


def clean_env() -> dict[str, str]:
    """This process's environment without the plaintext broker `local run` points us at
    (the cache directory and the patience stay)."""
    drop = {*secure.PLAINTEXT_ENV, "SCALEFOLD_BOOTSTRAP_SERVERS", "SCALEFOLD_TOPIC_PREFIX"}
    return {k: v for k, v in os.environ.items() if k not in drop}


def scalefold(exports: str, *args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    """`scalefold ARGS` in a shell that ran what `local up --secure` printed."""
    script = f"{exports}\nexec {shlex.join([sys.executable, '-m', 'services.cli', *args])}"
    return subprocess.run(
        ["bash", "-c", script],
        env=clean_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=patient(timeout),
        check=False,
    )


def secrets_of(run_dir: Path) -> list[str]:
    """Every password of the run: the users', the broker's and Flink's keystores'."""
    return sorted({p.read_text().strip() for p in (run_dir / "secure").glob("*.password")})


def files_written(run_dir: Path) -> list[Path]:
    """Every file of the run but the secrets' own and the two configurations that must
    hold a keystore's password (the broker's, Flink's: neither reads it from elsewhere)."""
    holders = {run_dir / "server.properties", run_dir / "flink" / "conf" / "config.yaml"}
    return [
        path
        for path in run_dir.rglob("*")
        if path.is_file() and path.relative_to(run_dir).parts[0] != "secure" and path not in holders
    ]


RAISED = frozenset({"UPDATE_REQUIREMENT", "NEW_RESOURCE_AVAILABLE"})
"""The causes of the rescale the raised requirements bring: UPDATE_REQUIREMENT, or, when
the change comes within the first rescale's cooldown (a quiet machine gets there in
time), Flink records that one IGNORED and rescales when the cooldown ends as
NEW_RESOURCE_AVAILABLE (seen on 2026-12-04)."""


def rescaled(codec: Codec, jid: str) -> Any:
    def done(received: list[Received]) -> bool:
        return any(
            record["jobId"] == jid
            and record["triggerCause"] in RAISED
            and record["terminalState"] == "COMPLETED"
            for record in (codec.decode(m.value).record for m in received)
        )

    return done


def sampled_job(codec: Codec, jid: str) -> Any:
    def done(received: list[Received]) -> bool:
        return any(codec.decode(m.value).record["jobId"] == jid for m in received)

    return done


def test_secured_stack_with_flink_serves_tls_forwards_a_rescale_and_logs_no_password(
    tmp_path: Path, codec: Codec
) -> None:
    run_dir = tmp_path / "stack"
    where = ("--run-dir", str(run_dir))
    up = scalefold("", "local", "up", "--secure", "--broker-only", "--flink", "--flink-taskmanagers", "3", "--fresh", *where)  # fmt: skip
    bridge = None
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        exports = up.stdout
        url = (run_dir / "flink" / "rest.url").read_text().strip()
        ca = run_dir / "secure" / "ca.pem"
        assert url.startswith("https://127.0.0.1:")
        assert (run_dir / "flink" / "conf" / "config.yaml").stat().st_mode & 0o777 == 0o600
        assert f"rest     {url}" in scalefold(exports, "local", "status", *where).stdout

        # A client that does not trust the stack's CA is refused; with it, Flink answers.
        with pytest.raises(urllib.error.URLError, match="CERTIFICATE_VERIFY_FAILED"):
            urllib.request.urlopen(f"{url}/overview", timeout=10)
        rest = FlinkRest(url, 30.0, ca=ca)
        assert rest.overview()["taskmanagers"] == 3
        config = json.dumps(rest.get_json("/jobmanager/config"))
        assert "security.ssl.rest.keystore-password" in config  # shown, but masked:
        assert not any(secret in config for secret in secrets_of(run_dir))

        submitted = scalefold(exports, "flink", "submit", *where, "--max-parallelism", "2", "--parallelism", "1")  # fmt: skip
        assert submitted.returncode == 0, submitted.stderr
        jid = submitted.stdout.strip()
        wait_for(f"job {jid} running", lambda: rest.job(jid)["state"] == "RUNNING", 180)

        # the bridge as `local up` starts it: its own user, the stack's CA for Flink
        tls = LocalBroker(run_dir, [], secure=True).tls
        bridge = stack.bridge_process(run_dir, url, *stack.flink_ca(tls), "--poll-interval", "1")
        running = LocalBroker(run_dir, [], secure=True).status()
        assert running is not None
        bootstrap = running.bootstrap
        settings = Settings(bootstrap_servers=bootstrap)
        stack.start(bridge, settings, secure.client_env(tls, "bridge"))
        stack.wait_ready(bridge)

        changed = scalefold(exports, "flink", "requirements", *where, "--job", jid, f"{SUM}=1:2")  # fmt: skip
        assert changed.returncode == 0, changed.stderr
        cli = Settings(bootstrap_servers=bootstrap, security=secure.client_security(tls, "cli"))
        group = cli.topics.own("cli")
        forwarded = consume(cli, cli.topics.flink_rescales, rescaled(codec, jid), 180, group)
        seen = [codec.decode(m.value).record for m in forwarded]
        assert rescaled(codec, jid)(forwarded), [
            (r["triggerCause"], r["terminalState"]) for r in seen
        ]
        # its workload samples too, under its own user's rights (the ACLs of `ACCESS`)
        sampled = consume(cli, cli.topics.flink_signals, sampled_job(codec, jid), 60, f"{group}-s")
        assert sampled_job(codec, jid)(sampled)

        # Not trusted: the bridge (before Kafka) and Flink's client say so in one line.
        other_ca, _ = make_ca(tmp_path / "other", "someone else's CA")
        refused = scalefold(exports, "bridge", "run", "--flink-rest", f"x={url}", "--flink-ca", str(other_ca), timeout=60)  # fmt: skip
        assert refused.returncode == 77, refused.stderr
        assert "certificate verify failed" in refused.stderr.strip().splitlines()[-1]
        untrusted = scalefold(exports, "flink", "jobs", "--rest", url, timeout=60)
        assert untrusted.returncode == 1
        assert untrusted.stderr.count("\n") == 1 and "TLS failed" in untrusted.stderr
        assert jid in scalefold(exports, "flink", "jobs", "--rest", url, "--ca", str(ca)).stdout
    finally:
        if bridge is not None:
            bridge.stop()
        down = scalefold("", "local", "down", *where, timeout=180)
    assert down.returncode == 0, down.stderr
    # Flink logs its configuration at start: the keys are there, their values masked.
    log = (run_dir / "flink" / "jobmanager.log").read_text()
    assert "security.ssl.rest.keystore-password, ******" in log
    secrets = secrets_of(run_dir)
    assert len(secrets) >= 8  # five users, the broker's and two HTTPS servers' keystores
    config = (run_dir / "flink" / "conf" / "config.yaml").read_text()
    assert any(secret in config for secret in secrets)  # the search finds one where it is
    for path in files_written(run_dir):
        content = path.read_bytes()
        assert not any(secret.encode() in content for secret in secrets), f"a password in {path}"
    for output in (up, submitted, changed, refused, untrusted):
        assert not any(secret in output.stdout + output.stderr for secret in secrets)
