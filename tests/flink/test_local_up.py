"""`scalefold local up --flink` and `local down`, as a user runs them (processes, not calls).

Its own stack in a temporary run directory (the broker alone, and Flink), so it neither
meets nor touches `make up`'s, nor the session's cluster of the other Flink tests.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

from services.localstack.broker import _alive, _read_int
from tests.patience import patient


def scalefold(*args: str, timeout: float = 300.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "services.cli", *args],
        capture_output=True,
        text=True,
        timeout=patient(timeout),
        check=False,
        env={k: v for k, v in os.environ.items() if k != "SCALEFOLD_BOOTSTRAP_SERVERS"},
    )


def recorded_pids(run_dir: Path) -> dict[str, int]:
    files = [*run_dir.glob("*.pid"), *(run_dir / "flink").glob("*.pid")]
    return {path.name: pid for path in files if (pid := _read_int(path)) is not None}


def test_local_up_flink_starts_a_cluster_that_local_down_stops_entirely(tmp_path: Path) -> None:
    run_dir = tmp_path / "stack"
    where = ("--run-dir", str(run_dir))
    try:
        up = scalefold(
            "local", "up", "--broker-only", "--flink", "--flink-taskmanagers", "2", *where
        )
        assert up.returncode == 0, up.stderr
        url = (run_dir / "flink" / "rest.url").read_text().strip()
        with urllib.request.urlopen(f"{url}/overview", timeout=10) as answer:
            overview = json.load(answer)
        assert (overview["taskmanagers"], overview["slots-total"]) == (2, 2)

        status = scalefold("local", "status", *where)
        assert f"rest     {url}" in status.stdout
        assert "tm-1     running" in status.stdout and "tm-2     running" in status.stdout

        again = scalefold("local", "up", "--broker-only", "--flink", *where)  # idempotent
        assert again.returncode == 0, again.stderr
        assert (run_dir / "flink" / "rest.url").read_text().strip() == url
        stop = scalefold("flink", "taskmanager", "stop", *where)
        assert (stop.returncode, stop.stdout.strip()) == (0, "tm-2")
        added = scalefold("flink", "taskmanager", "add", *where)
        assert (added.returncode, added.stdout.strip()) == (0, "tm-3"), added.stderr
        pids = recorded_pids(run_dir)
        assert {"jobmanager.pid", "tm-1.pid", "tm-3.pid"} <= set(pids)
    finally:
        pids = recorded_pids(run_dir)
        down = scalefold("local", "down", *where)
    assert down.returncode == 0, down.stderr
    assert "stopped Flink's jobmanager" in down.stderr
    assert not [name for name, pid in pids.items() if _alive(pid)]
    assert "nothing running" in scalefold("local", "status", *where).stdout
