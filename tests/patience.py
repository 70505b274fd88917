"""How long a test waits for a service before it calls the wait hung.

A deadline of the tests is a hang guard, not a timing assertion (speed is measured in
`bench/`): it is long enough for a machine of the test's own. `make test` runs most tests
three at a time on two cores (deploy/test.sh), where each gets a share of the machine, so
it sets SCALEFOLD_TEST_PATIENCE to the number of workers, and the guards that go through here (every polling deadline of
tests/integration and tests/history, and `HistoryProcess.wait`) wait that many times as
long. Waits for a process to exit (`Popen.wait`, `subprocess.run(timeout=...)`) do not:
they end as soon as the process does, and none failed in three runs on two workers
(2026-11-29).
"""

from __future__ import annotations

import os
import time

PATIENCE = float(os.environ.get("SCALEFOLD_TEST_PATIENCE") or 1)


def patient(seconds: float) -> float:
    """`seconds` of waiting on a machine of one's own, here."""
    return seconds * PATIENCE


def give_up_at(seconds: float) -> float:
    """The monotonic time by which a wait of `seconds` (on a machine of its own) has hung."""
    return time.monotonic() + patient(seconds)
