"""`scalefold local`: `up --fresh` leaves nothing of the earlier run, and one service
restarts alone while the broker and the rest keep running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from services.contracts.settings import Settings
from services.localstack import ports, stack
from services.localstack.broker import _alive, _read_int
from tests.integration.scheduler_support import ROOT

pytestmark = pytest.mark.integration


def local(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "SCALEFOLD_BOOTSTRAP_SERVERS"}
    result = subprocess.run(
        [sys.executable, "-m", "services.cli", "local", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def bootstrap_of(run_dir: Path) -> str:
    return (run_dir / "bootstrap").read_text().strip()


def test_fresh_discards_the_earlier_run(tmp_path: Path) -> None:
    run_dir = tmp_path / "local"
    local("up", "--broker-only", "--run-dir", str(run_dir))
    try:
        admin = AdminClient({"bootstrap.servers": bootstrap_of(run_dir)})
        admin.create_topics([NewTopic("leftover", 1, 1)])["leftover"].result(30)
        leftovers = [
            run_dir / "history" / "tables" / "rescales" / "part-0.parquet",
            run_dir / "history" / "checkpoints" / "rescales" / "offsets" / "0",
            run_dir / "scheduler" / "v1" / "tables",
            run_dir / "scheduler.log",
            run_dir / "history.log",
            run_dir / "actuator.log",
        ]
        for path in leftovers:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("from the earlier run")
        mine = run_dir / "notes.txt"
        mine.write_text("the user's own")

        local("up", "--fresh", "--broker-only", "--run-dir", str(run_dir))

        assert [p for p in leftovers if p.exists()] == []
        assert not (run_dir / "history").exists() and not (run_dir / "scheduler").exists()
        assert mine.read_text() == "the user's own"
        topics = AdminClient({"bootstrap.servers": bootstrap_of(run_dir)}).list_topics(timeout=30)
        assert "leftover" not in topics.topics  # the broker's data is new
        assert f"{Settings().topic_prefix}job-events" in topics.topics  # and set up again
    finally:
        local("down", "--run-dir", str(run_dir))


def test_one_service_restarts_alone(tmp_path: Path) -> None:
    run_dir = tmp_path / "local"
    local("up", "--broker-only", "--run-dir", str(run_dir))
    try:
        settings = Settings(bootstrap_servers=bootstrap_of(run_dir))
        broker_pid = _read_int(run_dir / "broker.pid")
        scheduler = stack.scheduler_process(run_dir, ports.free_port())
        first = stack.start(scheduler, settings)
        stack.wait_ready(scheduler)

        result = local("restart", "scheduler", "--run-dir", str(run_dir))

        second = _read_int(run_dir / "scheduler.pid")
        assert second is not None and second != first and _alive(second)
        assert not _alive(first)
        assert _read_int(run_dir / "broker.pid") == broker_pid and broker_pid is not None
        assert _alive(broker_pid)
        assert "scheduler ready" in result.stderr

        runs = sorted(run_dir.glob("scheduler-*.log"))  # one log per run, the link to the newest
        assert len(runs) == 2 and (run_dir / "scheduler.log").resolve() == runs[-1].resolve()
        text = runs[-1].read_text(errors="replace")
        assert "scheduler ready" in text and "\x1b" not in text  # plain text in a file
        assert "not found in cluster metadata" not in text
        status = local("status", "--run-dir", str(run_dir)).stdout
        assert f"scheduler  running  pid {second}" in status, status
        metrics = next(line.split()[-1] for line in status.splitlines() if "metrics" in line)
        with urllib.request.urlopen(metrics, timeout=5) as response:  # the URL is where it listens
            assert response.status == 200 and b"scalefold" in response.read()
    finally:
        stack.stop_all(run_dir, lambda _: None)
        local("down", "--run-dir", str(run_dir))


def test_a_killed_service_is_started_again_by_its_supervisor(tmp_path: Path) -> None:
    run_dir = tmp_path / "local"
    local("up", "--broker-only", "--run-dir", str(run_dir))
    try:
        settings = Settings(bootstrap_servers=bootstrap_of(run_dir))
        scheduler = stack.scheduler_process(run_dir, ports.free_port())
        first = stack.start(scheduler, settings)
        stack.wait_ready(scheduler)

        os.kill(first, signal.SIGKILL)  # nobody calls `local up` or `local restart`

        deadline = time.monotonic() + 60
        while (second := scheduler.pid()) in (None, first) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert second not in (None, first), scheduler.supervisor_log.read_text()
        stack.wait_ready(scheduler)
        status = local("status", "--run-dir", str(run_dir)).stdout
        assert f"scheduler  running  pid {second}" in status, status
        assert "restarted 1 time by its supervisor" in status, status
        assert len(sorted(run_dir.glob("scheduler-*.log"))) == 2  # each run its own log
    finally:
        stack.stop_all(run_dir, lambda _: None)
        local("down", "--run-dir", str(run_dir))
    assert scheduler.pid() is None and scheduler.supervisor_pid() is None
    assert not _alive(second)


def test_status_with_nothing_running_says_so(tmp_path: Path) -> None:
    result = local("status", "--run-dir", str(tmp_path / "nothing"))
    assert result.stdout.startswith("nothing running")
