"""docker-compose.yml, run for real: the whole pipeline on a Spark standalone cluster, driven
from the host through published ports, `docker compose exec` and the `scalefold` CLI.

The tests share one stack (two scheduler workers) and run in this order; each uses its own
job ids. Expected rescale records come from `scalefold replay` of the very log produced.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.docker.stack import Stack, poll, replayed, revisions, split, workload

HEALTHY = "healthy"


def wait_for_rescales(
    stack: Stack, prefix: str, expected: list[dict[str, Any]], timeout: float = 420
) -> list[dict[str, Any]]:
    """The rescales topic's records of the prefix's jobs, once every expected one is there."""
    want = revisions(expected)

    def complete(got: list[dict[str, Any]]) -> bool:
        return set(revisions(got)) >= set(want)

    received = poll(lambda: stack.records("rescales", prefix), complete, timeout)
    have = revisions(received)
    assert set(have) == set(want), (
        f"lost {len(set(want) - set(have))}, invented {len(set(have) - set(want))} revisions"
    )
    assert have == want, "a revision differs from what replay emits"
    for record in received:  # a re-sent revision (after a crash) is the same record again
        assert (
            revisions([record])[(record["rescaleUuid"], record["revision"])]
            == want[(record["rescaleUuid"], record["revision"])]
        )
    return received


def history_rows(stack: Stack, prefix: str) -> list[dict[str, str]]:
    """The latest revision of each rescale (view `rescales`) and every stored revision
    (`raw_rescales`) of the prefix's jobs, in one Spark SQL query on the cluster."""
    columns = "job_id, rescale_uuid, revision, rescale_attempt_id"
    where = f"WHERE job_id LIKE '{prefix}%'"
    return stack.sql(
        f"SELECT 'latest' AS kind, {columns} FROM rescales {where} "
        f"UNION ALL SELECT 'raw' AS kind, {columns} FROM raw_rescales {where}"
    )


def check_history(
    stack: Stack, prefix: str, expected: list[dict[str, Any]], on_topic: list[dict[str, Any]]
) -> None:
    """History rows == distinct rescales (latest revisions as replay says), attempt ids
    1..n per job (no gap), and exactly the topic's records stored (no duplicate write)."""
    latest: dict[str, int] = {}
    for record in expected:
        latest[record["rescaleUuid"]] = max(
            record["revision"], latest.get(record["rescaleUuid"], 0)
        )
    topic = Counter((r["rescaleUuid"], r["revision"]) for r in on_topic)

    def stored(rows: list[dict[str, str]]) -> Counter[tuple[str, int]]:
        return Counter((r["rescale_uuid"], int(r["revision"])) for r in rows if r["kind"] == "raw")

    def caught_up(rows: list[dict[str, str]]) -> bool:
        done = {r["rescale_uuid"]: int(r["revision"]) for r in rows if r["kind"] == "latest"}
        return done == latest and stored(rows) == topic

    rows = poll(lambda: history_rows(stack, prefix), caught_up, timeout=600, pause=5)
    newest = [r for r in rows if r["kind"] == "latest"]
    assert len(newest) == len(latest), "history rows != distinct rescales"
    assert {r["rescale_uuid"]: int(r["revision"]) for r in newest} == latest
    attempts: dict[str, list[int]] = {}
    for row in newest:
        attempts.setdefault(row["job_id"], []).append(int(row["rescale_attempt_id"]))
    for job, ids in attempts.items():
        assert sorted(ids) == list(range(1, len(ids) + 1)), f"{job}: attempt ids {sorted(ids)}"
    assert stored(rows) == topic, "the Parquet tables hold other revisions than the topic"


def events_folded(stack: Stack) -> float:
    total = 0.0
    for index in range(1, len(stack.containers("scheduler")) + 1):
        total += stack.metrics(index).get("scalefold_scheduler_events_in_total", 0.0)
    return total


def sigkill_mid_stream(
    stack: Stack,
    tmp_path: Path,
    prefix: str,
    *,
    started: Callable[[], bool],
    kill: Callable[[], object],
    jobs: int = 40,
) -> None:
    """Produce half a workload, SIGKILL a part once `started()` says it is at work, produce
    the other half while it is down, `up -d --wait`, then check topic and history."""
    log = workload(tmp_path / f"{prefix}.jsonl", prefix, jobs)
    expected = replayed(log)
    first, second = split(log, 2)
    stack.scalefold("produce", "--from", str(first))
    assert poll(started, bool, timeout=300, pause=0.2), "never saw the part at work"
    kill()
    stack.scalefold("produce", "--from", str(second))
    stack.run("up", "-d", "--wait", "--scale", "scheduler=2")
    on_topic = wait_for_rescales(stack, prefix, expected)
    check_history(stack, prefix, expected, on_topic)


def test_every_service_is_healthy_and_only_on_loopback(stack: Stack) -> None:
    rows = [json.loads(line) for line in stack.run("ps", "-a", "--format", "json").splitlines()]
    by_service: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        by_service.setdefault(row["Service"], []).append(row)
    assert set(by_service) == {
        "kafka",
        "topics",
        "scheduler",
        "actuator",
        "spark-master",
        "spark-worker",
        "history",
    }
    assert len(by_service["scheduler"]) == 2
    for service, containers in by_service.items():
        for container in containers:
            if service == "topics":
                assert container["State"] == "exited" and container["ExitCode"] == 0
                continue
            assert container["Health"] == HEALTHY, f"{container['Name']}: {container['Status']}"
            for publisher in container.get("Publishers") or []:
                if publisher.get("PublishedPort"):
                    assert publisher["URL"] == "127.0.0.1", f"{service} publishes {publisher}"
    topics = stack.scalefold("topics")
    for name in ("job-events", "rescales", "commands", "command-outcomes", "dead-letters"):
        assert f"scalefold.{name} " in topics


def test_produced_jobs_rescale_and_two_schedulers_split_the_partitions(
    stack: Stack, tmp_path: Path
) -> None:
    log = workload(tmp_path / "split.jsonl", "split-", 24)
    expected = replayed(log)
    stack.scalefold("produce", "--from", str(log))
    wait_for_rescales(stack, "split-", expected)
    folded = [stack.metrics(i).get("scalefold_scheduler_events_in_total", 0) for i in (1, 2)]
    assert all(folded), f"a scheduler worker got no partitions: {folded}"


def test_history_sql_is_computed_on_the_spark_cluster(stack: Stack, tmp_path: Path) -> None:
    master = stack.http_json("spark-master", 8080, "/json/")
    assert master["aliveworkers"] >= 1
    assert [app["name"] for app in master["activeapps"]] == ["scalefold-history"]
    before = {app["id"] for app in master["completedapps"]}
    expected = replayed(workload(tmp_path / "split.jsonl", "split-", 24))  # the previous test's
    on_topic = stack.records("rescales", "split-")
    check_history(stack, "split-", expected, on_topic)
    # The query ran as its own application on the cluster; its executors ran on the worker.
    after = stack.http_json("spark-master", 8080, "/json/")
    queries = [app for app in after["completedapps"] if app["id"] not in before]
    assert queries and all(app["name"] == "scalefold-history" for app in queries)
    worker = json.loads(
        stack.exec(
            "spark-worker",
            "python3",
            "-c",
            "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8081/json/').read().decode())",
        )
    )
    ran = {executor["appid"] for executor in worker["finishedexecutors"]}
    assert {app["id"] for app in queries} <= ran, "the worker ran no executor for the query"
    assert any(e["appid"] == master["activeapps"][0]["id"] for e in worker["executors"])


def test_closed_loop_provisions_a_job_below_its_desired_parallelism(stack: Stack) -> None:
    job = "loop-1"
    quick = {
        "jobmanager.adaptive-scheduler.submission.resource-stabilization-timeout": "1 s",
        "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "3 s",
        "jobmanager.adaptive-scheduler.executing.resource-stabilization-timeout": "2 s",
    }
    vertices = [
        {"id": "source", "name": "Source", "slotSharingGroupId": "default", "parallelism": 4}
    ]
    stack.scalefold(
        "produce",
        "job-submitted",
        "--job-id",
        job,
        "--job-name",
        job,
        "--vertices",
        json.dumps(vertices),
        "--configuration",
        json.dumps(quick),
    )
    port = str(stack.port("actuator", 6067))
    stack.scalefold("cluster", "--port", port, "add-taskmanagers", "--job", job, "--count", "1")
    commands = poll(lambda: stack.records("commands", job), bool, timeout=300)
    command = commands[0]
    assert (command["action"], command["amount"]) == ("PROVISION_TASK_MANAGERS", 3)

    def scaled_up(records: list[dict[str, Any]]) -> bool:
        return any(
            r["terminalState"] == "COMPLETED" and r["vertices"][0]["postRescaleParallelism"] == 4
            for r in records
        )

    assert scaled_up(poll(lambda: stack.records("rescales", job), scaled_up, timeout=300))
    outcomes = poll(
        lambda: [
            o
            for o in stack.records("command-outcomes", "")
            if o["commandId"] == command["commandId"]
        ],
        bool,
        timeout=120,
    )
    assert [o["status"] for o in outcomes] == ["APPLIED"]


def test_scheduler_sigkill_mid_stream_folds_every_input_once(stack: Stack, tmp_path: Path) -> None:
    base = events_folded(stack)
    sigkill_mid_stream(
        stack,
        tmp_path,
        "kill-sched-",
        started=lambda: events_folded(stack) > base,
        kill=lambda: stack.run("kill", "scheduler"),
    )


def test_history_sigkill_mid_stream_loses_and_repeats_nothing(stack: Stack, tmp_path: Path) -> None:
    sigkill_mid_stream(
        stack,
        tmp_path,
        "kill-hist-",
        started=lambda: bool(stack.records("rescales", "kill-hist-")),
        kill=lambda: stack.run("kill", "history"),
    )


def test_spark_worker_sigkill_mid_stream_loses_and_repeats_nothing(
    stack: Stack, tmp_path: Path
) -> None:
    sigkill_mid_stream(
        stack,
        tmp_path,
        "kill-worker-",
        started=lambda: bool(stack.records("rescales", "kill-worker-")),
        kill=lambda: stack.run("kill", "spark-worker"),
    )


def test_one_of_two_schedulers_killed_the_other_takes_its_partitions(
    stack: Stack, tmp_path: Path
) -> None:
    survivor, victim = stack.containers("scheduler")
    log = workload(tmp_path / "takeover.jsonl", "takeover-", 24)
    expected = replayed(log)
    first, second = split(log, 2)
    stack.scalefold("produce", "--from", str(first))
    subprocess.run(["docker", "kill", "--signal", "KILL", victim["Name"]], check=True)
    stack.scalefold("produce", "--from", str(second))
    wait_for_rescales(stack, "takeover-", expected)  # with one worker left
    assert [c["Name"] for c in stack.containers("scheduler")] == [survivor["Name"]]
    stack.run("up", "-d", "--wait", "--scale", "scheduler=2")


def test_down_v_leaves_nothing_behind(stack: Stack) -> None:
    stack.run("down", "-v", "--remove-orphans", "--timeout", "20")
    label = f"label=com.docker.compose.project={stack.project}"
    for kind in ("container", "network", "volume"):
        listed = subprocess.run(
            ["docker", kind, "ls", "-q", "--filter", label]
            + (["-a"] if kind == "container" else []),
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        assert listed == [], f"{kind}s left: {listed}"
