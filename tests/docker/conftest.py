"""The compose stack under test, started with pytest-docker and driven like a user would.

`make compose-test` provisions the engine, Compose v2 and the images, then runs this
directory. Every published port is a free one (or ephemeral), the project names are
unique per run, and each stack is removed with `down -v` also when its start fails.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pytest_docker.plugin import get_docker_services

from services.localstack.ports import free_ports
from tests.docker.stack import Stack, compose_problem

PROBLEM = compose_problem()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if Path(str(item.fspath)).parent == Path(__file__).parent:
            item.add_marker(pytest.mark.docker)
            if PROBLEM is not None:
                item.add_marker(pytest.mark.skip(reason=PROBLEM))


LOGS_DIR = Path(os.environ.get("SCALEFOLD_COMPOSE_LOGS", ".run/compose-logs"))
"""Where a failed test leaves every service's whole log (the report shows only a tail)."""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    report = yield
    stack = getattr(item, "funcargs", {}).get("stack")
    if report.failed and isinstance(stack, Stack):
        LOGS_DIR.mkdir(parents=True, exist_ok=True)
        path = LOGS_DIR / f"{stack.project}-{item.name}.log"
        path.write_text(stack.run("logs", "--no-color", "--timestamps", check=False))
        report.sections.append(("compose logs", f"every service's whole log: {path.resolve()}"))
    return report


def project_name(suffix: str) -> str:
    base = os.environ.get("SCALEFOLD_COMPOSE_PROJECT") or f"sf-test-{os.getpid()}"
    return f"{base}{suffix}"


def stack_env(**extra: str) -> dict[str, str]:
    """Ports free on this host (Kafka's advertised listener must name the published one),
    ephemeral ones where nothing needs to know them in advance, and quick planner timings."""
    kafka, kafka_2, kafka_3 = free_ports(3)  # distinct: each is free now, not yet bound
    return {
        "KAFKA_PORT": str(kafka),
        "KAFKA_2_PORT": str(kafka_2),
        "KAFKA_3_PORT": str(kafka_3),
        "SCHEDULER_PORTS": "",
        "ACTUATOR_PORT": "",
        "SPARK_UI_PORT": "",
        "HISTORY_API_PORT": "",
        "HISTORY_PROVISION_GRACE": "3",
        "ACTUATOR_PROVISIONING_DELAY": "1",
        **extra,
    }


@contextmanager
def started(stack: Stack, *up: str) -> Iterator[Stack]:
    """`docker compose up -d --wait ...` through pytest-docker; `down -v` in every case."""
    saved = {key: os.environ.get(key) for key in stack.env}
    os.environ.update(stack.env)  # pytest-docker's commands inherit the environment
    command = "docker compose"
    if stack.env_file is not None:
        command += f' --env-file "{stack.env_file}"'
    try:
        with get_docker_services(
            command,
            [str(file) for file in stack.files],
            stack.project,
            [" ".join(("up -d --wait", *up))],
            ["down -v --remove-orphans --timeout 20"],
        ):
            yield stack
    except BaseException:
        # What the services said, for the report (the stack is removed next).
        print(stack.run("ps", "-a", check=False), stack.logs_tail(80), file=sys.stderr)
        stack.run("down", "-v", "--remove-orphans", "--timeout", "20", check=False)
        raise
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


@pytest.fixture(scope="module")
def stack() -> Iterator[Stack]:
    """The default stack with two scheduler workers."""
    with started(Stack(project_name(""), stack_env()), "--scale", "scheduler=2") as running:
        yield running
