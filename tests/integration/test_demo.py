"""`make demo`, the README's first command, as a user runs it: `scalefold demo` starts a
stack of its own (broker, scheduler, actuator, history service), runs its two jobs in
real time, and reads the history back with Spark SQL."""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.localstack.layout import RUN_ROOT
from tests.integration.scheduler_support import ROOT

HANG_GUARD = 900  # it takes 3-4 minutes: a demo still running by then hangs (no timing)
PNG = b"\x89PNG\r\n\x1a\n"
SMALL_FILE = 10 * 1024


@pytest.mark.exclusive
def test_the_demo_closes_the_loop_and_reads_its_history_back() -> None:
    pictures = [RUN_ROOT / "demo" / f"timeline-{job}.png" for job in ("orders", "clicks")]
    for picture in pictures:
        picture.unlink(missing_ok=True)  # only this run's pictures count

    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "demo"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD,
        check=False,
    )

    assert done.returncode == 0, done.stderr[-4000:]
    shown = done.stdout
    # the scheduler's rescales of both jobs, printed as they come
    assert "orders  rescale" in shown and "clicks  rescale" in shown, shown
    # clicks starts on 1 slot of 4: the history service provisions the rest and the
    # actuator's embedded cluster applies it, whose TaskManagers the scheduler then uses
    assert "clicks  history -> command PROVISION_TASK_MANAGERS" in shown, shown
    assert "clicks  actuator -> APPLIED" in shown, shown
    # then its requirements are lowered: the history service releases the idle slots
    assert "clicks  history -> command RELEASE_TASK_MANAGERS" in shown, shown
    assert "clicks  actuator -> APPLIED: released" in shown, shown
    # orders flaps (TaskManagers come and go): the history service raises its cooldown,
    # the actuator applies it and the scheduler takes the new configuration
    assert "orders  history -> command RAISE_COOLDOWN" in shown, shown
    assert "orders  actuator -> APPLIED: cooldown raised" in shown, shown
    assert "orders  updated jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling" in (
        shown
    ), shown
    # quiet by default: no library's INFO lines (matplotlib announced its font cache)
    assert " INFO " not in done.stderr, done.stderr[-4000:]
    # the history read back with Spark SQL holds both jobs' rescales
    _, history = shown.split("$ scalefold history sql", 1)
    assert "orders" in history and "clicks" in history, history
    for picture in pictures:
        assert picture.read_bytes().startswith(PNG), picture
    # its history's small files are bounded by design (issue 49: at most 30 under 10 KB):
    # a batch writes one file a table, a rescale's children being arrays in its row
    data_files = (RUN_ROOT / "demo" / "history" / "tables").glob("*/start_date=*/*.parquet")
    small = [path for path in data_files if path.stat().st_size < SMALL_FILE]
    assert len(small) <= 30, small
