"""The actuator's Flink backend on the real Flink 2.3.0 of the test session and a real broker.

Commands for `t.<Flink job id>` go to the Flink cluster `t` (`--flink-local t=DIR`): a
release on a job whose TaskManagers are all busy stops none; a provision starts real
TaskManager processes that register; SET_PARALLELISM PUTs the requirements the
Kubernetes Operator's way; RAISE_COOLDOWN is refused with the reason; each command gets
exactly one outcome, also across a kill -9 of the actuator; a provision starts no more
TaskManagers than the cap lets run; a provision whose basis saw fewer slots than Flink has
registered is SUPERSEDED and starts none. Flink refusing, not answering in time or unreachable
gives one FAILED outcome with what Flink said.
"""

from __future__ import annotations

import http.server
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

from services.actuator.flinkbackend import FlinkBackend
from services.actuator.launcher import LocalLauncher
from services.contracts import Codec, Settings
from services.contracts import records as r
from services.contracts.commands import CommandBasis, ScalingCommand
from services.localstack.layout import cache_dir
from tests.flink.flink_support import FlinkTestCluster
from tests.integration.conftest import broker_settings, kafka  # noqa: F401  (fixtures)
from tests.integration.scheduler_support import ActuatorProcess
from tests.kafka_support import consume, produce

SUM = "Sum"
STALE = msgspec.to_builtins(  # the basis as the command's Avro datum holds it
    CommandBasis(
        rescale_uuid="afc103edd691c5267ae684fefa3ae972",
        revision=1,
        state="WaitingForResources",
        available_slots=0,
        desired_slots=2,
        observed_at_millis=1,
        decided_at_millis=2,
        fresh_as_of_millis=1,
    )
)
"""What a planner a minute behind saw of a job that waited for resources with no slot."""


def command(command_id: str, job: str, action: str, amount: int, **extra: Any) -> dict[str, Any]:
    return {
        "commandId": command_id,
        "jobId": job,
        "action": action,
        "amount": amount,
        "reason": "test",
        "evidence": [],
        "issuedAtMillis": 1,
        **extra,
    }


def typed(record: dict[str, Any]) -> ScalingCommand:
    """The command as the actuator holds it, for a backend called directly."""
    return ScalingCommand.from_record(record)


def send(settings: Settings, codec: Codec, *commands: dict[str, Any]) -> None:
    messages = [(c["jobId"].encode(), codec.encode(r.SCALING_COMMAND, c)) for c in commands]
    produce(settings, settings.topics.commands, messages)


def outcomes(
    settings: Settings, codec: Codec, count: int, timeout: float = 150.0
) -> list[dict[str, Any]]:
    topic = settings.topics.command_outcomes
    received = consume(settings, topic, lambda got: len(got) >= count, timeout)
    return [codec.decode(m.value).record for m in received]


def by_id(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for record in records:
        assert record["commandId"] not in found, f"two outcomes for {record['commandId']}"
        found[record["commandId"]] = record
    return found


def holding(flink: FlinkTestCluster, tm: str) -> list[Any]:
    return list(flink.rest.get_json(f"/taskmanagers/{tm}").get("allocatedSlots") or [])


@pytest.fixture
def actuator(kafka: Settings, flink: FlinkTestCluster, tmp_path: Path) -> Iterator[ActuatorProcess]:  # noqa: F811
    process = ActuatorProcess(
        kafka, tmp_path / "actuator", "--flink-local", f"t={flink.cluster.directory}"
    ).start()
    process.wait_ready()
    yield process
    process.stop()


def test_commands_on_a_real_flink_each_get_one_outcome_and_a_release_takes_no_busy_taskmanager(
    kafka: Settings,  # noqa: F811
    codec: Codec,
    flink: FlinkTestCluster,
    actuator: ActuatorProcess,
) -> None:
    busy = flink.add_taskmanagers(2)
    jid = flink.submit("--parallelism", "1", "--max-parallelism", "4")
    job = f"t.{jid}"
    # two slot-sharing groups at parallelism 1: the job holds both TaskManagers' slots
    flink.wait_running(jid, {})
    assert all(holding(flink, tm) for tm in busy)
    send(kafka, codec, command("release-busy", job, "RELEASE_TASK_MANAGERS", 2))
    (refused,) = outcomes(kafka, codec, 1)
    assert refused["status"] == "REJECTED", refused
    assert refused["backend"] == "flink:t"
    assert "no idle TaskManager" in refused["message"]
    assert set(busy) <= set(flink.running_taskmanagers()) and set(busy) <= flink.registered()

    send(kafka, codec, command("provision-1", job, "PROVISION_TASK_MANAGERS", 1))
    provisioned = by_id(outcomes(kafka, codec, 2))["provision-1"]
    assert provisioned["status"] == "APPLIED", provisioned
    assert provisioned["details"]["taskManagers"] == "tm-provision-1-0"
    assert "tm-provision-1-0" in flink.registered()
    # the job is at its upper bound: the new TaskManager stays idle, and only it goes
    send(kafka, codec, command("release-1", job, "RELEASE_TASK_MANAGERS", 2))
    released = by_id(outcomes(kafka, codec, 3))["release-1"]
    assert released["status"] == "APPLIED", released
    assert released["details"]["taskManagers"] == "tm-provision-1-0"
    assert sorted(flink.running_taskmanagers()) == sorted(busy)
    assert flink.job(jid)["state"] == "RUNNING"
    assert all(holding(flink, tm) for tm in busy)

    # a PROVISION decided on 0 slots while Flink has 2 registered: SUPERSEDED, none started
    stale = command("provision-stale", job, "PROVISION_TASK_MANAGERS", 2, basis=STALE)
    send(kafka, codec, stale)
    superseded = by_id(outcomes(kafka, codec, 4))["provision-stale"]
    assert superseded["status"] == "SUPERSEDED", superseded
    assert superseded["message"].startswith(f"Flink cluster t (job {jid} RUNNING")
    assert (
        "holds 2 slot(s) of registered TaskManagers and 0 more are starting"
        in (superseded["message"])
    )
    assert superseded["details"]["heldSlots"] == "2"
    assert superseded["details"]["seenSlots"] == "0"
    assert sorted(flink.running_taskmanagers()) == sorted(busy)  # none started

    # at parallelism 1 the source and Bucket chain into one vertex; Sum is the other
    vertices = {v["name"].split(" ")[0].rstrip(":"): v["id"] for v in flink.job(jid)["vertices"]}
    send(
        kafka,
        codec,
        command("parallelism-1", job, "SET_PARALLELISM", 0, parallelism={vertices[SUM]: 2}),
        command("cooldown-1", job, "RAISE_COOLDOWN", 120_000),
    )
    done = by_id(outcomes(kafka, codec, 6))
    assert done["parallelism-1"]["status"] == "APPLIED", done["parallelism-1"]
    requirements = flink.rest.requirements(jid)
    assert requirements[vertices[SUM]]["parallelism"] == {"lowerBound": 1, "upperBound": 2}
    untouched = [v for k, v in vertices.items() if k != SUM]
    assert all(requirements[v]["parallelism"]["upperBound"] == 1 for v in untouched)
    assert done["cooldown-1"]["status"] == "REJECTED"
    assert "cannot change a running job's cooldown" in done["cooldown-1"]["message"]

    # kill -9, start again, deliver a command again: no second outcome, no new TaskManager
    actuator.kill()
    actuator.start().wait_ready()
    send(kafka, codec, command("provision-1", job, "PROVISION_TASK_MANAGERS", 1))
    source = vertices["Source"]  # its max parallelism is 1: Flink refuses 3
    send(kafka, codec, command("parallelism-2", job, "SET_PARALLELISM", 0, parallelism={source: 3}))
    after = by_id(outcomes(kafka, codec, 7))  # by_id: no command answered twice
    assert after["parallelism-2"]["status"] == "FAILED", after["parallelism-2"]
    assert "Flink refused" in after["parallelism-2"]["message"]
    assert sorted(flink.running_taskmanagers()) == sorted(busy)


class Answering(http.server.BaseHTTPRequestHandler):
    """A JobManager that answers GET /jobs/:jid as RUNNING and everything else badly."""

    status = 500
    delay = 0.0

    def do_GET(self) -> None:
        if self.path.startswith("/jobs/") and self.path.count("/") == 2:
            self._answer(200, b'{"state": "RUNNING"}')
        else:
            self._bad()

    def do_PUT(self) -> None:
        self._bad()

    def _bad(self) -> None:
        time.sleep(self.delay)
        body = b'{"errors": ["Internal server error.", "<Exception on server side:\\njava.lang.IllegalStateException: no\\n\\tat X"]}'
        self._answer(self.status, body)

    def _answer(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def bad_flink() -> Iterator[http.server.ThreadingHTTPServer]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Answering)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()


def test_flink_refusing_not_answering_or_unreachable_is_one_failed_outcome_each(
    bad_flink: http.server.ThreadingHTTPServer,
) -> None:
    url = f"http://127.0.0.1:{bad_flink.server_address[1]}"
    parallelism = typed(command("p", "x.j1", "SET_PARALLELISM", 2))
    refused = FlinkBackend("x", lambda: url, None).apply(parallelism)
    assert refused.status == "FAILED"
    assert "IllegalStateException: no" in refused.message
    Answering.delay = 2.0
    slow = FlinkBackend("x", lambda: url, None, timeout=0.5).apply(parallelism)
    assert slow.status == "FAILED" and "did not answer" in slow.message
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{free.getsockname()[1]}"
    gone = FlinkBackend("x", lambda: closed, None).apply(parallelism)
    assert gone.status == "FAILED" and "did not answer" in gone.message
    no_url = FlinkBackend("x", lambda: None, None).apply(parallelism)
    assert no_url.status == "FAILED"


def test_a_provision_redone_after_a_crash_starts_only_what_it_had_not_and_none_over_the_cap(
    flink: FlinkTestCluster,
) -> None:
    """The TaskManagers a command started before a crash are not started twice; with a
    cap of 3 running, a provision of 3 more starts 1, and the next one is REJECTED."""
    launcher = LocalLauncher(flink.cluster.directory, cache_dir({}), max_taskmanagers=3)
    launcher.start("tm-provision-9-0")  # as if the actuator died after starting the first
    jid = flink.submit("--parallelism", "1")
    backend = FlinkBackend("t", lambda: flink.url, launcher)
    result = backend.apply(typed(command("provision-9", f"t.{jid}", "PROVISION_TASK_MANAGERS", 2)))
    assert result.status == "APPLIED", result
    assert "1 started before a restart" in result.message
    assert sorted(flink.running_taskmanagers()) == ["tm-provision-9-0", "tm-provision-9-1"]

    capped = backend.apply(typed(command("provision-10", f"t.{jid}", "PROVISION_TASK_MANAGERS", 3)))
    assert capped.status == "APPLIED", capped
    assert capped.message.startswith("started 1 of 3 TaskManager(s) asked"), capped
    assert "cap 3 (--flink-max-taskmanagers), 2 ran before" in capped.message
    assert dict(capped.details)["taskManagers"] == "tm-provision-10-0"
    assert "tm-provision-10-0" in flink.registered()
    full = backend.apply(typed(command("provision-11", f"t.{jid}", "PROVISION_TASK_MANAGERS", 1)))
    assert full.status == "REJECTED", full
    assert "3 run on Flink cluster t, its cap is 3" in full.message
    assert "--flink-max-taskmanagers t=3" in full.message
    assert len(flink.running_taskmanagers()) == 3
