"""The real Flink 2.3.0 cluster of the tests, and `scalefold flink` against it.

The session's cluster (conftest.py) with the sample job (deploy/flink/job): it runs on
the adaptive scheduler with the waits we set, a new TaskManager rescales it, a lost one
restarts it (or fails it, without a restart strategy), and the CLI changes it.
"""

from __future__ import annotations

import pytest

from services.cli import main
from tests.flink.flink_support import FlinkTestCluster

SOURCE, BUCKET, SUM = "Source: Numbers", "Bucket", "Sum -> Discard: Writer"


def causes(history: list[dict[str, object]]) -> list[tuple[object, object]]:
    return [(rescale["triggerCause"], rescale["terminalState"]) for rescale in history]


def no_task_stuck(job: dict[str, object]) -> None:
    vertices = job["vertices"]
    assert isinstance(vertices, list)
    for vertex in vertices:
        assert vertex["tasks"]["FINISHED"] == 0, vertex
        assert vertex["tasks"]["RUNNING"] == vertex["parallelism"], vertex


def test_submit_runs_the_sample_job_on_the_adaptive_scheduler(flink: FlinkTestCluster) -> None:
    flink.add_taskmanagers(2)
    jid = flink.submit("--max-parallelism", "4", "--checkpoint-interval", "1500")
    job = flink.wait_running(jid, {BUCKET: 1, SUM: 1})

    assert job["schedulerType"] == "Adaptive"
    vertices = {vertex["name"]: vertex for vertex in job["vertices"]}
    assert {name: v["maxParallelism"] for name, v in vertices.items()} == {
        SOURCE: 1,
        BUCKET: 4,
        SUM: 4,
    }
    groups = {name: v["slotSharingGroupId"] for name, v in vertices.items()}
    assert groups[SOURCE] == groups[BUCKET] != groups[SUM]  # default and "sums"
    config = flink.rest.get_json(f"/jobs/{jid}/config")["execution-config"]
    assert "fixed delay" in config["restart-strategy"]
    assert flink.rest.get_json(f"/jobs/{jid}/checkpoints/config")["interval"] == 1500
    rescale_config = flink.rest.get_json(f"/jobs/{jid}/rescales/config")
    assert rescale_config["rescaleHistoryMax"] == 100
    assert rescale_config["executingCooldownTimeoutInMillis"] == 1000
    assert rescale_config["executingResourceStabilizationTimeoutInMillis"] == 2000
    assert rescale_config["submissionResourceStabilizationTimeoutInMillis"] == 1000
    assert causes(flink.history(jid)) == [("INITIAL_SCHEDULE", "COMPLETED")]
    slots = flink.rest.rescale_details(jid, flink.history(jid)[0]["rescaleUuid"])["slots"]
    assert sorted(group["slotSharingGroupName"] for group in slots.values()) == [
        "default",
        "sums",
    ]


def test_taskmanagers_joining_and_leaving_rescale_the_job_again_and_again(
    flink: FlinkTestCluster,
) -> None:
    """Added TaskManagers give NEW_RESOURCE_AVAILABLE rescales; a stopped one restarts the
    job smaller (RECOVERABLE_FAILOVER). After each, every task runs again: none is left
    FINISHED (a generator source rescaled past its splits would be)."""
    flink.add_taskmanagers(2)
    jid = flink.submit("--max-parallelism", "4")
    no_task_stuck(flink.wait_running(jid, {BUCKET: 1, SUM: 1}))

    (third,) = flink.add_taskmanagers(1)
    history = flink.wait_rescales(jid, 2)
    assert causes(history)[-1] == ("NEW_RESOURCE_AVAILABLE", "COMPLETED")
    flink.add_taskmanagers(1)
    history = flink.wait_rescales(jid, 3)
    assert causes(history)[-1] == ("NEW_RESOURCE_AVAILABLE", "COMPLETED")
    no_task_stuck(flink.wait_running(jid, {BUCKET: 2, SUM: 2}))

    flink.stop_taskmanager(third)
    history = flink.wait_rescales(jid, 4)
    assert "RECOVERABLE_FAILOVER" in [cause for cause, _ in causes(history)[3:]]
    job = flink.wait_running(jid, {})
    assert sum(v["parallelism"] for v in job["vertices"] if v["name"] != SOURCE) == 3
    no_task_stuck(job)

    flink.add_taskmanagers(1)
    no_task_stuck(flink.wait_running(jid, {BUCKET: 2, SUM: 2}))
    assert causes(flink.history(jid))[-1] == ("NEW_RESOURCE_AVAILABLE", "COMPLETED")


def test_without_a_restart_strategy_a_killed_taskmanager_fails_the_job(
    flink: FlinkTestCluster,
) -> None:
    """SIGKILL: no goodbye, the JobManager notices by the 5 s heartbeat timeout."""
    first, _ = flink.add_taskmanagers(2)
    jid = flink.submit("--max-parallelism", "2", "--restart", "none")
    flink.wait_running(jid, {BUCKET: 1, SUM: 1})
    assert (
        "restart deactivated"
        in flink.rest.get_json(f"/jobs/{jid}/config")["execution-config"][
            "restart-strategy"
        ].lower()
    )

    flink.stop_taskmanager(first, kill=True)
    job = flink.wait_state(jid, "FAILED", seconds=30.0)
    assert job["state"] == "FAILED"


def test_the_flink_cli_submits_sets_requirements_lists_and_cancels(
    flink: FlinkTestCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    flink.add_taskmanagers(4)
    rest = ["--rest", flink.url]
    assert main(["flink", "submit", *rest, "--max-parallelism", "4", "--rate", "5"]) == 0
    jid = capsys.readouterr().out.strip()
    flink.wait_running(jid, {BUCKET: 2, SUM: 2})

    bounds = [f"{BUCKET}=1:1", f"{SUM}=1:2"]  # the other vertices' stay as they are
    assert main(["flink", "requirements", *rest, "--job", jid, *bounds]) == 0
    shown = capsys.readouterr().out
    bucket = next(v["id"] for v in flink.job(jid)["vertices"] if v["name"] == BUCKET)
    assert f"{bucket}  1:1  {BUCKET}" in shown  # the id for a script, the name for a person
    flink.wait_running(jid, {BUCKET: 1, SUM: 2})
    assert ("UPDATE_REQUIREMENT", "COMPLETED") in causes(flink.history(jid))

    assert main(["flink", "requirements", *rest, "--job", jid, "Nope=1:1"]) == 1
    assert "no vertex 'Nope'" in capsys.readouterr().err
    assert main(["flink", "jobs", *rest]) == 0
    assert f"{jid}  RUNNING" in capsys.readouterr().out
    assert main(["flink", "cancel", *rest, jid]) == 0
    flink.wait_state(jid, "CANCELED")
    assert main(["flink", "cancel", *rest, "0" * 32]) == 1
    assert "404" in capsys.readouterr().err
