"""docker-compose.yml, run for real: the whole pipeline on a Spark standalone cluster, driven
from the host through published ports, `docker compose exec` and the `scalefold` CLI.

The tests share one stack (two scheduler workers) and run in this order; each uses its own
job ids. Expected rescale records come from `scalefold replay` of the very log produced.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from tests.docker.stack import (
    Stack,
    engine_volumes,
    first_provision,
    poll,
    provisions_settled,
    replayed,
    revisions,
    split,
    submit_short_job,
    workload,
)

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
    if set(have) != set(want):  # what each worker said and counted, for the report
        workers = range(1, len(stack.containers("scheduler")) + 1)
        print(
            stack.run("ps", "-a", check=False),
            *(f"scheduler-{n} metrics: {metrics_or_why(stack, n)}" for n in workers),
            stack.logs_tail(300, "scheduler"),
            sep="\n",
            file=sys.stderr,
        )
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


def metrics_or_why(stack: Stack, index: int) -> object:
    try:
        return stack.metrics(index)
    except (OSError, AssertionError, subprocess.SubprocessError) as error:
        return f"unavailable: {error}"


def history_rows(stack: Stack, prefix: str) -> list[dict[str, str]]:
    """The latest revision of each rescale (view `rescales`) and every stored revision
    (`raw_rescales`) of the prefix's jobs, in one Spark SQL query on the cluster."""
    columns = "job_id, rescale_uuid, revision, rescale_attempt_id"
    where = f"WHERE job_id LIKE '{prefix}%'"
    return stack.sql(
        f"SELECT 'latest' AS kind, {columns} FROM rescales {where} "
        f"UNION ALL SELECT 'raw' AS kind, {columns} FROM raw_rescales {where}"
    )


Results = dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]]
"""job-id prefix -> (replay's records, the rescales topic's records) of those jobs"""


def check_history(stack: Stack, prefix: str, results: Results) -> None:
    """For each job-id prefix: history rows == distinct rescales (latest revisions as replay
    says), attempt ids 1..n per job (no gap), and the Parquet tables hold exactly the topic's
    records (no duplicate write, nothing lost)."""
    latest: dict[str, dict[str, int]] = {}
    topic: dict[str, Counter[tuple[str, int]]] = {}
    for part, (expected, on_topic) in results.items():
        newest: dict[str, int] = {}
        for record in expected:
            uuid = record["rescaleUuid"]
            newest[uuid] = max(record["revision"], newest.get(uuid, 0))
        latest[part] = newest
        topic[part] = Counter((r["rescaleUuid"], r["revision"]) for r in on_topic)

    def of(rows: list[dict[str, str]], part: str, kind: str) -> list[dict[str, str]]:
        return [r for r in rows if r["kind"] == kind and r["job_id"].startswith(part)]

    def stored(rows: list[dict[str, str]], part: str) -> Counter[tuple[str, int]]:
        return Counter((r["rescale_uuid"], int(r["revision"])) for r in of(rows, part, "raw"))

    def caught_up(rows: list[dict[str, str]]) -> bool:
        return all(
            {r["rescale_uuid"]: int(r["revision"]) for r in of(rows, part, "latest")}
            == latest[part]
            and stored(rows, part) == topic[part]
            for part in results
        )

    rows = poll(lambda: history_rows(stack, prefix), caught_up, timeout=600, pause=5)
    for part in results:
        current = of(rows, part, "latest")
        assert len(current) == len(latest[part]), f"{part}: history rows != distinct rescales"
        assert {r["rescale_uuid"]: int(r["revision"]) for r in current} == latest[part], part
        attempts: dict[str, list[int]] = {}
        for row in current:
            attempts.setdefault(row["job_id"], []).append(int(row["rescale_attempt_id"]))
        for job, ids in attempts.items():
            assert sorted(ids) == list(range(1, len(ids) + 1)), f"{job}: attempts {sorted(ids)}"
        assert stored(rows, part) == topic[part], f"{part}: Parquet != the topic's records"


def events_folded(stack: Stack) -> float:
    total = 0.0
    for index in range(1, len(stack.containers("scheduler")) + 1):
        total += stack.metrics(index).get("scalefold_scheduler_events_in_total", 0.0)
    return total


def sigkill_mid_stream(
    stack: Stack,
    log: Path,
    prefix: str,
    *,
    started: Callable[[], bool],
    kill: Callable[[], object],
) -> list[dict[str, Any]]:
    """Produce half the log, SIGKILL a part once `started()` says it is at work, produce the
    other half while it is down, `up -d --wait`; return the topic's records once they hold
    exactly what replay says (every input folded once)."""
    expected = replayed(log)
    first, second = split(log, 2)
    stack.scalefold("produce", "--from", str(first))
    assert poll(started, bool, timeout=300, pause=0.2), f"{prefix}: never saw the part at work"
    kill()
    stack.scalefold("produce", "--from", str(second))
    stack.run("up", "-d", "--wait", "--scale", "scheduler=2")
    return wait_for_rescales(stack, prefix, expected)


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
        "history-api",
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
    # The rescale REST API over the history's tables, on 127.0.0.1 (docs/rest-api.md).
    assert "jobs" in stack.http_json("history-api", 8082, "/jobs")
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
    check_history(stack, "split-", {"split-": (expected, stack.records("rescales", "split-"))})
    # `history sql` asks the service's SQL endpoint (Spark Connect), so the query runs in the
    # service's own application on the cluster; without the endpoint it would start an
    # application of its own. Either way its executors ran on the worker.
    after = stack.http_json("spark-master", 8080, "/json/")
    new_apps = {app["id"] for app in after["completedapps"]} - before
    apps = new_apps or {app["id"] for app in after["activeapps"]}
    assert apps and all(
        app["name"] == "scalefold-history"
        for app in after["completedapps"] + after["activeapps"]
        if app["id"] in apps
    )
    worker = json.loads(
        stack.exec(
            "spark-worker",
            "python3",
            "-c",
            "import urllib.request as u; print(u.urlopen('http://127.0.0.1:8081/json/').read().decode())",
        )
    )
    ran = {e["appid"] for e in worker["finishedexecutors"] + worker["executors"]}
    assert apps <= ran, "the worker ran no executor for the query"
    assert any(e["appid"] == master["activeapps"][0]["id"] for e in worker["executors"])


def test_closed_loop_provisions_a_job_below_its_desired_parallelism(stack: Stack) -> None:
    job = "loop-1"
    submit_short_job(stack, job, parallelism=4)
    port = str(stack.port("actuator", 6067))
    stack.scalefold("cluster", "--port", port, "add-taskmanagers", "--job", job, "--count", "1")
    command = first_provision(stack, job, desired=4)

    def scaled_up(records: list[dict[str, Any]]) -> bool:
        return any(
            r["terminalState"] == "COMPLETED" and r["vertices"][0]["postRescaleParallelism"] == 4
            for r in records
        )

    assert scaled_up(poll(lambda: stack.records("rescales", job), scaled_up, timeout=300))
    assert provisions_settled(stack, job)[0] in ("APPLIED", "SUPERSEDED"), command


def test_sigkill_of_scheduler_history_or_worker_mid_stream_loses_and_repeats_nothing(
    stack: Stack, tmp_path: Path
) -> None:
    """`docker compose kill` (SIGKILL) of each part in turn, each with its own jobs; then one
    Spark SQL query checks the history of all three (a query is a Spark application: slow)."""
    folded = events_folded(stack)

    def rescales_seen(prefix: str) -> Callable[[], bool]:
        return lambda: bool(stack.records("rescales", prefix))

    parts = {
        "scheduler": ("kill-sched-", lambda: events_folded(stack) > folded),
        "history": ("kill-hist-", rescales_seen("kill-hist-")),
        "spark-worker": ("kill-worker-", rescales_seen("kill-worker-")),
    }
    results = {}
    for service, (prefix, started) in parts.items():
        log = workload(tmp_path / f"{prefix}.jsonl", prefix, 40)
        results[prefix] = (
            replayed(log),
            sigkill_mid_stream(
                stack,
                log,
                prefix,
                started=started,
                kill=partial(stack.run, "kill", service),
            ),
        )
    check_history(stack, "kill-", results)


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


def test_schedulers_killed_round_after_round_lose_and_repeat_nothing(
    stack: Stack, tmp_path: Path
) -> None:
    """Four rounds of a SIGKILL mid-stream, both workers and one of them in turn, each
    round with its own jobs that end exactly as replay says. Every restart and takeover
    is a Faust recovery: until fastpath.SeekFirstRecovery, one in a few of them dropped
    the first messages it fetched (a 16-round loop lost 40 revisions in its third)."""
    for round_ in range(4):
        prefix = f"again-{round_}-"
        log = workload(tmp_path / f"{prefix}.jsonl", prefix, 24)
        folded = events_folded(stack)

        def started(before: float = folded) -> bool:
            return events_folded(stack) > before

        if round_ % 2 == 0:
            kill: Callable[[], object] = partial(stack.run, "kill", "scheduler")
        else:
            victim = stack.containers("scheduler")[round_ // 2 % 2]["Name"]
            kill = partial(
                subprocess.run, ["docker", "kill", "--signal", "KILL", victim], check=True
            )
        sigkill_mid_stream(
            stack,
            log,
            prefix,
            started=started,
            kill=kill,
        )


def test_down_v_leaves_nothing_behind(stack: Stack) -> None:
    stack.run("down", "-v", "--remove-orphans", "--timeout", "20")
    left = set(engine_volumes()) - set(stack.volumes_before)
    assert not left, f"volumes left: {left}"  # anonymous ones carry no project label
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
