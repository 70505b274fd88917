"""docker-compose.yml with deploy/docker/flink.yml: the closed loop on a real Flink 2.3.0
cluster in containers, driven from the host as a user would.

One stack of its own (no scheduler: nothing here is predicted), with a JobManager, one
TaskManager of 2 slots, the bridge, the actuator with its Flink backend, the history
service on the Spark cluster and the rescale REST API over its tables (history-api). The
sample job is submitted with `scalefold flink submit --rest` on the published REST port;
`--scale taskmanager=2` makes Flink rescale onto the new slots; a SET_PARALLELISM command
on the commands topic makes the actuator PUT the job's requirements; each rescale is then
in Flink's REST answers and in the history's `flink_rescales` (read through history-api,
which serves that table with the JobManager's JSON), and the command's outcome is on
`command-outcomes`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
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
    Stack,
    flink_submit,
    outcomes_of,
    set_parallelism,
)
from tests.kafka_support import produce

FLINK_FILE = ROOT / "deploy" / "docker" / "flink.yml"
CLUSTER = "flink"
"""The bridge's and the actuator's name of the compose Flink cluster (deploy/docker/flink.yml)."""
SERVICES = ("jobmanager", "taskmanager", "bridge", "actuator", "history", "history-api")


@pytest.fixture(scope="module")
def flink_stack() -> Iterator[Stack]:
    env = stack_env(FLINK_REST_PORT="", FLINK_TASK_SLOTS="2", BRIDGE_POLL_INTERVAL="1")
    stack = Stack(project_name("-flink"), env, files=(COMPOSE_FILE, FLINK_FILE))
    with started(stack, *SERVICES) as running:
        yield running


def flink(stack: Stack, path: str) -> Any:
    return stack.http_json("jobmanager", 8081, path)


def test_flink_services_are_healthy_and_only_on_loopback(flink_stack: Stack) -> None:
    rows = [json.loads(line) for line in flink_stack.run("ps", "--format", "json").splitlines()]
    running = {row["Service"]: row for row in rows}
    assert set(SERVICES) <= set(running)
    assert "scheduler" not in running  # not needed here: only what was asked for runs
    for service in ("jobmanager", "taskmanager", "actuator", "history", "history-api"):
        assert running[service]["Health"] == "healthy", running[service]["Status"]
    for row in rows:
        for publisher in row.get("Publishers") or []:
            if publisher.get("PublishedPort"):
                assert publisher["URL"] == "127.0.0.1", f"{row['Service']} publishes {publisher}"
    overview = flink(flink_stack, "/overview")
    assert (overview["taskmanagers"], overview["slots-total"]) == (1, 2)
    assert flink(flink_stack, "/jobmanager/config")  # the REST API answers from the host
    assert "jobs" in flink_stack.http_json("history-api", 8082, "/jobs")


def test_closed_loop_on_the_real_flink_cluster(flink_stack: Stack, codec: Codec) -> None:
    stack = flink_stack
    rest = f"http://127.0.0.1:{stack.port('jobmanager', 8081)}"
    jobmanager = FlinkRest(rest, 10.0)
    api = FlinkRest(f"http://127.0.0.1:{stack.port('history-api', 8082)}", 10.0)
    sample = ("--parallelism", "2", "--max-parallelism", "4", "--name", "compose-loop")
    jid = flink_submit(rest, *sample)
    # One TaskManager of 2 slots: Bucket and Sum (two slot-sharing groups) get one each.
    running_at(jobmanager, jid, 1)
    kept_rescale(jobmanager, api, jid, "INITIAL_SCHEDULE")

    # The operator's --scale: two more slots, and Flink rescales onto them.
    stack.run("up", "-d", "--wait", "--scale", "taskmanager=2", "taskmanager")
    assert flink(stack, "/overview")["taskmanagers"] == 2
    running_at(jobmanager, jid, 2)
    scaled = kept_rescale(jobmanager, api, jid, "NEW_RESOURCE_AVAILABLE")
    assert post_parallelism(scaled) == {"Source": 1, "Bucket": 2, "Sum": 2}

    # A command: every vertex to parallelism 1, through the actuator's Flink backend.
    command = set_parallelism(
        f"compose-parallelism-{jid[:8]}",
        f"{CLUSTER}.{jid}",
        1,
        "tests/docker/test_flink_compose.py",
    )
    settings = Settings.from_env({"SCALEFOLD_BOOTSTRAP_SERVERS": stack.bootstrap})
    encoded = codec.encode(r.SCALING_COMMAND, command)
    produce(settings, settings.topics.commands, [(f"{CLUSTER}.{jid}".encode(), encoded)])
    outcomes = outcomes_of(stack, command["commandId"], f"{CLUSTER}.", timeout=300)
    assert [(o["status"], o["backend"]) for o in outcomes] == [("APPLIED", f"flink:{CLUSTER}")]
    requirements = flink(stack, f"/jobs/{jid}/resource-requirements")
    assert {v["parallelism"]["upperBound"] for v in requirements.values()} == {1}
    running_at(jobmanager, jid, 1)
    lowered = kept_rescale(jobmanager, api, jid, "UPDATE_REQUIREMENT")
    assert post_parallelism(lowered) == {"Source": 1, "Bucket": 1, "Sum": 1}
