"""The real scheduler service in tests: a subprocess, started and killed as a user would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Self

from services.contracts import Codec, Settings
from services.contracts.eventlog import read_log
from services.contracts.events import Event, from_record
from services.localstack.ports import free_port
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import RescaleUpdated
from tests.kafka_support import Received, cli_env, consume
from tests.patience import give_up_at

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


class ServiceProcess:
    """A `scalefold <service>` subprocess with its own web port, started and killed like a user would."""

    service = "scheduler"

    def __init__(
        self, settings: Settings, data_dir: Path, *extra: str, port: int | None = None
    ) -> None:
        self.settings = settings
        self.data_dir = data_dir
        self.port = port or free_port()
        self.extra = extra
        self.process: subprocess.Popen[bytes] | None = None
        self.log = data_dir / f"{self.service}.log"

    def arguments(self) -> list[str]:
        return [self.service, "--web-port", str(self.port), *self.extra]

    def start(self) -> Self:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        env = cli_env(self.settings)
        command = [sys.executable, "-m", "services.cli", *self.arguments()]
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT
            )
        return self

    def wait_ready(self, timeout: float = 90) -> None:
        deadline = give_up_at(timeout)
        while time.monotonic() < deadline:
            assert self.process is not None and self.process.poll() is None, self.tail()
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{self.port}/health", timeout=1
                ) as response:
                    if json.load(response)["status"] == "ready":
                        return
            except OSError:
                pass
            time.sleep(0.2)
        raise AssertionError(f"{self.service} not ready in {timeout} s:\n{self.tail()}")

    def metrics_text(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as response:
            return str(response.read().decode())

    def metrics(self) -> dict[str, float]:
        """The unlabelled series."""
        return {
            line.split()[0]: float(line.split()[1])
            for line in self.metrics_text().splitlines()
            if line and not line.startswith("#") and "{" not in line
        }

    def kill(self) -> None:
        """kill -9: no shutdown, no flush, no commit."""
        assert self.process is not None
        os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def example_events(codec: Codec, *names: str) -> list[Event]:
    events: list[Event] = []
    for name in names:
        events.extend(read_log(EXAMPLES / name, codec))
    return events


def replayed_records(events: Iterable[Event]) -> dict[str, list[dict[str, Any]]]:
    """Every revision of every rescale record, per job, in the order replay emits them."""
    _, effects = replay(list(events))
    per_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for effect in effects:
        if isinstance(effect, RescaleUpdated):
            per_job[effect.job_id].append(effect.record)
    return dict(per_job)


def latest_by_uuid(records: Iterable[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    latest: dict[str, dict[str, Any]] = {}
    for record in records:
        known = latest.get(record["rescaleUuid"])
        if known is None or record["revision"] >= known["revision"]:
            latest[record["rescaleUuid"]] = record
    return latest


def consume_records(
    codec: Codec, settings: Settings, until: Any, timeout: float = 90
) -> list[dict[str, Any]]:
    decoded: list[dict[str, Any]] = []

    def done(got: list[Received]) -> bool:
        # decode each message once: decoding all of them at every poll is quadratic,
        # and on a loaded machine took longer than the deadline
        decoded.extend(codec.decode(m.value).record for m in got[len(decoded) :])
        return bool(until(decoded))

    received = consume(settings, settings.topics.rescales, done, timeout)
    return [codec.decode(m.value).record for m in received]


def encode_events(codec: Codec, events: Iterable[Event]) -> list[tuple[bytes, bytes]]:
    """Events back to (key, Avro value) messages, via their Avro records."""
    from services.contracts.events import to_record

    return [(e.job_id.encode(), codec.encode(*to_record(e))) for e in events]


def dead_letters(codec: Codec, received: list[Received]) -> list[dict[str, Any]]:
    return [codec.decode(m.value).record for m in received]


__all__ = ["from_record"]


class SchedulerProcess(ServiceProcess):
    service = "scheduler"

    def arguments(self) -> list[str]:
        return [*super().arguments(), "--data-dir", str(self.data_dir), "--session-timeout", "6"]


class ActuatorProcess(ServiceProcess):
    service = "actuator"
