"""A busy machine, made on purpose for the benches: CPU hogs and a fleet of jobs (not a test).

- `hogs(n, seconds)`: `n` processes spinning at normal priority, each ending by itself
  after `seconds` (bounded, so a bench that dies leaves no hog behind for long). Two per
  core put a 2-core machine at a 1-minute load of about 4 plus its own work; the issue's
  "load >= 6" takes about six beside a running stack.
- `Fleet`: the example logs (`examples/*.jsonl`) produced over and over as new jobs
  (`fleet-<n>-<job>`), each event when its time comes, from a thread: the scheduler
  folds them and the history keeps their rescales, as it would a fleet's.
- `load_average()`: the 1-minute load, which the benches report beside their figures.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts.eventlog import read_log
from services.contracts.events import Event, to_record
from services.contracts.kafka import producer_config

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _spin(until: float, parent: int) -> None:
    """Busy until `until`, or until the process that started it is gone: a bench killed
    by a signal skips `hogs`' cleanup, and its busy loops outlived it by hours (six of
    them loaded a CI run beside them, 2026-12-03)."""
    while time.time() < until and os.getppid() == parent:
        for _ in range(100_000):
            pass


@contextmanager
def hogs(count: int, seconds: float) -> Iterator[None]:
    """`count` busy processes for at most `seconds` (ended early when the block ends)."""
    until = time.time() + seconds
    context = multiprocessing.get_context("spawn")
    parent = os.getpid()
    procs = [context.Process(target=_spin, args=(until, parent), daemon=True) for _ in range(count)]
    for proc in procs:
        proc.start()
    try:
        yield
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.join(5)


def load_average() -> float:
    return os.getloadavg()[0]


def _renamed(event: Event, job_id: str, start_ms: int) -> Event:
    return replace(event, job_id=job_id, timestamp=start_ms + event.timestamp)


class Fleet:
    """The example logs produced as new jobs, again and again, until `stop` (module doc)."""

    def __init__(self, settings: Settings, every_s: float = 2.0) -> None:
        self._codec = Codec(SchemaRegistry.load(settings.schemas_dir))
        self._logs = [read_log(path, self._codec) for path in sorted(EXAMPLES.glob("*.jsonl"))]
        self._settings, self._every = settings, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fleet", daemon=True)
        self.jobs = 0
        self.events = 0

    def __enter__(self) -> Fleet:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _run(self) -> None:
        from confluent_kafka import Producer

        producer = Producer(producer_config(self._settings, **{"linger.ms": 5}))
        topic = self._settings.topics.job_events
        pending: list[tuple[int, Event]] = []
        next_job = time.time()
        while not self._stop.is_set():
            now_ms = int(time.time() * 1000)
            if time.time() >= next_job:  # a new job: the next example log, new ids
                log = self._logs[self.jobs % len(self._logs)]
                names = {e.job_id for e in log}
                ids = {n: f"fleet-{os.getpid()}-{self.jobs}-{n}" for n in names}
                pending += [(now_ms + e.timestamp, _renamed(e, ids[e.job_id], now_ms)) for e in log]
                pending.sort(key=lambda pair: pair[0])
                self.jobs += 1
                next_job += self._every
            while pending and pending[0][0] <= now_ms:
                _, event = pending.pop(0)
                producer.produce(
                    topic, key=event.job_id.encode(), value=self._codec.encode(*to_record(event))
                )
                self.events += 1
            producer.poll(0)
            self._stop.wait(0.05)
        producer.flush(10)
