"""The end-to-end demo behind `make demo`: the whole loop on one machine, in real time.

A fresh local stack (broker, scheduler, actuator with the embedded cluster,
history service) runs a scripted workload of two jobs:

- `orders`, in reactive mode: TaskManagers join one by one, one is killed,
  checkpoints fail, then TaskManagers come and go until the history service
  sees the job flap and raises its cooldown;
- `clicks`, with requirement bounds: it starts on one slot of the four it
  wants, the history service provisions the rest, its requirements are then
  lowered, and the history service releases the slots left idle.

Transitions, rescales, commands and outcomes are printed as they happen; at the
end the rescale history is queried with Spark SQL and each job's timeline is
drawn as a picture.
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
from services.contracts import jobconfig as c
from services.contracts import records as r
from services.contracts.commands import CommandOutcome, OutcomeStatus, ScalingAction, ScalingCommand
from services.contracts.events import (
    Event,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    VertexSpec,
    to_record,
)
from services.contracts.kafka import ensure_topics, librdkafka_config, producer_config
from services.contracts.render import FLINK_ID, vertex_label
from services.localstack.layout import RUN_ROOT
from services.tools.slots import SlotLedger

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from services.clicontext import Context
    from services.localstack.processes import ServiceProcess

RUN_DIR = RUN_ROOT / "demo"
QUICK = {
    c.RUNTIME_MODE: "external",
    c.COOLDOWN: "6 s",
    c.EXECUTING_STABILIZATION: "5 s",
}
ORDERS = "orders"
CLICKS = "clicks"
SETTLE_S = 15
MAX_WAIT_S = 60
FINALE = frozenset(
    {(CLICKS, ScalingAction.RELEASE_TASK_MANAGERS), (ORDERS, ScalingAction.RAISE_COOLDOWN)}
)
"""The commands the script leads to, (job, action), each applied before the demo ends: the
history service's view lags the scheduler's by its batches (far more on a slow machine)."""
FINALE_SETTLE_S = 3  # then the scheduler's answer to the last command (a new configuration)


@dataclass(frozen=True)
class Awaited:
    """A condition a step waits for, as seen in the watched topics."""

    what: str
    done: Callable[[Watcher], bool]


@dataclass(frozen=True)
class Step:
    """An action at a time of the script; with `after`, no earlier than that condition holds.

    Time a step spends waiting shifts the steps after it, so the script keeps its
    spacing on a slow machine (Spark's first batches can take a while).
    """

    at_s: float
    what: str
    act: Callable[[Demo], None]
    after: Awaited | None = None


def script() -> list[Step]:
    def submit(demo: Demo) -> None:
        reactive = {**QUICK, c.SCHEDULER_MODE: "REACTIVE"}
        bounded = {
            **QUICK,
            c.SUBMISSION_STABILIZATION: "2 s",
            c.RESTART_STRATEGY: "fixed-delay",
            c.FIXED_ATTEMPTS: "50",
            c.FIXED_DELAY: "1 s",
        }
        demo.submit(ORDERS, ("source", "window"), 2, reactive)
        demo.submit(CLICKS, ("source", "enrich"), 4, bounded)

    def tm(job: str) -> Callable[[Demo], None]:
        return lambda demo: demo.cluster("/taskmanagers", job=job, count=1, slots=1)

    def kill(demo: Demo) -> None:
        demo.cluster("/faults/kill-taskmanager", job=ORDERS)

    def first_slots(demo: Demo) -> None:
        tm(ORDERS)(demo)
        tm(CLICKS)(demo)

    def failing_checkpoints(demo: Demo) -> None:
        demo.cluster("/faults/fail-checkpoints", job=ORDERS, count=3)
        tm(ORDERS)(demo)

    return [
        Step(
            0, "phase 1: two jobs are submitted: orders (reactive), clicks (wants 4 slots)", submit
        ),
        Step(
            2,
            "phase 2: TaskManagers join one by one (orders), clicks gets 1 slot of 4",
            first_slots,
        ),
        Step(8, "  a TaskManager joins orders", tm(ORDERS)),
        Step(14, "  a TaskManager joins orders", tm(ORDERS)),
        Step(
            32,
            "phase 3: clicks' requirements are lowered to parallelism 2",
            lambda d: d.require(CLICKS, 2),
            after=Awaited(
                "clicks runs on the slots the history service provisions",
                lambda watcher: watcher.parallelism.get(CLICKS, 0) >= 4,
            ),
        ),
        Step(40, "phase 4: a TaskManager of orders is killed", kill),
        Step(
            54,
            "phase 5: orders' next checkpoints fail, and a TaskManager joins it",
            failing_checkpoints,
        ),
        Step(70, "phase 6: orders flaps: TaskManagers come and go", tm(ORDERS)),
        Step(80, "  a TaskManager of orders is killed", kill),
        Step(90, "  a TaskManager joins orders", tm(ORDERS)),
        Step(100, "  a TaskManager of orders is killed", kill),
    ]


class Demo:
    """The running demo: its stack, a producer, and the actuator's control port."""

    def __init__(
        self, settings: Settings, codec: Codec, producer: Producer, actuator_port: int
    ) -> None:
        self.settings, self.codec, self.producer, self.actuator_port = (
            settings,
            codec,
            producer,
            actuator_port,
        )

    def send(self, event: Event) -> None:
        self.producer.produce(
            self.settings.topics.job_events,
            key=event.job_id.encode(),
            value=self.codec.encode(*to_record(event)),
        )
        self.producer.flush(10)

    def submit(
        self, job: str, vertices: tuple[str, ...], parallelism: int, config: dict[str, str]
    ) -> None:
        specs = tuple(
            VertexSpec(v, v.title(), "default", "default", parallelism, None) for v in vertices
        )
        self.send(JobSubmitted(job, _now(), job, specs, 4_000, tuple(sorted(config.items()))))

    def require(self, job: str, upper: int) -> None:
        bounds = (Requirement("source", 1, upper), Requirement("enrich", 1, upper))
        self.send(RequirementsUpdated(job, _now(), bounds))

    def cluster(self, path: str, **query: Any) -> None:
        from services.actuator.control import post

        post(self.actuator_port, path, **query)


class Watcher(threading.Thread):
    """Prints transitions, finished rescales, commands and outcomes as they arrive."""

    def __init__(self, settings: Settings, codec: Codec, started: float) -> None:
        super().__init__(daemon=True)
        self.settings, self.codec, self.started = settings, codec, started
        self.records = 0
        self.parallelism: dict[str, int] = {}
        self.applied: set[tuple[str, str]] = set()  # (job, action) of the commands applied
        self.superseded = 0
        self.slots = SlotLedger()  # each job's slots against its need (issue 46's invariant)
        self.names: dict[str, str] = {}  # a Flink job's vertex ids -> names, from its records
        self.stopping = threading.Event()

    def run(self) -> None:
        from confluent_kafka import Consumer

        topics = self.settings.topics
        options = {
            "group.id": f"demo-{uuid.uuid4().hex[:8]}",
            "auto.offset.reset": "earliest",
            "fetch.wait.max.ms": 50,
        }
        consumer = Consumer(librdkafka_config(self.settings, **options))
        consumer.subscribe(
            [topics.rescales, topics.decisions, topics.commands, topics.command_outcomes]
        )
        while not self.stopping.is_set():
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                self.show(self.codec.decode(message.value() or b""))
        consumer.close()

    def show(self, decoded: Any) -> None:
        record = decoded.record
        if decoded.schema == r.RESCALE:
            self.records += 1
            self.names |= {v["jobVertexId"]: vertex_label(v) for v in record["vertices"]}
            if record["terminalState"]:
                if record["terminatedReason"] == "SUCCEEDED":
                    self.parallelism[record["jobId"]] = max(
                        v["postRescaleParallelism"] or 0 for v in record["vertices"]
                    )
                post = ", ".join(
                    f"{vertex_label(v)}={v['postRescaleParallelism']}" for v in record["vertices"]
                )
                self.say(
                    f"{record['jobId']:<7} rescale {record['triggerCause']} -> {record['terminatedReason']} ({post})"
                )
        elif decoded.schema == r.SCHEDULER_DECISIONS:
            self.slots.fold(record)
            for item in record["items"]:
                if (item["kind"] == "STATE_TRANSITION" and " -> " in item["message"]) or item[
                    "kind"
                ] == "CONFIGURATION_UPDATED":
                    message = FLINK_ID.sub(lambda m: self.names.get(m[0], m[0]), item["message"])
                    self.say(f"{record['jobId']:<7} {message}")
        elif decoded.schema == r.SCALING_COMMAND:
            command = ScalingCommand.from_record(record)
            self.say(
                f"{command.job_id:<7} history -> command {command.action} {command.amount}: "
                f"{command.reason}"
            )
        elif decoded.schema == r.COMMAND_OUTCOME:
            outcome = CommandOutcome.from_record(record)
            if outcome.status is OutcomeStatus.APPLIED:
                self.applied.add((outcome.job_id, outcome.action))
            self.superseded += outcome.status is OutcomeStatus.SUPERSEDED
            self.say(f"{outcome.job_id:<7} actuator -> {outcome.status}: {outcome.message}")

    def say(self, text: str) -> None:
        print(f"  +{time.monotonic() - self.started:5.1f}s  {text}", flush=True)

    def slots_kept(self) -> bool:
        """Say each job's peak slots against its need, and whether a TaskManager scalefold
        provisioned ever took a job above its need (tools/slots.py)."""
        for job_id, job in sorted(self.slots.jobs.items()):
            if job.need is not None and job.peak:
                _say(f"{job_id}: at most {job.peak} slots held, its requirements need {job.need}")
        if self.superseded:
            _say(f"{self.superseded} command(s) SUPERSEDED: their basis no longer held")
        for breach in self.slots.breaches:
            _say(f"over-provisioned: {breach}")
        return not self.slots.breaches


def run_demo(context: Context, *, verbose: bool = False) -> int:
    from services.localstack import stack
    from services.localstack.broker import LocalBroker
    from services.localstack.jars import kafka_jars

    broker = LocalBroker(RUN_DIR, kafka_jars(context.cache_dir, progress=_say))
    stack.stop_all(RUN_DIR, _say)
    begun = time.monotonic()
    try:
        bootstrap = broker.start(fresh=True, progress=_say)
        settings = context.settings.with_overrides(bootstrap_servers=bootstrap)
        ensure_topics(settings, settings.topics.all())
        processes = start_services(settings)
        return run_script(context, settings, processes, begun, verbose=verbose)
    finally:
        stack.stop_all(RUN_DIR, _say)
        broker.stop(progress=_say)
        _say(f"the demo took {time.monotonic() - begun:.0f} s")


def start_services(settings: Settings) -> list[ServiceProcess]:
    import shutil

    from services.localstack import ports, stack

    shutil.rmtree(RUN_DIR / "history", ignore_errors=True)
    shutil.rmtree(RUN_DIR / "scheduler", ignore_errors=True)
    scheduler_port, actuator_port = ports.free_ports(2)  # distinct, both free now
    processes = [
        stack.scheduler_process(RUN_DIR, scheduler_port),
        stack.actuator_process(
            RUN_DIR,
            actuator_port,
            "--provisioning-delay",
            "2",
            "--cancellation-delay",
            "1",
            "--seed",
            "7",
        ),
        stack.history_process(
            RUN_DIR,
            "--trigger-seconds",
            "2",
            "--plan-interval",
            "3",
            "--provision-grace",
            "8",
            "--release-grace",
            "12",
            "--flap-threshold",
            "3",
        ),
    ]
    for process in processes:
        stack.start(process, settings)
    _say("starting the scheduler, the actuator (embedded cluster) and the history service (Spark)")
    for process in processes:
        stack.wait_ready(process)
        _say(f"{process.name} ready")
    return processes


def run_script(
    context: Context,
    settings: Settings,
    processes: list[ServiceProcess],
    begun: float,
    *,
    verbose: bool = False,
) -> int:
    from confluent_kafka import Producer

    from services.localstack import stack

    codec = Codec(SchemaRegistry.load(settings.schemas_dir))
    demo = Demo(settings, codec, Producer(producer_config(settings)), stack.web_port(processes[1]))
    started = time.monotonic()
    watcher = Watcher(settings, codec, started)
    watcher.start()
    steps = script()
    _say(
        f"running the workload ({steps[-1].at_s + SETTLE_S:.0f} s, more where it waits for the "
        "services); times are seconds since its start"
    )
    lag = 0.0
    for step in steps:
        time.sleep(max(0.0, started + step.at_s + lag - time.monotonic()))
        if step.after is not None:
            lag += _await(step.after, watcher)
        watcher.say(f"> {step.what}")
        step.act(demo)
    last = time.monotonic()
    _await(
        Awaited(
            "the history service has released clicks' idle slots and raised orders' cooldown",
            lambda watcher: FINALE.issubset(watcher.applied),
        ),
        watcher,
    )
    time.sleep(max(FINALE_SETTLE_S, last + SETTLE_S - time.monotonic()))
    watcher.stopping.set()
    watcher.join(5)
    for process in processes:
        process.stop()
    kept = watcher.slots_kept()
    _say("services stopped; reading the history with Spark SQL")
    return report(context, watcher.records, verbose=verbose) or (0 if kept else 1)


def report(context: Context, records: int, *, verbose: bool = False) -> int:
    """Print the rescale history from Spark SQL and draw each job's timeline; Spark's own
    log only if `verbose`."""
    from services.history import timeline as chart
    from services.history.catalog import register_views
    from services.history.decode import RescaleSchemas
    from services.history.paths import Layout
    from services.history.render import table
    from services.history.spark import history_session, one_shot_output
    from services.localstack.jars import spark_connector_jars

    jars = spark_connector_jars(context.cache_dir, progress=_say)
    spark = history_session(jars, "local[2]", jvm_output=one_shot_output(verbose))
    views = register_views(
        spark, Layout((RUN_DIR / "history").resolve()), RescaleSchemas.of(SchemaRegistry.load())
    )
    frame = spark.sql(HISTORY_SQL)
    rows = [tuple(row) for row in frame.collect()]
    print(f'\n$ scalefold history sql "{HISTORY_SQL}"\n')
    print(table(frame.columns, rows))
    for job in (ORDERS, CLICKS):
        timeline = chart.timeline_rows(
            [
                r.asDict()
                for r in chart.timeline_frame(
                    views["rescales"], views["rescale_states"], job, 20
                ).collect()
            ]
        )
        out = (RUN_DIR / f"timeline-{job}.png").resolve()
        if timeline:
            chart.render_png(timeline, out, f"Rescales of job {job}", relative=False)
            _say(f"timeline picture of {job}: {out}")
    spark.stop()
    return 0 if rows and records else 1


HISTORY_SQL = (
    "SELECT job_id, trigger_cause, terminated_reason, "
    "total_pre_rescale_slots AS slots_before, total_post_rescale_slots AS slots_after, "
    "round(duration_ms / 1000, 1) AS seconds "
    "FROM rescales ORDER BY job_id, start_timestamp_ms"
)


def _await(condition: Awaited, watcher: Watcher) -> float:
    """Wait until the condition holds or MAX_WAIT_S passed; return the seconds waited."""
    begun = time.monotonic()
    if condition.done(watcher):
        return 0.0
    watcher.say(f"  (waiting until {condition.what})")
    while not condition.done(watcher):
        if time.monotonic() - begun > MAX_WAIT_S:
            watcher.say(f"  (still not so after {MAX_WAIT_S} s; going on)")
            break
        time.sleep(0.2)
    return time.monotonic() - begun


def _now() -> int:
    return int(time.time() * 1000)


def _say(message: str) -> None:
    print(f"[scalefold] {message}", file=sys.stderr, flush=True)
