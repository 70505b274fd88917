"""The stack on a secured broker (deploy/docker/secure.yml): SASL_SSL, a SCRAM user per
service and one for the CLI, ACLs with allow.everyone.if.no.acl.found=false.

One stack for the module; the CLI runs where a user of the compose stack runs it,
`docker compose exec history scalefold ...` (as the `cli` user). The closed loop runs end
to end, and then no password is in any container's log, environment or written file.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.docker.conftest import project_name, stack_env, started
from tests.docker.stack import COMPOSE_FILE, SCALEFOLD, SECURE, Stack, first_provision, poll

USERS = ("scheduler", "history", "actuator", "cli")
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
    stack = Stack(
        project_name("-secure"),
        stack_env(),
        files=(COMPOSE_FILE, SECURE),
        cli_service="history",
    )
    with started(stack) as running:
        yield running


@pytest.fixture(scope="module")
def passwords(secure: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Every password of the stack (the users' and the broker keystore's), from the
    material's own volume (copied out of the exited one-shot container)."""
    into = tmp_path_factory.mktemp("authority")
    secure.run("cp", "secure-material:/run/scalefold/authority/.", str(into))
    found = {user: (into / f"{user}.password").read_text().strip() for user in USERS}
    found["broker keystore"] = (into / "broker.password").read_text().strip()
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
    }
    for row in rows:
        if row["Service"] in ONE_SHOTS:
            assert (row["State"], row["ExitCode"]) == ("exited", 0), row["Name"]
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
    quick = {
        "jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout": "1 s",
        "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "3 s",
        "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout": "2 s",
    }
    vertices = [
        {"id": "source", "name": "Source", "slotSharingGroupId": "default", "parallelism": 4}
    ]
    secure.scalefold(
        "produce",
        "job-submitted",
        *("--job-id", job, "--job-name", job),
        *("--vertices", json.dumps(vertices), "--configuration", json.dumps(quick)),
    )
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

    rescaled = scaled_up(poll(lambda: secure.records("rescales", job), scaled_up, timeout=300))
    assert rescaled, "the job never rescaled to its desired parallelism"
    outcomes = poll(
        lambda: [
            o
            for o in secure.records("command-outcomes", "")
            if o["commandId"] == command["commandId"]
        ],
        bool,
        timeout=120,
    )
    assert [o["status"] for o in outcomes] == ["APPLIED"]
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
        f"{owner}'s password in {where}"
        for owner, password in passwords.items()
        for where, content in places.items()
        if password.encode() in content
    ]
    assert not leaks, leaks
