"""`make demo-flink` as a user runs it: `scalefold demo --flink` starts a stack of its own
with a real Flink 2.3.0, whose job starts short of TaskManagers; the history service's
commands provision real ones, a killed TaskManager is recovered from, and the end shows
Flink's records beside scalefold's predictions, a verdict on each pair (the demo fails
when a pair its observation decides disagrees), and a timeline picture of each."""

from __future__ import annotations

import subprocess
import sys

import pytest

from services.tools.flinkdemo import RUN_DIR
from tests.integration.scheduler_support import ROOT

HANG_GUARD = 1200  # set-up (Flink, Spark) plus at most 5 minutes of story: hung beyond
PNG = b"\x89PNG\r\n\x1a\n"


# alone: its agreement verdict compares Flink's state spans with the fold's within the
# bridge's observation resolution (1.4 s here); beside the docker-compose tests on CI's
# machine a span came out 1.58 s apart (2026-12-06): a known gap, docs/testing.md
@pytest.mark.exclusive(alone=True)
def test_the_flink_demo_closes_the_loop_on_a_real_flink() -> None:
    pictures = [RUN_DIR / f"timeline-{side}.png" for side in ("flink", "scalefold")]
    for picture in pictures:
        picture.unlink(missing_ok=True)  # only this run's pictures count

    done = subprocess.run(
        [sys.executable, "-m", "services.cli", "demo", "--flink"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=HANG_GUARD,
        check=False,
    )

    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    shown = done.stdout
    # the history service commands TaskManagers for the Flink job; the actuator starts them
    assert "history -> command PROVISION_TASK_MANAGERS" in shown, shown
    assert "actuator -> APPLIED: " in shown and "registered in" in shown, shown
    # Flink rescales onto them, loses one TaskManager, and restarts the job
    assert "flink   rescale " in shown and "RECOVERABLE_FAILOVER" in shown, shown
    assert "(not so after" not in shown, shown
    # the end: both histories side by side, then `flink compare`
    _, end = shown.split("side by side:", 1)
    assert "Flink recorded" in end and "scalefold predicted" in end, end
    assert "pairs agree" in end and "$ scalefold flink compare" in end, end
    # the verdict: every pair judged; exit 0 above means no decidable pair disagrees
    _, verdict = end.split("Verdict, pair by pair", 1)
    assert "decidable pairs: " in verdict and "is not known" not in verdict, verdict
    assert " disagrees: " not in verdict, verdict
    for picture in pictures:
        assert picture.read_bytes().startswith(PNG), picture
