"""Waiting for room on a full disk, shared by the services that keep files.

A service whose writes meet a full disk stops a batch (the scheduler) or retries it (the
history); started again on a disk still full it would fail in its first writes, again and
again, until its supervisor gives up (the local stack's after 8 deaths within 10 s of a
start), and nothing would start it once there is room. `wait_for_room` is what it calls
before its first write instead: it waits, as the services wait for a broker that is away,
writing a probe every few seconds and saying so once; nothing is lost meanwhile, Kafka
keeps the inputs.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections.abc import Callable
from pathlib import Path

PROBE_BYTES = 1 << 20
"""What the probe writes: more than a batch's first writes need."""
CHECK_EVERY_S = 10.0
FULL = (errno.ENOSPC, errno.EDQUOT)
"""The errors of a full disk (or a used-up quota)."""
NO_SPACE = "No space left on device"
"""ENOSPC's text, as the JVM (Spark, Hadoop) and RocksDB put it in their errors."""


def wait_for_room(
    directory: Path,
    log: logging.Logger,
    *,
    every_s: float = CHECK_EVERY_S,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once `directory` (made if missing) takes a write of `PROBE_BYTES`; until
    then log once that its disk is full and check again every `every_s`. Any other error
    of the write is raised."""
    probe = directory / ".room"
    waiting = False
    while True:
        try:
            directory.mkdir(parents=True, exist_ok=True)
            with probe.open("wb") as out:
                out.write(bytes(PROBE_BYTES))
                out.flush()
                os.fsync(out.fileno())
            probe.unlink()
        except OSError as error:
            probe.unlink(missing_ok=True)
            if error.errno not in FULL:
                raise
            if not waiting:
                log.error(
                    "the disk holding %s is full: free space on it; waiting for room "
                    "(checking every %.0f s), then starting where it stopped",
                    directory,
                    every_s,
                )
                waiting = True
            sleep(every_s)
            continue
        if waiting:
            log.info("the disk holding %s has room again; starting", directory)
        return
