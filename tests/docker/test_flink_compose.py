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
import urllib.error
from collections.abc import Iterator
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.contracts import records as r
from tests.docker.conftest import project_name, stack_env, started
from tests.docker.stack import (
    COMPOSE_FILE,
    ROOT,
    Stack,
    flink_submit,
    outcomes_of,
    poll,
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


def history_api(stack: Stack, path: str) -> Any:
    """The history's REST API; None while it answers 404 (not in the tables yet)."""
    try:
        return stack.http_json("history-api", 8082, path)
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return None
        raise


def vertex_name(name: str) -> str:
    """A vertex's name's first word: Source (Flink's "Source: Numbers"), Bucket, Sum."""
    return name.split(" ", maxsplit=1)[0].rstrip(":")


def running_at(stack: Stack, jid: str, wanted: int) -> dict[str, int]:
    """Once Flink shows Bucket and Sum at `wanted` and every subtask running."""

    def look() -> dict[str, int]:
        job = flink(stack, f"/jobs/{jid}")
        counts = job.get("status-counts") or {}
        if job["state"] != "RUNNING" or counts.get("RUNNING", 0) != sum(counts.values()):
            return {}
        return {vertex_name(v["name"]): v["parallelism"] for v in job["vertices"]}

    def done(shown: dict[str, int]) -> bool:
        return shown.get("Bucket") == wanted and shown.get("Sum") == wanted

    shown = poll(look, done, timeout=300)
    assert done(shown), f"Flink shows {shown}, not Bucket and Sum at {wanted}"
    return shown


def flink_rescales(stack: Stack, jid: str, trigger: str) -> dict[str, Any]:
    """The job's rescale of `trigger` from the history's `flink_rescales` (history-api),
    with its details, once it is there COMPLETED; and that Flink's JobManager recorded
    the same rescale."""

    def look() -> dict[str, Any] | None:
        rows = history_api(stack, f"/jobs/{jid}/rescales/history?limit=1000") or []
        for row in rows:
            if row["triggerCause"] == trigger and row["terminalState"] == "COMPLETED":
                return history_api(  # type: ignore[no-any-return]
                    stack, f"/jobs/{jid}/rescales/details/{row['rescaleUuid']}"
                )
        return None

    found = poll(look, bool, timeout=600, pause=3)
    assert found, f"no COMPLETED {trigger} rescale of {jid} in flink_rescales"
    recorded = flink(stack, f"/jobs/{jid}/rescales/details/{found['rescaleUuid']}")
    assert (recorded["triggerCause"], recorded["terminalState"]) == (trigger, "COMPLETED")
    return found


def post_parallelism(details: dict[str, Any]) -> dict[str, int]:
    return {
        vertex_name(v["jobVertexName"]): v["postRescaleParallelism"]
        for v in details["vertices"].values()
    }


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
    assert "jobs" in history_api(flink_stack, "/jobs")


def test_closed_loop_on_the_real_flink_cluster(flink_stack: Stack, codec: Codec) -> None:
    stack = flink_stack
    rest = f"http://127.0.0.1:{stack.port('jobmanager', 8081)}"
    sample = ("--parallelism", "2", "--max-parallelism", "4", "--name", "compose-loop")
    jid = flink_submit(rest, *sample)
    # One TaskManager of 2 slots: Bucket and Sum (two slot-sharing groups) get one each.
    running_at(stack, jid, 1)
    flink_rescales(stack, jid, "INITIAL_SCHEDULE")

    # The operator's --scale: two more slots, and Flink rescales onto them.
    stack.run("up", "-d", "--wait", "--scale", "taskmanager=2", "taskmanager")
    assert flink(stack, "/overview")["taskmanagers"] == 2
    running_at(stack, jid, 2)
    scaled = flink_rescales(stack, jid, "NEW_RESOURCE_AVAILABLE")
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
    running_at(stack, jid, 1)
    lowered = flink_rescales(stack, jid, "UPDATE_REQUIREMENT")
    assert post_parallelism(lowered) == {"Source": 1, "Bucket": 1, "Sum": 1}
