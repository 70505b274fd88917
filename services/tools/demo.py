"""The end-to-end demo behind `make demo`.

A fresh local stack (broker, scheduler service) runs a scripted job in real
time: it is submitted, TaskManagers join one by one, its requirements are
lowered, a TaskManager is lost. Transitions are printed as they happen, and
at the end the rescale history is printed as a table.
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts import records as r
from services.contracts.kafka import ensure_topics, librdkafka_config, producer_config
from services.localstack.layout import RUN_ROOT
from services.scheduler.core import config as c
from services.scheduler.core.events import (
    Event,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    VertexSpec,
    to_record,
)

if TYPE_CHECKING:
    from services.cli import Context

JOB = "clickstream"
DEMO_CONFIG = {
    c.SUBMISSION_STABILIZATION: "3 s",
    c.COOLDOWN: "10 s",
    c.EXECUTING_STABILIZATION: "8 s",
    c.RESTART_STRATEGY: "fixed-delay",
    c.FIXED_ATTEMPTS: "10",
    c.FIXED_DELAY: "2 s",
}


@dataclass(frozen=True)
class Step:
    at_s: float
    say: str
    event: Callable[[int], Event]


def script() -> list[Step]:
    vertices = (
        VertexSpec("source", "Source: clicks", "default", "default", 4, None),
        VertexSpec("enrich", "Enrich", "default", "default", 4, None),
    )
    config = tuple(sorted(DEMO_CONFIG.items()))
    return [
        Step(
            0,
            "submit the job (wants 4 slots)",
            lambda t: JobSubmitted(JOB, t, "clicks", vertices, None, config),
        ),
        *(_join(i) for i in range(4)),
        Step(
            40,
            "requirements lowered to parallelism 2",
            lambda t: RequirementsUpdated(
                JOB, t, (Requirement("source", 1, 2), Requirement("enrich", 1, 2))
            ),
        ),
        Step(
            65,
            "TaskManager tm-1 is lost",
            lambda t: TaskManagerLost(JOB, t, "tm-1", "demo: node lost"),
        ),
    ]


def _join(i: int) -> Step:
    tm = f"tm-{i + 1}"
    return Step(
        1 + 6 * i,
        f"TaskManager {tm} joins with 1 slot",
        lambda t: TaskManagerRegistered(JOB, t, tm, 1, None),
    )


class Watcher(threading.Thread):
    """Prints the scheduler's transitions and rescale records as they arrive."""

    def __init__(self, settings: Settings, codec: Codec, started: float) -> None:
        super().__init__(daemon=True)
        self.settings, self.codec, self.started = settings, codec, started
        self.records: dict[str, dict[str, Any]] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        group = f"demo-{uuid.uuid4().hex[:8]}"
        consumer = Consumer(
            librdkafka_config(
                self.settings,
                **{"group.id": group, "auto.offset.reset": "earliest", "fetch.wait.max.ms": 50},
            )
        )
        consumer.subscribe([self.settings.topics.rescales, self.settings.topics.decisions])
        while not self.stopping.is_set():
            message = consumer.poll(0.2)
            if message is None or message.error():
                continue
            decoded = self.codec.decode(message.value() or b"")
            if decoded.schema == r.RESCALE:
                self._rescale(decoded.record)
            else:
                self._decisions(decoded.record)
        consumer.close()

    def _rescale(self, record: dict[str, Any]) -> None:
        known = self.records.get(record["rescaleUuid"])
        if known is None or record["revision"] > known["revision"]:
            self.records[record["rescaleUuid"]] = record
        if record["terminalState"]:
            post = ", ".join(
                f"{v['jobVertexId']}={v['postRescaleParallelism']}" for v in record["vertices"]
            )
            self._say(f"rescale {record['triggerCause']} -> {record['terminatedReason']} ({post})")

    def _decisions(self, record: dict[str, Any]) -> None:
        for item in record["items"]:
            if item["kind"] in ("STATE_TRANSITION", "RESCALE_TRIGGERED"):
                self._say(f"{item['message']}")

    def _say(self, text: str) -> None:
        print(f"  +{time.monotonic() - self.started:5.1f}s  {text}", flush=True)


def run_demo(context: Context) -> int:
    from confluent_kafka import Producer

    from services.localstack import stack
    from services.localstack.broker import LocalBroker
    from services.localstack.jars import kafka_jars

    say = _say
    run_dir = RUN_ROOT / "demo"
    broker = LocalBroker(run_dir, kafka_jars(context.cache_dir, progress=say))
    stack.stop_all(run_dir, say)
    try:
        bootstrap = broker.start(fresh=True, progress=say)
        settings = context.settings.with_overrides(bootstrap_servers=bootstrap)
        ensure_topics(settings, settings.topics.all())
        port = stack.free_port()
        scheduler = stack.scheduler_process(run_dir, port)
        stack.start(scheduler, settings)
        say("starting the scheduler service")
        stack.wait_healthy(scheduler, port)
        codec = Codec(SchemaRegistry.load(settings.schemas_dir))
        started = time.monotonic()
        watcher = Watcher(settings, codec, started)
        watcher.start()
        producer = Producer(producer_config(settings))
        steps = script()
        say(f"running the script ({steps[-1].at_s + 20:.0f} s); times are seconds since the start")
        for step in steps:
            time.sleep(max(0.0, started + step.at_s - time.monotonic()))
            event = step.event(int(time.time() * 1000))
            watcher._say(f"> {step.say}")
            producer.produce(
                settings.topics.job_events,
                key=event.job_id.encode(),
                value=codec.encode(*to_record(event)),
            )
            producer.flush(10)
        time.sleep(20)
        watcher.stopping.set()
        watcher.join(5)
        print_history(list(watcher.records.values()))
        return 0 if watcher.records else 1
    finally:
        stack.stop_all(run_dir, say)
        broker.stop(progress=say)


def print_history(records: list[dict[str, Any]]) -> None:
    records.sort(key=lambda rec: rec["startTimestampInMillis"])
    if not records:
        print("no rescale records arrived")
        return
    base = records[0]["startTimestampInMillis"]
    print("\nrescale history (latest revision of each rescale):")
    print(f"{'start':>7} {'trigger':<24} {'outcome':<38} {'parallelism':<28} {'downtime':>9}")
    for rec in records:
        outcome = (
            f"{rec['terminalState']}/{rec['terminatedReason']}"
            if rec["terminalState"]
            else "in progress"
        )
        post = " ".join(
            f"{v['jobVertexId']} {_n(v['preRescaleParallelism'])}->"
            f"{_n(v['postRescaleParallelism'])}"
            for v in rec["vertices"]
        )
        down = sum(
            s["durationInMillis"] or 0 for s in rec["schedulerStates"] if s["state"] != "Executing"
        )
        start = (rec["startTimestampInMillis"] - base) / 1000
        print(
            f"{start:6.1f}s {rec['triggerCause']:<24} {outcome:<38} {post:<28} {down / 1000:8.1f}s"
        )


def _say(message: str) -> None:
    print(f"[scalefold] {message}", file=sys.stderr, flush=True)


def _n(value: int | None) -> str:
    return "-" if value is None else str(value)
