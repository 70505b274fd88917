"""The whole loop on a secured broker: TLS, a SCRAM-SHA-512 user per service, ACLs.

One broker for the module, started as a user would: `scalefold local up --secure
--broker-only`, whose printed settings the CLI commands here run with, as written.
Then the closed loop of test_closed_loop.py, every service as its own user with
only its own rights (the history service's password full of characters that
need escaping on their way to Spark's JAAS line); then every file the run
wrote is searched for every password. Then the refusals: a wrong password, an
untrusted CA, a missing ACL, each one line naming the cause and exit code 77,
within the hang guard (well below librdkafka's own 30 s timeouts).
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from services.actuator.control import post
from services.contracts import Codec, Settings
from services.contracts import jobconfig as c
from services.contracts.events import JobSubmitted, VertexSpec, to_record
from services.contracts.kafka import ensure_topics
from services.history.sinklog import committed_files
from services.localstack import ports, secure, stack
from services.localstack.broker import LocalBroker
from services.localstack.tls import make_ca
from tests.integration.scheduler_support import ROOT
from tests.kafka_support import consume
from tests.patience import give_up_at

pytestmark = [pytest.mark.integration, pytest.mark.spark]

JOB = "secure-loop"
QUICK = {
    c.RUNTIME_MODE: "external",
    c.SUBMISSION_STABILIZATION: "1 s",
    c.COOLDOWN: "3 s",
    c.EXECUTING_STABILIZATION: "2 s",
}
# Quotes, a backslash, a shell substitution, a space and a non-ASCII letter: each must
# survive JAAS's and Java properties' escaping on its way to Spark's Kafka client.
NASTY_PASSWORD = 'hi"st\\ory $(pw) é'
REFUSED = 77
HANG_GUARD = 30.0  # seconds; librdkafka alone would wait 30 s or more, Faust for ever


@dataclass(frozen=True)
class Secured:
    run_dir: Path
    exports: str  # what `local up --secure` printed: the CLI user's settings
    broker: LocalBroker
    settings: Settings  # the CLI user's

    def identity(self, user: str) -> dict[str, str]:
        return secure.client_env(self.broker.tls, user)


def clean_env() -> dict[str, str]:
    """This process's environment without the plaintext broker `local run` points us at."""
    return {k: v for k, v in os.environ.items() if not k.startswith("SCALEFOLD_")}


def scalefold(
    secured: Secured, *args: str, env: dict[str, str] | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    """`scalefold ARGS` in a shell that ran what `local up --secure` printed, then `env`."""
    overrides = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    script = f"{secured.exports}\n{overrides}exec {shlex.join([sys.executable, '-m', 'services.cli', *args])}"
    return subprocess.run(
        ["bash", "-c", script],
        env=clean_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    run_dir = tmp_path_factory.mktemp("secure-stack")
    command = [sys.executable, "-m", "services.cli", "local", "up", "--secure", "--broker-only"]
    up = subprocess.run(
        [*command, "--fresh", "--run-dir", str(run_dir)],
        env=clean_env(),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    try:
        assert up.returncode == 0, up.stderr[-3000:]
        assert "SCALEFOLD_SECURITY_PROTOCOL=SASL_SSL" in up.stdout
        broker = LocalBroker(run_dir, [], secure=True)
        running = broker.status()
        assert running is not None
        cli = Settings(
            bootstrap_servers=running.bootstrap,
            security=secure.client_security(broker.tls, "cli"),
        )
        yield Secured(run_dir, up.stdout, broker, cli)
    finally:
        down = [sys.executable, "-m", "services.cli", "local", "down", "--run-dir", str(run_dir)]
        subprocess.run(
            down, env=clean_env(), cwd=ROOT, capture_output=True, timeout=120, check=False
        )


def passwords(secured: Secured) -> list[str]:
    """Every secret of the run, also in the escaped forms it takes on its way to a client."""
    secrets_dir = secured.broker.tls.directory
    raw = [p.read_text().strip() for p in secrets_dir.glob("*.password")]
    escaped = [s.replace("\\", "\\\\").replace('"', '\\"') for s in raw]
    return sorted({*raw, *escaped, *(s.replace("\\", "\\\\") for s in escaped)})


def files_written(*roots: Path) -> list[Path]:
    """Every file of the run but the secrets' own and the broker's configuration (which
    holds its keystore's password, as Kafka needs)."""
    found = []
    for root in roots:
        for path in root.rglob("*"):
            first = path.relative_to(root).parts[0]
            if path.is_file() and first != "secure" and path.name != "server.properties":
                found.append(path)
    return found


def the_error_line(result: subprocess.CompletedProcess[str]) -> str:
    """The one line a refused command prints (services log INFO lines before it, and
    librdkafka a warning when it retries what a broker just started is not ready for:
    `Coordinator load in progress: retrying`, for a user who may describe the topic)."""
    lines = [
        line
        for line in result.stderr.splitlines()
        if " INFO " not in line and not (" WARNING librdkafka: " in line and "retrying" in line)
    ]
    assert len(lines) == 1, result.stderr[-3000:]
    assert result.returncode == REFUSED, result.stderr[-3000:]
    return lines[0]


def completed_rescales(data_dir: Path) -> list[tuple[str, int]]:
    """(trigger cause, slots after) of the job's completed rescales in the committed history.

    Read with DuckDB from the Parquet files Spark's commit log lists (the files a
    `history sql` would read), sparing a second Spark start per look."""
    import duckdb

    files = committed_files(data_dir / "tables" / "rescales")
    if not files:
        return []
    query = (
        "SELECT trigger_cause, total_post_rescale_slots FROM read_parquet(?, hive_partitioning=true)"
        " WHERE job_id = ? AND terminal_state = 'COMPLETED' ORDER BY start_timestamp_ms"
    )
    rows = duckdb.connect().execute(query, [[str(f) for f in files], JOB]).fetchall()
    return [(str(cause), int(slots)) for cause, slots in rows]


def submitted_job_log(codec: Codec, path: Path) -> Path:
    vertices = (VertexSpec("source", "Source", "default", "default", 4, None),)
    event = JobSubmitted(JOB, 0, JOB, vertices, None, tuple(sorted(QUICK.items())))
    name, record = to_record(event)
    entry = {"type": "JobSubmitted", "event": json.loads(codec.to_avro_json(name, record))}
    path.write_text(json.dumps(entry) + "\n")
    return path


@pytest.mark.exclusive
def test_closed_loop_on_sasl_ssl_with_acls_and_no_password_in_any_file(
    secured: Secured, codec: Codec, tmp_path: Path
) -> None:
    """Each service as its own user; the CLI (produce, tail, topics) as the CLI user."""
    tls, settings = secured.broker.tls, secured.settings
    secure.password_file(tls.directory, "history").write_text(NASTY_PASSWORD + "\n")
    secure.provision(secured.broker.admin_config(), tls, settings.topics)  # the new password
    scheduler_port, actuator_port = ports.free_ports(2)
    processes = [
        stack.scheduler_process(tmp_path, scheduler_port, "--session-timeout", "6"),
        stack.actuator_process(tmp_path, actuator_port, "--provisioning-delay", "1"),
        stack.history_process(
            tmp_path,
            # a grace that outlasts `produce` and the TaskManager posted after it: the
            # planner decides from the records as they arrive, so with 3 s it provisioned
            # all 4 on the 0 slots before that TaskManager (2026-12-02)
            *("--trigger-seconds", "1", "--plan-interval", "2", "--provision-grace", "15"),
        ),
    ]
    outputs: list[str] = []
    try:
        for process in processes:
            stack.start(process, settings, secured.identity(process.name))
        for process in processes:
            stack.wait_ready(process)
        produced = scalefold(secured, "produce", "--from", str(submitted_job_log(codec, tmp_path / "job.jsonl")), "--now")  # fmt: skip
        outputs.append(produced.stdout + produced.stderr)
        assert produced.returncode == 0, produced.stderr
        post(stack.web_port(processes[1]), "/taskmanagers", job=JOB, count=1, slots=1)  # 1 of 4

        tailed = scalefold(secured, "tail", "commands", "--from-beginning", "--max", "1", "--format", "json")  # fmt: skip
        outputs.append(tailed.stdout + tailed.stderr)
        assert tailed.returncode == 0, tailed.stderr
        command = json.loads(tailed.stdout[tailed.stdout.index("{") :])["record"]
        assert (command["jobId"], command["action"], command["amount"]) == (
            JOB,
            "PROVISION_TASK_MANAGERS",
            3,
        )

        def scaled_up(received: list[Any]) -> bool:
            return any(
                rec["terminalState"] == "COMPLETED"
                and rec["vertices"][0]["postRescaleParallelism"] == 4
                for rec in (codec.decode(m.value).record for m in received)
            )

        group = settings.topics.own("cli")
        rescales = consume(settings, settings.topics.rescales, scaled_up, 120, group)
        assert scaled_up(rescales)
        outcomes = consume(settings, settings.topics.command_outcomes, bool, 60, group)
        outcome = codec.decode(outcomes[0].value).record
        assert (outcome["commandId"], outcome["status"]) == (command["commandId"], "APPLIED")

        deadline = give_up_at(180)
        history = completed_rescales(tmp_path / "history")
        while len(history) < 2 and time.monotonic() < deadline:
            time.sleep(1)
            history = completed_rescales(tmp_path / "history")
        assert [slots for _, slots in history] == [1, 4]
        assert history[-1][0] == "NEW_RESOURCE_AVAILABLE"

        listed = scalefold(secured, "topics", "--create", "--apply")
        outputs.append(listed.stdout + listed.stderr)
        assert listed.returncode == 0, listed.stderr
        assert "created 0 topics" in listed.stderr and "changed 0 settings" in listed.stderr
    finally:
        for process in reversed(processes):
            process.stop()
    files = files_written(secured.run_dir, tmp_path)
    assert {"scheduler.log", "actuator.log", "history.log", "broker.log"} <= {f.name for f in files}
    secrets = passwords(secured)
    assert NASTY_PASSWORD in secrets and len(secrets) >= 6
    # The search finds a password where one is: the broker's configuration holds its own.
    config = (secured.run_dir / "server.properties").read_bytes()
    assert any(secret.encode() in config for secret in secrets)
    for path in files:
        content = path.read_bytes()
        for secret in secrets:
            assert secret.encode() not in content, f"a password is in {path}"
    for output in outputs:
        assert not any(secret in output for secret in secrets)


@pytest.mark.parametrize(
    "args",
    [
        ("tail", "rescales"),
        ("produce", "tm-registered", "--job-id", "j", "--task-manager-id", "tm", "--slots", "1"),
        ("scheduler", "--web-port", str(ports.free_port())),
        ("actuator", "--web-port", str(ports.free_port())),
        ("history", "run"),
    ],
    ids=lambda args: args[0],
)
def test_a_wrong_password_is_one_line_and_exit_77(
    secured: Secured, args: tuple[str, ...], tmp_path: Path
) -> None:
    user = args[0] if args[0] in secure.USERS else "cli"
    data = ["--data-dir", str(tmp_path / "data")] if args[0] in ("scheduler", "history") else []
    env = {"SCALEFOLD_SASL_USERNAME": user, "SCALEFOLD_SASL_PASSWORD": "not-the-password"}
    result = scalefold(secured, *args, *data, env=env, timeout=HANG_GUARD)
    line = the_error_line(result)
    assert f"Kafka refused user '{user}'" in line
    assert "authentication failed" in line and "invalid credentials" in line
    assert "check SCALEFOLD_SASL_USERNAME, SCALEFOLD_SASL_PASSWORD" in line
    assert "not-the-password" not in result.stderr + result.stdout


@pytest.mark.parametrize(
    "args",
    [("tail", "rescales"), ("actuator", "--web-port", str(ports.free_port()))],
    ids=["tail", "actuator"],
)
def test_an_untrusted_ca_is_one_line_and_exit_77(
    secured: Secured, args: tuple[str, ...], tmp_path: Path
) -> None:
    other_ca, _ = make_ca(tmp_path / "other-ca", "someone else's CA")
    user = args[0] if args[0] in secure.USERS else "cli"
    env = {"SCALEFOLD_SASL_USERNAME": user, "SCALEFOLD_SSL_CA_LOCATION": str(other_ca)}
    if user != "cli":
        env["SCALEFOLD_SASL_PASSWORD"] = secure.password_file(secured.broker.tls.directory, user).read_text().strip()  # fmt: skip
    result = scalefold(secured, *args, env=env, timeout=HANG_GUARD)
    line = the_error_line(result)
    assert "TLS failed" in line and "certificate verify failed" in line
    assert "check SCALEFOLD_SSL_CA_LOCATION" in line


def test_writing_a_topic_without_its_acl_is_one_line_and_exit_77(secured: Secured) -> None:
    """The history service's user may not write job-events (it reads it, for a forecast):
    only the CLI, the scheduler, the actuator and the bridge may."""
    password = secure.password_file(secured.broker.tls.directory, "history").read_text().strip()
    env = {"SCALEFOLD_SASL_USERNAME": "history", "SCALEFOLD_SASL_PASSWORD": password}
    result = scalefold(
        secured,
        *("produce", "tm-registered", "--job-id", "j", "--task-manager-id", "tm", "--slots", "1"),
        env=env,
        timeout=HANG_GUARD,
    )
    line = the_error_line(result)
    assert "Kafka refused user 'history'" in line
    assert "to write to scalefold.job-events: not authorized for a topic" in line


@pytest.mark.parametrize(
    ("service", "drop", "named"),
    [
        ("scheduler", ("GROUP", "PREFIXED", "scheduler", "READ"), "READ on group {p}scheduler"),
        ("scheduler", ("TOPIC", "PREFIXED", "scheduler-", "CREATE"), "CREATE on topic {p}scheduler-"),
        ("history", ("TOPIC", "LITERAL", "commands", "WRITE"), "do not allow WRITE on topic {p}commands"),
        ("history", ("TOPIC", "LITERAL", "rescales", "READ"), "create the missing topic {p}rescales"),
        ("actuator", ("TOPIC", "LITERAL", "command-outcomes", "WRITE"), "WRITE on topic {p}command-outcomes"),
    ],
    ids=["scheduler-group", "scheduler-changelog", "history-sink", "history-source", "actuator-outcomes"],
)  # fmt: skip
def test_a_service_missing_an_acl_stops_at_start_naming_it(
    secured: Secured, service: str, drop: tuple[str, str, str, str], named: str, tmp_path: Path
) -> None:
    """Inside Faust a refused group join would wait for ever; so each service checks
    its rights with the broker before it starts, and names the first one missing."""
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AclBindingFilter,
        AclOperation,
        AclPermissionType,
        AdminClient,
        ResourcePatternType,
        ResourceType,
    )

    prefix = f"acl{uuid.uuid4().hex[:8]}."
    settings = secured.settings.with_overrides(topic_prefix=prefix)
    secure.provision(secured.broker.admin_config(), secured.broker.tls, settings.topics)
    ensure_topics(settings, settings.topics.all())  # as the CLI user, the topics' creator
    resource, pattern, name, operation = drop
    admin = AdminClient(secured.broker.admin_config())
    rule = AclBindingFilter(
        ResourceType[resource],
        prefix + name,
        ResourcePatternType[pattern],
        f"User:{service}",
        "*",
        AclOperation[operation],
        AclPermissionType.ALLOW,
    )
    deleted = [future.result() for future in admin.delete_acls([rule]).values()]
    assert len(deleted[0]) == 1
    web = ["--web-port", str(ports.free_port())] if service != "history" else []
    data = ["--data-dir", str(tmp_path / "data")] if service != "actuator" else []
    password = secure.password_file(secured.broker.tls.directory, service).read_text().strip()
    env = {
        "SCALEFOLD_SASL_USERNAME": service,
        "SCALEFOLD_SASL_PASSWORD": password,
        "SCALEFOLD_TOPIC_PREFIX": prefix,
    }
    arguments = ("history", "run") if service == "history" else (service,)
    result = scalefold(secured, *arguments, *web, *data, env=env, timeout=HANG_GUARD)
    line = the_error_line(result)
    assert f"Kafka refused user '{service}'" in line
    assert named.format(p=prefix) in line
    assert password not in result.stderr + result.stdout
