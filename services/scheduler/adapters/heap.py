"""Heap snapshots of a running worker, for finding what grows (opt-in, off by default).

`SCALEFOLD_HEAP_SNAPSHOTS=DIR` in a worker's environment starts Python's `tracemalloc`
(`SCALEFOLD_HEAP_FRAMES` frames a trace, 8 unless set) and writes a snapshot to DIR every
`SCALEFOLD_HEAP_SNAPSHOT_SECONDS` (300): `heap-<pid>-<n>.tracemalloc`.
`python -m bench.heapdiff DIR` prints what grew between the first and the last. Tracing
slows the worker and grows its memory (not measured apart): a diagnosis, never a
default. It sees Python's allocations only, not RocksDB's or
librdkafka's (the worker's /metrics reports RocksDB's), and the compiled core's are
counted at the line that called into it."""

from __future__ import annotations

import logging
import os
import threading
import tracemalloc
from collections.abc import Callable, Mapping
from pathlib import Path

log = logging.getLogger("scalefold.scheduler")

ENV_DIR = "SCALEFOLD_HEAP_SNAPSHOTS"


def start_from(env: Mapping[str, str]) -> Callable[[], None] | None:
    """Start tracing and the snapshot thread when `env` asks for it; what stops both."""
    where = env.get(ENV_DIR)
    if not where:
        return None
    directory = Path(where)
    directory.mkdir(parents=True, exist_ok=True)
    every = float(env.get("SCALEFOLD_HEAP_SNAPSHOT_SECONDS", "300"))
    tracemalloc.start(int(env.get("SCALEFOLD_HEAP_FRAMES", "8")))
    stop = threading.Event()

    def snapshots() -> None:
        n = 0
        while not stop.wait(every):
            path = directory / f"heap-{os.getpid()}-{n:04d}.tracemalloc"
            tracemalloc.take_snapshot().dump(str(path))
            n += 1

    thread = threading.Thread(target=snapshots, name="heap-snapshots", daemon=True)
    thread.start()
    log.warning("tracing the heap: a snapshot every %.0f s in %s", every, directory)

    def stopped() -> None:
        stop.set()
        thread.join()
        tracemalloc.stop()

    return stopped
