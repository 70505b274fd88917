"""Drive docker-compose.yml from the host the way a user does: `docker compose ...`,
`docker compose exec ...`, published ports on 127.0.0.1 and the host's `scalefold` CLI.
Nothing here imports a service's internals; expected outputs come from `scalefold replay`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
THREE_BROKERS = ROOT / "deploy" / "docker" / "three-brokers.env"
SECURE = ROOT / "deploy" / "docker" / "secure.yml"
EXAMPLES = ROOT / "examples"
SCALEFOLD = str(ROOT / ".venv" / "bin" / "scalefold")
SQL_MAX_ROWS = 1_000_000
"""`history sql --max-rows` of the tests: the whole answer, never the CLI's first 1000 rows."""


def compose_problem() -> str | None:
    """Why the compose tests cannot run here, or None."""
    if shutil.which("docker") is None:
        return "the docker CLI is not installed (`make compose-test` provisions it as root)"
    for command, what in (
        (["docker", "info"], "no Docker engine answers `docker info`"),
        (["docker", "compose", "version"], "Compose v2 (`docker compose`) is missing"),
    ):
        try:
            done = subprocess.run(command, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired) as error:
            return f"{what}: {error}"
        if done.returncode != 0:
            return f"{what} (`make compose-test` provisions it as root)"
    return None


def engine_volumes() -> list[str]:
    done = subprocess.run(
        ["docker", "volume", "ls", "-q"], capture_output=True, text=True, check=False
    )
    return done.stdout.split()


T = TypeVar("T")


def poll(
    attempt: Callable[[], T], done: Callable[[T], bool], timeout: float, pause: float = 2.0
) -> T:
    """`attempt()` until `done(result)` or the deadline; returns the last result."""
    deadline = time.monotonic() + timeout
    result = attempt()
    while not done(result) and time.monotonic() < deadline:
        time.sleep(pause)
        result = attempt()
    return result


@dataclass
class Stack:
    """One compose project of docker-compose.yml, with its own variables (ports, tuning).

    `files`: the compose files (docker-compose.yml and overrides such as secure.yml).
    `cli_service`: run `scalefold` inside this service's container (`docker compose exec`,
    with the container's settings) instead of the host's CLI on the published port."""

    project: str
    env: dict[str, str]
    env_file: Path | None = None
    files: tuple[Path, ...] = (COMPOSE_FILE,)
    cli_service: str | None = None
    log: list[str] = field(default_factory=list)
    volumes_before: list[str] = field(default_factory=engine_volumes)

    def command(self, *args: str) -> list[str]:
        head = ["docker", "compose"]
        for file in self.files:
            head += ["-f", str(file)]
        head += ["-p", self.project]
        if self.env_file is not None:
            head += ["--env-file", str(self.env_file)]
        return [*head, *args]

    def run(self, *args: str, timeout: float = 900, check: bool = True) -> str:
        done = subprocess.run(
            self.command(*args),
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        self.log.append(f"$ docker compose {' '.join(args)} -> {done.returncode}")
        if check and done.returncode != 0:
            raise AssertionError(
                f"docker compose {' '.join(args)} failed ({done.returncode}):\n"
                f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}\n{self.logs_tail()}"
            )
        return done.stdout

    def logs_tail(self, lines: int = 30, *services: str) -> str:
        done = subprocess.run(
            self.command("logs", "--no-color", "--timestamps", "--tail", str(lines), *services),
            env={**os.environ, **self.env},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        return done.stdout

    def exec(self, service: str, *args: str, timeout: float = 900) -> str:
        return self.run("exec", "-T", service, *args, timeout=timeout)

    def containers(self, service: str) -> list[dict[str, Any]]:
        out = self.run("ps", "--format", "json", service)
        rows = [json.loads(line) for line in out.splitlines() if line.strip()]
        return sorted(rows, key=lambda row: row["Name"])

    def port(self, service: str, container_port: int, index: int = 1) -> int:
        out = self.run("port", "--index", str(index), service, str(container_port)).strip()
        host, _, port = out.rpartition(":")
        assert host == "127.0.0.1", f"{service} is published on {out}, not loopback"
        return int(port)

    def http_json(self, service: str, container_port: int, path: str, index: int = 1) -> Any:
        url = f"http://127.0.0.1:{self.port(service, container_port, index)}{path}"
        with urllib.request.urlopen(url, timeout=10) as response:
            return json.load(response)

    def metrics(self, index: int) -> dict[str, float]:
        url = f"http://127.0.0.1:{self.port('scheduler', 6066, index)}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        return {
            line.split()[0]: float(line.split()[1])
            for line in text.splitlines()
            if line and not line.startswith("#") and "{" not in line
        }

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.env['KAFKA_PORT']}"

    def scalefold(self, *args: str, timeout: float = 300) -> str:
        """The host's `scalefold` CLI against this stack's broker (its published port), or
        the CLI in `cli_service`'s container."""
        if self.cli_service is not None:
            return self.exec(self.cli_service, "scalefold", *args, timeout=timeout)
        done = subprocess.run(
            [SCALEFOLD, "--bootstrap-servers", self.bootstrap, *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        assert done.returncode == 0, f"scalefold {' '.join(args)}:\n{done.stderr[-3000:]}"
        return done.stdout

    def records(self, topic: str, job_prefix: str, but: Iterable[str] = ()) -> list[dict[str, Any]]:
        """Every record on `topic` (from the beginning) of jobs whose id starts with the
        prefix, except those of the record types (schema names) in `but`."""
        out = self.scalefold("tail", topic, "--from-beginning", "--idle", "4", "--format", "json")
        skip = tuple(but)
        found = []
        for line in out.splitlines():
            entry = json.loads(line.split(None, 1)[1])
            record = entry["record"]
            if str(record.get("jobId", "")).startswith(job_prefix) and not any(
                entry["schema"].endswith(name) for name in skip
            ):
                found.append(record)
        return found

    def sql(self, query: str) -> list[dict[str, str]]:
        """`docker compose exec history scalefold history sql QUERY`, on the Spark cluster;
        every row (`history sql` prints at most `--max-rows`, 1000 by default)."""
        out = self.exec(
            "history",
            "scalefold",
            "history",
            "sql",
            query,
            "--format",
            "csv",
            "--max-rows",
            str(SQL_MAX_ROWS),
        )
        rows = list(csv.DictReader(io.StringIO(out)))
        assert len(rows) < SQL_MAX_ROWS, f"more than {SQL_MAX_ROWS - 1} rows: narrow the query"
        return rows


def workload(path: Path, prefix: str, jobs: int, example: str = "failover.jsonl") -> Path:
    """`jobs` copies of an example job (submission, TaskManagers, checkpoints, a failure),
    each with its own id and the scheduler's own runtime simulation, so that `scalefold
    replay` of the same file says exactly what the service must emit."""
    lines = [
        json.loads(line)
        for line in (EXAMPLES / example).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    with path.open("w") as out:
        for j in range(jobs):
            for line in lines:
                event = dict(line["event"], jobId=f"{prefix}{j}")
                if line["type"] == "JobSubmitted":
                    event["configuration"] = {"scalefold.runtime.mode": "simulated"}
                out.write(json.dumps({"type": line["type"], "event": event}) + "\n")
    return path


def split(log: Path, parts: int) -> list[Path]:
    """The log cut into `parts` files along job boundaries kept in order per job."""
    lines = log.read_text().splitlines()
    size = -(-len(lines) // parts)
    pieces = []
    for n in range(parts):
        piece = log.with_name(f"{log.stem}.{n}.jsonl")
        piece.write_text("".join(line + "\n" for line in lines[n * size : (n + 1) * size]))
        pieces.append(piece)
    return pieces


def replayed(log: Path) -> list[dict[str, Any]]:
    """What `scalefold replay` says the scheduler emits for the log: every rescale revision."""
    done = subprocess.run(
        [SCALEFOLD, "replay", str(log), "--only", "rescales", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return [json.loads(line)["record"] for line in done.stdout.splitlines() if line.strip()]


def revisions(records: Iterable[Mapping[str, Any]]) -> dict[tuple[str, int], str]:
    """(rescale uuid, revision) -> the record, canonical JSON."""
    return {
        (r["rescaleUuid"], r["revision"]): json.dumps(r, sort_keys=True, default=str)
        for r in records
    }


def first_provision(stack: Stack, job: str, desired: int) -> dict[str, Any]:
    """The job's first command: a PROVISION of what the planner read it lacked.

    A job submitted with one TaskManager added right after gets `desired - 1` once it
    runs on it, or `desired - 0` if it was still waiting with no slot when the
    planner's grace ran out (a busy machine): both are the planner's rules (their exact
    amounts: tests/history/test_planner.py), so the amount is checked against the
    revision the command names as its evidence."""
    command = poll(lambda: stack.records("commands", job), bool, timeout=300)[0]
    assert command["action"] == "PROVISION_TASK_MANAGERS", command
    read = [
        r
        for r in stack.records("rescales", job)
        if r["rescaleUuid"] in command["evidence"]
        and r["updatedAtMillis"] == command["issuedAtMillis"]
    ]
    assert read, command
    assert command["amount"] in {desired - r["availableSlots"] for r in read}, (command, read)
    return command


def provisions_settled(stack: Stack, job: str) -> list[str]:
    """The outcome of each of the job's commands, in order, once the last is APPLIED.

    A provision decided on the job's wait with no slot is SUPERSEDED when the TaskManager
    added with the job is in by the time the actuator checks it (its basis no longer
    holds: docs/actuator.md); the planner then decides on the slot the job has. Nothing
    but APPLIED and SUPERSEDED may come of them."""

    def statuses() -> list[str]:
        commands = stack.records("commands", job)
        outcomes = {o["commandId"]: o["status"] for o in stack.records("command-outcomes", job)}
        return [outcomes.get(c["commandId"], "") for c in commands]

    settled = poll(statuses, lambda got: bool(got) and got[-1] == "APPLIED", timeout=120)
    assert set(settled) <= {"APPLIED", "SUPERSEDED"}, settled
    return settled


QUICK_WAITS = {
    "jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout": "1 s",
    "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "3 s",
    "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout": "2 s",
}
"""A closed-loop test job's adaptive-scheduler waits (Flink's keys), short enough for a test."""


def submit_short_job(stack: Stack, job: str, parallelism: int) -> None:
    """`scalefold produce job-submitted`: one vertex at `parallelism`, with `QUICK_WAITS`."""
    vertices = [
        {
            "id": "source",
            "name": "Source",
            "slotSharingGroupId": "default",
            "parallelism": parallelism,
        }
    ]
    stack.scalefold(
        "produce",
        "job-submitted",
        *("--job-id", job, "--job-name", job),
        *("--vertices", json.dumps(vertices), "--configuration", json.dumps(QUICK_WAITS)),
    )


def outcomes_of(
    stack: Stack, command_id: str, job_prefix: str = "", timeout: float = 120
) -> list[dict[str, Any]]:
    """The outcomes on command-outcomes of the command, once there is one."""
    return poll(
        lambda: [
            o for o in stack.records("command-outcomes", job_prefix) if o["commandId"] == command_id
        ],
        bool,
        timeout=timeout,
    )


def set_parallelism(command_id: str, job_id: str, amount: int, reason: str) -> dict[str, Any]:
    """A SET_PARALLELISM command of `amount` for the job, with no evidence."""
    return {
        "commandId": command_id,
        "jobId": job_id,
        "action": "SET_PARALLELISM",
        "amount": amount,
        "reason": reason,
        "evidence": [],
        "issuedAtMillis": 1,
    }


def flink_submit(rest: str, *args: str) -> str:
    """`scalefold flink submit --rest REST ARGS...` from the host: the sample job's id."""
    submitted = subprocess.run(
        [SCALEFOLD, "flink", "submit", "--rest", rest, *args],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert submitted.returncode == 0, submitted.stderr
    return submitted.stdout.split()[-1]
