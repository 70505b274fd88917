"""The closed loop, all real: a job below its desired parallelism -> the history service
sends a provisioning command -> the actuator provisions TaskManagers on the embedded
cluster -> the scheduler rescales the job up -> the new rescale is in the Parquet
history, and the command's outcome is APPLIED."""

from __future__ import annotations

import csv
import io
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from services.actuator.control import post
from services.contracts import Codec, Settings
from services.contracts import jobconfig as c
from services.contracts import records as r
from services.contracts.events import JobSubmitted, VertexSpec, to_record
from services.localstack import stack
from services.localstack.processes import ServiceProcess
from tests.integration.scheduler_support import (
    ROOT,
    ActuatorProcess,
    SchedulerProcess,
    consume_records,
)
from tests.kafka_support import consume, produce
from tests.patience import give_up_at

pytestmark = [pytest.mark.integration, pytest.mark.spark]

JOB = "loop"
QUICK = {
    c.RUNTIME_MODE: "external",
    c.SUBMISSION_STABILIZATION: "1 s",
    c.COOLDOWN: "3 s",
    c.EXECUTING_STABILIZATION: "2 s",
}


def history_sql(data_dir: Path, query: str) -> list[dict[str, str]]:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "services.cli",
            "history",
            "sql",
            query,
            "--data-dir",
            str(data_dir),
            "--format",
            "csv",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    return list(csv.DictReader(io.StringIO(result.stdout)))


def test_below_desired_is_provisioned_and_rescaled_up(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    scheduler = SchedulerProcess(kafka, tmp_path / "scheduler").start()
    actuator = ActuatorProcess(kafka, tmp_path / "actuator", "--provisioning-delay", "1").start()
    history = ServiceProcess(
        "history",
        (
            "history",
            "run",
            "--data-dir",
            str(tmp_path / "history"),
            "--trigger-seconds",
            "1",
            "--plan-interval",
            "2",
            "--provision-grace",
            "10",
        ),
        tmp_path,
    )
    stack.start(history, kafka)
    try:
        scheduler.wait_ready()
        actuator.wait_ready()
        stack.wait_logged(history, stack.HISTORY_READY)
        vertices = (VertexSpec("source", "Source", "default", "default", 4, None),)
        submitted = JobSubmitted(
            JOB, int(time.time() * 1000), JOB, vertices, None, tuple(sorted(QUICK.items()))
        )
        produce(
            kafka, kafka.topics.job_events, [(JOB.encode(), codec.encode(*to_record(submitted)))]
        )
        # Runs at 1 of 4. The grace outlasts the TaskManager's way to the history on a busy
        # machine (a CI run took over 3 s): the first command rests on the job running at 1.
        post(actuator.port, "/taskmanagers", job=JOB, count=1, slots=1)

        commands = consume(kafka, kafka.topics.commands, lambda got: len(got) >= 1, timeout=180)
        command = codec.decode(commands[0].value).record
        assert (command["jobId"], command["action"], command["amount"]) == (
            JOB,
            "PROVISION_TASK_MANAGERS",
            3,
        )
        assert command["evidence"], "the command names the rescales it rests on"

        def scaled_up(records: list[dict[str, Any]]) -> bool:
            return any(
                rec["terminalState"] == "COMPLETED"
                and rec["vertices"][0]["postRescaleParallelism"] == 4
                for rec in records
            )

        records = consume_records(codec, kafka, scaled_up, timeout=120)
        assert scaled_up(records)
        outcomes = consume(
            kafka, kafka.topics.command_outcomes, lambda got: len(got) >= 1, timeout=60
        )
        outcome = codec.decode(outcomes[0].value).record
        assert (outcome["commandId"], outcome["status"]) == (command["commandId"], "APPLIED")

        deadline = give_up_at(120)
        rows: list[dict[str, str]] = []
        while time.monotonic() < deadline:
            rows = history_sql(
                tmp_path / "history",
                f"SELECT trigger_cause, terminal_state, total_post_rescale_slots FROM rescales "
                f"WHERE job_id = '{JOB}' AND terminal_state = 'COMPLETED' ORDER BY start_timestamp_ms",
            )
            if any(row["total_post_rescale_slots"] == "4" for row in rows):
                break
            time.sleep(3)
        assert [row["total_post_rescale_slots"] for row in rows] == ["1", "4"]
        assert rows[-1]["trigger_cause"] == "NEW_RESOURCE_AVAILABLE"
        assert codec.decode(commands[0].value).schema == r.SCALING_COMMAND
    finally:
        history.stop()
        actuator.stop()
        scheduler.stop()
