"""The stack on a secured broker (deploy/docker/secure.yml): SASL_SSL, a SCRAM user per
service and one for the CLI, ACLs with allow.everyone.if.no.acl.found=false; with the real
Flink cluster secured too (deploy/docker/flink.yml and secure-flink.yml): the JobManager's
REST endpoint and the history's REST API serve TLS with the stack's own CA.

One stack for the module (Flink rides on it rather than a stack of its own: CI time); the
CLI runs where a user of the compose stack runs it, `docker compose exec history scalefold
...` (as the `cli` user). The embedded closed loop runs end to end, then the loop on the
real Flink over TLS (the bridge and the actuator verifying the JobManager's certificate),
and then no password and no private key is in any container's log, environment or
written file.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.contracts import records as r
from services.contracts.flinkrest import FlinkRest
from tests.docker.conftest import project_name, stack_env, started
from tests.docker.flink_checks import kept_rescale, post_parallelism, running_at
from tests.docker.stack import (
    COMPOSE_FILE,
    ROOT,
    SCALEFOLD,
    SECURE,
    Stack,
    first_provision,
    flink_submit,
    outcomes_of,
    poll,
    provisions_settled,
    set_parallelism,
    submit_short_job,
)
from tests.kafka_support import produce

FLINK_FILE = ROOT / "deploy" / "docker" / "flink.yml"
SECURE_FLINK = ROOT / "deploy" / "docker" / "secure-flink.yml"
USERS = ("scheduler", "history", "actuator", "bridge", "cli")
KEYS = ("flink-rest", "history-rest")
"""The HTTPS servers' private keys (PEM, in the authority's volume), never to be logged."""
NO_HEALTH_CHECK = {"bridge"}
ONE_SHOTS = {"secure-material", "secure-accounts", "topics"}
# Where the containers write: the broker's data, Faust's data (none while its tables are in
# memory), the tables, checkpoints and Spark's own files, the executors' logs.
WRITTEN = {
    "kafka": ["/var/lib/kafka/data"],
    "scheduler": ["/tmp/scheduler"],
    "history": ["/data", "/home/scalefold"],
    "spark-worker": ["/tmp/spark", "/home/scalefold"],
}
MUST_HAVE_WRITTEN = ("kafka:/var/lib/kafka/data", "history:/data", "spark-worker:/tmp/spark")


@pytest.fixture(scope="module")
def secure() -> Iterator[Stack]:
    # One TaskManager of 2 slots: the sample job at parallelism 2 starts at 1 (Bucket and
    # Sum, two slot-sharing groups, a slot each) until `--scale taskmanager=2` adds two.
    env = stack_env(FLINK_REST_PORT="", FLINK_TASK_SLOTS="2", BRIDGE_POLL_INTERVAL="1")
    stack = Stack(
        project_name("-secure"),
        env,
        files=(COMPOSE_FILE, SECURE, FLINK_FILE, SECURE_FLINK),
        cli_service="history",
    )
    with started(stack) as running:
        yield running


@pytest.fixture(scope="module")
def passwords(secure: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every secret of the stack, from the material's own volume (copied out of the exited
    one-shot container): the users' passwords, the broker's and Flink's keystore passwords,
    and the HTTPS servers' private keys (their longest line of base64)."""
    into = tmp_path_factory.mktemp("authority")
    secure.run("cp", "secure-material:/run/scalefold/authority/.", str(into))
    found = {user: (into / f"{user}.password").read_text().strip() for user in USERS}
    found["broker keystore"] = (into / "broker.password").read_text().strip()
    found["Flink's keystore"] = (into / "flink-rest.password").read_text().strip()
    for server in KEYS:
        body = (into / f"{server}.key").read_text().splitlines()[1:-1]
        found[f"{server}'s private key"] = max(body, key=len)
    assert all(len(value) >= 20 for value in found.values())
    return found


def refused(stack: Stack, service: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        stack.command("exec", "-T", service, "scalefold", *args),
        env={**os.environ, **stack.env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_every_service_is_healthy_secured_and_only_on_loopback(
    secure: Stack, tmp_path: Path
) -> None:
    rows = [json.loads(line) for line in secure.run("ps", "-a", "--format", "json").splitlines()]
    assert {row["Service"] for row in rows} == ONE_SHOTS | {
        "kafka",
        "scheduler",
        "actuator",
        "spark-master",
        "spark-worker",
        "history",
        "history-api",
        "jobmanager",
        "taskmanager",
        "bridge",
    }
    for row in rows:
        if row["Service"] in ONE_SHOTS:
            assert (row["State"], row["ExitCode"]) == ("exited", 0), row["Name"]
            continue
        if row["Service"] in NO_HEALTH_CHECK:
            assert row["State"] == "running", f"{row['Name']}: {row['Status']}"
            continue
        assert row["Health"] == "healthy", f"{row['Name']}: {row['Status']}"
        for publisher in row.get("Publishers") or []:
            if publisher.get("PublishedPort"):
                assert publisher["URL"] == "127.0.0.1", f"{row['Service']} publishes {publisher}"
    # The ACLs hold: the scheduler's user may not read the commands topic.
    denied = refused(secure, "scheduler", "tail", "commands", "--idle", "2")
    assert denied.returncode == 77, denied.stderr
    assert "Kafka refused user 'scheduler'" in denied.stderr
    # From the host: SASL_SSL on the published port, with the CA and the CLI's password.
    secure.run("cp", "history:/run/scalefold/cli/ca.pem", str(tmp_path / "ca.pem"))
    secure.run("cp", "history:/run/scalefold/cli/cli.password", str(tmp_path / "cli.password"))
    host = subprocess.run(
        [SCALEFOLD, "topics"],
        env={
            **os.environ,
            "SCALEFOLD_BOOTSTRAP_SERVERS": secure.bootstrap,
            "SCALEFOLD_SECURITY_PROTOCOL": "SASL_SSL",
            "SCALEFOLD_SASL_MECHANISM": "SCRAM-SHA-512",
            "SCALEFOLD_SASL_USERNAME": "cli",
            "SCALEFOLD_SASL_PASSWORD_FILE": str(tmp_path / "cli.password"),
            "SCALEFOLD_SSL_CA_LOCATION": str(tmp_path / "ca.pem"),
        },
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert host.returncode == 0, host.stderr
    assert "scalefold.rescales " in host.stdout


def test_closed_loop_on_sasl_ssl_with_acls(secure: Stack) -> None:
    job = "secure-loop-1"
    submit_short_job(secure, job, parallelism=4)
    secure.scalefold(
        "cluster", "--host", "actuator", "--port", "6067",
        "add-taskmanagers", "--job", job, "--count", "1",
    )  # fmt: skip
    command = first_provision(secure, job, desired=4)

    def scaled_up(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            r
            for r in records
            if r["terminalState"] == "COMPLETED" and r["vertices"][0]["postRescaleParallelism"] == 4
        ]

    rescaled = scaled_up(
        poll(lambda: secure.records("rescales", job), lambda rs: bool(scaled_up(rs)), timeout=300)
    )
    assert rescaled, "the job never rescaled to its desired parallelism"
    assert provisions_settled(secure, job)[0] in ("APPLIED", "SUPERSEDED"), command
    # The rescale is in the history: Parquet written by Spark's executors on the worker,
    # which read the topic as the `history` user; the query goes through the service's
    # SQL endpoint.
    uuid = rescaled[0]["rescaleUuid"]
    query = (
        "SELECT rescale_uuid, trigger_cause, terminal_state FROM rescales "
        f"WHERE job_id = '{job}' AND rescale_uuid = '{uuid}' AND terminal_state = 'COMPLETED'"
    )
    rows = poll(lambda: secure.sql(query), bool, timeout=600, pause=5)
    assert [r["rescale_uuid"] for r in rows] == [uuid]


def curl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["curl", "--silent", "--show-error", "--fail", "--max-time", "10", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_flink_rest_and_the_history_api_serve_tls_of_the_stack_ca(
    secure: Stack, tmp_path: Path
) -> None:
    """From the host, on the published loopback ports: each answers with the stack's CA,
    and neither a client without it nor plain HTTP gets an answer."""
    ca = tmp_path / "ca.pem"
    secure.run("cp", "history:/run/scalefold/cli/ca.pem", str(ca))
    for service, port, path, key in (
        ("jobmanager", 8081, "/overview", "taskmanagers"),
        ("history-api", 8082, "/jobs", "jobs"),
    ):
        address = f"127.0.0.1:{secure.port(service, port)}{path}"
        verified = curl("--cacert", str(ca), f"https://{address}")
        assert verified.returncode == 0, f"{service}: {verified.stderr}"
        assert key in json.loads(verified.stdout)
        untrusted = curl(f"https://{address}")  # the system's CAs only
        assert untrusted.returncode == 60, f"{service}: {untrusted.returncode} {untrusted.stderr}"
        # Plain HTTP: the history API hangs up; Flink's REST endpoint answers only with a
        # redirect to https (its RedirectingSslHandler), never with the answer.
        plain = curl("--write-out", "\n%{http_code} %{redirect_url}", f"http://{address}")
        assert key not in plain.stdout, f"{service} answers plain HTTP: {plain.stdout}"
        if service == "history-api":
            assert plain.returncode != 0, plain.stdout
        else:
            code, _, location = plain.stdout.strip().rpartition("\n")[2].partition(" ")
            assert code.startswith("3") and location.startswith("https://"), plain.stdout
    # The actuator checked the JobManager's certificate when it started, before any command.
    said = secure.run("logs", "--no-color", "actuator")
    assert (
        "Flink cluster flink answers at https://jobmanager:8081 (TLS, certificate verified "
        "against /run/scalefold/actuator/ca.pem)"
    ) in said


def test_closed_loop_on_the_secured_flink(
    secure: Stack, passwords: dict[str, str], codec: Codec, tmp_path: Path
) -> None:
    """The sample job submitted over TLS; the operator's `--scale taskmanager=2`, onto
    which Flink rescales; a SET_PARALLELISM command (as the history user, the one who may
    write commands) applied by the actuator through the JobManager's TLS endpoint; each
    rescale read by the bridge over TLS into flink_rescales, served by the history's REST
    API over TLS with the JobManager's JSON."""
    ca = tmp_path / "ca.pem"
    secure.run("cp", "history:/run/scalefold/cli/ca.pem", str(ca))
    flink = FlinkRest(f"https://127.0.0.1:{secure.port('jobmanager', 8081)}", 10.0, ca)
    api = FlinkRest(f"https://127.0.0.1:{secure.port('history-api', 8082)}", 10.0, ca)
    sample = ("--parallelism", "2", "--max-parallelism", "4", "--name", "secure-loop")
    jid = flink_submit(flink.base_url, "--ca", str(ca), *sample)
    assert running_at(flink, jid, 1) == {"Source": 1, "Bucket": 1, "Sum": 1}
    kept_rescale(flink, api, jid, "INITIAL_SCHEDULE")

    secure.run("up", "-d", "--wait", "--scale", "taskmanager=2", "taskmanager")
    assert running_at(flink, jid, 2) == {"Source": 1, "Bucket": 2, "Sum": 2}
    scaled = kept_rescale(flink, api, jid, "NEW_RESOURCE_AVAILABLE")
    assert post_parallelism(scaled) == {"Source": 1, "Bucket": 2, "Sum": 2}

    command = set_parallelism(
        f"secure-parallelism-{jid[:8]}", f"flink.{jid}", 1, "tests/docker/test_secure_compose.py"
    )
    (tmp_path / "history.password").write_text(passwords["history"])
    settings = Settings.from_env(
        {
            "SCALEFOLD_BOOTSTRAP_SERVERS": secure.bootstrap,
            "SCALEFOLD_SECURITY_PROTOCOL": "SASL_SSL",
            "SCALEFOLD_SASL_MECHANISM": "SCRAM-SHA-512",
            "SCALEFOLD_SASL_USERNAME": "history",
            "SCALEFOLD_SASL_PASSWORD_FILE": str(tmp_path / "history.password"),
            "SCALEFOLD_SSL_CA_LOCATION": str(ca),
        }
    )
    encoded = codec.encode(r.SCALING_COMMAND, command)
    produce(settings, settings.topics.commands, [(f"flink.{jid}".encode(), encoded)])
    outcomes = outcomes_of(secure, command["commandId"], "flink.", timeout=300)
    assert [(o["status"], o["backend"]) for o in outcomes] == [("APPLIED", "flink:flink")]
    requirements = flink.requirements(jid)
    assert {v["parallelism"]["upperBound"] for v in requirements.values()} == {1}
    assert running_at(flink, jid, 1) == {"Source": 1, "Bucket": 1, "Sum": 1}

    lowered = kept_rescale(flink, api, jid, "UPDATE_REQUIREMENT")
    assert post_parallelism(lowered) == {"Source": 1, "Bucket": 1, "Sum": 1}


def test_no_password_in_any_log_environment_or_written_file(
    secure: Stack, passwords: dict[str, str], tmp_path: Path
) -> None:
    """After the loop: every container's log, every container's configuration (its
    environment, command), and everything the containers wrote (Spark's executor logs,
    the tables and checkpoints, Faust's data, the broker's data)."""
    places: dict[str, bytes] = {
        "docker compose logs": secure.run("logs", "--no-color", "--timestamps").encode(),
    }
    ids = secure.run("ps", "-a", "-q").split()
    inspected = subprocess.run(
        ["docker", "inspect", *ids], capture_output=True, check=True, timeout=120
    )
    places["docker inspect"] = inspected.stdout
    for service, paths in WRITTEN.items():
        for path in paths:
            into = tmp_path / service / path.strip("/").replace("/", "_")
            into.parent.mkdir(parents=True, exist_ok=True)
            secure.run("cp", f"{service}:{path}", str(into))
            files = [into] if into.is_file() else [f for f in into.rglob("*") if f.is_file()]
            assert files or f"{service}:{path}" not in MUST_HAVE_WRITTEN, f"{service}:{path}"
            for file in files:
                places[f"{service}:{path}/{file.relative_to(into)}"] = file.read_bytes()
    assert len(places) > 20
    leaks = [
        f"{owner} (password or key) in {where}"
        for owner, password in passwords.items()
        for where, content in places.items()
        if password.encode() in content
    ]
    assert not leaks, leaks
