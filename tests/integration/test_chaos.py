"""Chaos: a seeded random mix of valid, malformed, null, duplicated, out-of-order and
rejected-by-design inputs on every topic a service consumes (job-events, commands,
decisions, rescales), while the services are SIGKILLed and restarted at random moments
and the broker is restarted once. At the end:

- every service is up;
- dead letters == bad inputs, after dropping repeats by source offset (for job-events:
  exactly those a replay of the log through the scheduler's processor dead-letters;
  for the other topics: exactly the inputs made bad on purpose);
- the rescales topic, and the history's table, hold exactly the rescales a replay of
  the log gives (history rows == distinct rescales, each at its latest revision);
- every command has one outcome, each provisioned TaskManager registered once;
- the actuator's model holds: only accepted jobs, no TaskManager without slots, and
  no runaway rate of simulated events.

The services run under their supervisors as `local up` runs them, and nobody starts
them after the kills (issue 49). (Until 2026-12-03 it also ran with the test starting
each killed service again itself: the same inputs, kills and checks, for 3 minutes of
CI's serial part; the supervised run is the one users get.)

Bounded: `CHAOS_SECONDS` of inputs at about `RATE` a second, a few kills. The seed is
printed (and named in every failure); `SCALEFOLD_CHAOS_SEED=N` runs that seed again.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
import urllib.request
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from services.actuator.cluster import EMBEDDED_CHECKPOINT_IDS, MIN_CHECKPOINT_INTERVAL_MS
from services.contracts import Codec, Settings
from services.contracts import jobconfig as c
from services.contracts import records as r
from services.contracts.codec import HEADER_SIZE, MAGIC
from services.contracts.events import (
    ConfigurationUpdated,
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    VertexSpec,
    to_record,
)
from services.contracts.kafka import partition_for, producer_config
from services.localstack.broker import LocalBroker
from tests.history.support import read_topic
from tests.integration.robustness_support import (
    SupervisedStack,
    command_ledger,
    fresh_settings,
    latest_rescales,
    own_broker,
    provisioned,
    quiescent_snapshot,
    registrations,
    replay_log,
    wait_history_holds,
)
from tests.kafka_support import Received
from tests.patience import give_up_at

pytestmark = [pytest.mark.integration, pytest.mark.spark]

CHAOS_SECONDS = 60
RATE = 8  # inputs per second, all topics together
KILLS = 3
OUTAGE_SECONDS = 5
JOBS = 6
DEFAULTS = (
    (c.RUNTIME_MODE, "external"),
    (c.SUBMISSION_STABILIZATION, "0 s"),
    (c.COOLDOWN, "2 s"),
    (c.EXECUTING_STABILIZATION, "2 s"),
)
BAD_JOB_EVENTS = {
    "null",
    "null-key",
    "malformed",
    "future-schema",
    "wrong-topic",
    "empty",
    "huge",
    "wrong-key",
    "wrong-partition",
    "rejected",
}
TRACED = "broker,topic,metadata,msg,eos"  # librdkafka's debug contexts the trace keeps
MAX_EVENTS_PER_JOB_SECOND = 40  # the actuator paces one job's events 50 ms apart (20/s)


@dataclass
class Sent:
    """One chaos input: where it went, what kind it is, the dead letter it must give."""

    topic: str
    kind: str
    error_class: str | None  # None: must not be dead-lettered; "replay": the replay says


@dataclass
class Ledger:
    """Every chaos input by (topic, partition, offset), filled by delivery reports."""

    sent: dict[tuple[str, int, int], Sent] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def kinds(self) -> Counter[str]:
        return Counter(f"{s.topic.rsplit('.', 1)[-1]}:{s.kind}" for s in self.sent.values())


class Inputs:
    """The seeded generator of chaos inputs and the producer that sends them."""

    def __init__(self, rng: random.Random, codec: Codec, settings: Settings, trace: Path) -> None:
        self.rng, self.codec, self.topics = rng, codec, settings.topics
        self.trace = trace
        self.producer = Producer(
            producer_config(
                settings,
                **{"message.timeout.ms": 0, "debug": TRACED, "logger": _trace_logger(trace)},
            )
        )
        self.ledger = Ledger()
        self.undelivered: Counter[str] = Counter()  # by topic, for a failure's message
        self.jobs = [f"chaos-{j}" for j in range(JOBS)]
        self.tms: dict[str, list[str]] = {job: [] for job in self.jobs}
        self.tm_number = 0
        self.commands = 0
        self.sent_events: list[tuple[bytes | None, bytes | None]] = []
        self.copies: dict[str, list[tuple[bytes | None, bytes | None]]] = {}
        self.golden_rescale = bytes.fromhex(
            json.loads(
                (Path(__file__).parents[1] / "contract" / "golden" / "rescale.v2.json").read_text()
            )["hex"]
        )

    # -- sending ------------------------------------------------------------------

    def send(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        kind: str,
        error_class: str | None,
        *,
        partition: int | None = None,
    ) -> None:
        def delivered(error: Any, message: Any) -> None:
            assert error is None, error
            with self.ledger.lock:
                self.undelivered[topic] -= 1
                where = (message.topic(), message.partition(), message.offset())
                self.ledger.sent[where] = Sent(topic, kind, error_class)

        headers = None
        if self.rng.random() < 0.2:  # headers of any shape
            headers = [("h", None), (b"\xfe\xff", self.rng.randbytes(8)), ("h", b"")]
        extra = {} if partition is None else {"partition": partition}
        with self.ledger.lock:
            self.undelivered[topic] += 1
        self.producer.produce(
            topic, key=key, value=value, headers=headers, on_delivery=delivered, **extra
        )
        self.producer.poll(0)

    def event(self, event: Event, kind: str, key: str | None = None) -> None:
        value = self.codec.encode(*to_record(event))
        raw_key = (key if key is not None else event.job_id).encode()
        self.sent_events.append((raw_key, value))
        self.send(self.topics.job_events, raw_key, value, kind, "replay")

    # -- the mix ---------------------------------------------------------------------

    def submit_all(self, now: int) -> None:
        for number, job in enumerate(self.jobs):
            interval = 2_000 if number % 2 else None
            vertices = (VertexSpec("v", "V", "g", "g", 2 + number % 3, None),)
            self.event(JobSubmitted(job, now, job, vertices, interval, ()), "valid")
            self.register(job, now)

    def register(self, job: str, at: int) -> None:
        self.tm_number += 1
        tm = f"tm-{self.tm_number}"
        self.tms[job].append(tm)
        self.event(TaskManagerRegistered(job, at, tm, self.rng.choice((1, 1, 2)), None), "valid")

    def one(self, now: int) -> None:
        """One random input on one topic."""
        topic = self.rng.choices(
            ["job-events", "commands", "decisions", "rescales"], weights=(6, 2, 1, 1)
        )[0]
        getattr(self, f"_{topic.replace('-', '_')}")(now)

    def _job_events(self, now: int) -> None:
        rng, job = self.rng, self.rng.choice(self.jobs)
        roll = rng.random()
        if roll < 0.30:
            self.register(job, now)
        elif roll < 0.38 and self.tms[job]:
            tm = self.tms[job].pop(rng.randrange(len(self.tms[job])))
            self.event(TaskManagerLost(job, now, tm, "chaos"), "valid")
        elif roll < 0.46:  # a task failure ends a job without checkpointing (no restarts)
            kind = rng.choice(
                (JobEventKind.CHECKPOINT_COMPLETED,) * 4 + (JobEventKind.TASK_FAILURE,)
            )
            self.event(JobLifecycle(job, now, kind, checkpoint_id=rng.randint(1, 1000)), "valid")
        elif roll < 0.52:
            upper = rng.randint(1, 4)
            requirement = Requirement("v", 1, upper)
            self.event(RequirementsUpdated(job, now, (requirement,)), "valid")
        elif roll < 0.58:  # out of order: older than what the job has seen
            earlier = now - rng.randint(5_000, 60_000)
            self.event(JobLifecycle(job, earlier, JobEventKind.CHECKPOINT_FAILED), "out-of-order")
        elif roll < 0.66 and self.sent_events:  # a producer sending something again
            key, value = rng.choice(self.sent_events)
            self.send(self.topics.job_events, key, value, "duplicated", "replay")
        elif roll < 0.78:
            self._refused_event(job, now)
        else:
            self._broken(self.topics.job_events, job.encode(), self._valid_event(job, now))

    def _refused_event(self, job: str, now: int) -> None:
        """Rejected by design: the scheduler dead-letters these."""
        rng = self.rng
        vertices = (VertexSpec("v", "V", "g", "g", 2, None),)
        choice = rng.randrange(7)
        if choice == 0:  # the flood: a second submission with a 20 ms interval
            self.event(JobSubmitted(job, now, job, vertices, 20, ()), "rejected")
        elif choice == 1:  # (a finished job ignores what it would refuse while running)
            self.event(TaskManagerRegistered(job, now, "none", 0, None), "rejected-if-running")
        elif choice == 2:
            ghost = f"ghost-{rng.randint(1, 50)}"
            self.event(TaskManagerRegistered(ghost, now, "tm", 4, None), "rejected")
        elif choice == 3:
            requirement = (Requirement("v", 3, 1),)
            self.event(RequirementsUpdated(job, now, requirement), "rejected-if-running")
        elif choice == 4:
            entries = ((c.SCHEDULER_MODE, "REACTIVE"),)
            self.event(ConfigurationUpdated(job, now, entries), "rejected-if-running")
        elif choice == 5:
            other = rng.choice([j for j in self.jobs if j != job])
            event = JobLifecycle(job, now, JobEventKind.CHECKPOINT_FAILED)
            self.event(event, "wrong-key", key=other)
        else:  # a producer with another partitioner
            wrong = (partition_for(job.encode(), 6) + rng.randint(1, 5)) % 6
            value = self._valid_event(job, now)
            self.send(
                self.topics.job_events,
                job.encode(),
                value,
                "wrong-partition",
                "replay",
                partition=wrong,
            )

    def _valid_event(self, job: str, now: int) -> bytes:
        return self.codec.encode(*to_record(JobLifecycle(job, now, JobEventKind.CHECKPOINT_FAILED)))

    def _broken(self, topic: str, key: bytes, valid: bytes, replay: bool = True) -> None:
        """Malformed, null, or in the wrong place: every service dead-letters these."""
        rng = self.rng
        error = "replay" if replay else None
        choice = rng.randrange(9)
        if choice == 0:
            self.send(topic, key, None, "null", error or "DecodeError")
        elif choice == 1:
            self.send(topic, None, valid, "null-key", error or "KeyMismatch")
        elif choice == 2:
            self.send(
                topic, key, rng.randbytes(rng.randint(0, 60)), "malformed", error or "DecodeError"
            )
        elif choice == 3:
            cut = valid[: rng.randint(1, len(valid) - 1)]
            self.send(topic, key, cut, "malformed", error or "DecodeError")
        elif choice == 4:
            self.send(topic, key, valid + b"\x00", "malformed", error or "DecodeError")
        elif choice == 5:  # a future schema: a fingerprint nobody knows yet
            future = MAGIC + rng.randbytes(8) + valid[HEADER_SIZE:]
            self.send(topic, key, future, "future-schema", error or "DecodeError")
        elif choice == 6:  # a valid record of another topic
            other = self.golden_rescale if topic != self.topics.rescales else valid
            wrong = other if topic != self.topics.rescales else self._command_value("x", "j")
            self.send(topic, key, wrong, "wrong-topic", error or "DecodeError")
        elif choice == 7:
            self.send(topic, key, b"", "empty", error or "DecodeError")
        else:
            self.send(topic, key, rng.randbytes(200_000), "huge", error or "DecodeError")

    def _commands(self, now: int) -> None:
        rng, job = self.rng, self.rng.choice(self.jobs)
        self.commands += 1
        command_id = f"chaos-cmd-{self.commands}"
        roll = rng.random()
        if roll < 0.45:
            value = self._command_value(command_id, job)
            self.copies.setdefault("commands", []).append((job.encode(), value))
            self.send(self.topics.commands, job.encode(), value, "valid", None)
        elif roll < 0.55:
            value = self._command_value(command_id, job, amount=10**9)
            self.send(self.topics.commands, job.encode(), value, "rejected", None)
        elif roll < 0.62:
            ghost = f"ghost-{rng.randint(1, 50)}"
            value = self._command_value(command_id, ghost)
            self.send(self.topics.commands, ghost.encode(), value, "rejected", None)
        elif roll < 0.70 and self.copies.get("commands"):
            key, value = rng.choice(self.copies["commands"])
            self.send(self.topics.commands, key, value, "duplicated", None)
        elif roll < 0.78:
            value = self._command_value(command_id, job)
            self.send(self.topics.commands, b"not-the-job", value, "wrong-key", "KeyMismatch")
        else:
            self._broken(
                self.topics.commands,
                job.encode(),
                self._command_value(command_id, job),
                replay=False,
            )

    def _command_value(self, command_id: str, job: str, amount: int = 1) -> bytes:
        record = {
            "commandId": command_id,
            "jobId": job,
            "action": "PROVISION_TASK_MANAGERS",
            "amount": amount,
            "reason": "chaos",
            "evidence": [],
            "issuedAtMillis": int(time.time() * 1000),
        }
        return self.codec.encode(r.SCALING_COMMAND, record)

    def _decisions(self, now: int) -> None:
        job = self.rng.choice(self.jobs)
        if self.copies.get("decisions") and self.rng.random() < 0.3:
            key, value = self.rng.choice(self.copies["decisions"])
            self.send(self.topics.decisions, key, value, "duplicated", None)
            return
        record = {"jobId": job, "timestamp": now, "sourceOffset": 10**12, "items": []}
        valid = self.codec.encode(r.SCHEDULER_DECISIONS, record)
        if self.rng.random() < 0.15:
            self.send(self.topics.decisions, b"not-the-job", valid, "wrong-key", "KeyMismatch")
        else:
            self._broken(self.topics.decisions, job.encode(), valid, replay=False)

    def _rescales(self, now: int) -> None:
        job = self.rng.choice(self.jobs)
        if self.copies.get("rescales") and self.rng.random() < 0.3:
            key, value = self.rng.choice(self.copies["rescales"])
            self.send(self.topics.rescales, key, value, "duplicated", None)
            return
        valid = self.golden_rescale
        if self.rng.random() < 0.15:
            self.send(self.topics.rescales, b"not-the-job", valid, "wrong-key", "KeyMismatch")
        else:
            self._broken(self.topics.rescales, job.encode(), valid, replay=False)

    def learn(self, settings: Settings) -> None:
        """Pick up real decisions and rescales to send again (duplicates)."""
        for topic, name in (
            (settings.topics.decisions, "decisions"),
            (settings.topics.rescales, "rescales"),
        ):
            found = [
                (m.key, m.value)
                for m in read_topic(settings, topic)
                if m.value and m.value[:2] == MAGIC and m.key and m.key.startswith(b"chaos-")
            ]
            good = []
            for key, value in found[:200]:
                try:
                    record = self.codec.decode(value).record
                except Exception:
                    continue
                if record.get("jobId", "").encode() == key and record.get("sourceOffset") != 10**12:
                    good.append((key, value))
            if good:
                self.copies[name] = good


def _trace_logger(path: Path) -> logging.Logger:
    """A logger of its own that keeps the chaos producer's librdkafka debug lines in `path`
    (a few thousand lines a run), out of the test's captured log."""
    logger = logging.getLogger(f"chaos.producer.{path}")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
    logger.addHandler(handler)
    return logger


def _trace_summary(path: Path, last: int = 15) -> str:
    """What a stalled producer did: its lines by librdkafka facility, the idempotent
    producer's state changes, and its last lines. The lines' times are when the test
    polled the producer, not when they happened."""
    lines = [line[:200] for line in path.read_text(errors="replace").splitlines()]
    words = (line.split() for line in lines)
    facilities = Counter(parts[2] for parts in words if len(parts) > 2)
    states = [line for line in lines if " IDEMPSTATE " in line]
    return "\n".join(
        [
            f"producer trace {path}: {dict(facilities.most_common(12))}",
            *states[-8:],
            "...",
            *lines[-last:],
        ]
    )


def _chaos(
    rng: random.Random,
    stack: SupervisedStack,
    broker: LocalBroker,
    start: float,
    log: list[str],
    *,
    stop: threading.Event,
) -> None:
    """Kill services at random moments (their supervisors start them again); restart the
    broker once.

    The broker's outage runs at its own planned moment, beside the kills: in line with
    them it waited behind their restarts (a history's takes 20-30 s), and often came
    after the inputs had ended, so that none crossed it."""
    kills = sorted(
        (rng.uniform(8, CHAOS_SECONDS - 10), rng.choice(("scheduler", "actuator", "history")))
        for _ in range(KILLS)
    )
    outage = threading.Thread(
        target=_broker_outage,
        args=(broker, start + rng.uniform(10, CHAOS_SECONDS - 15), start, log, stop),
        name="broker-outage",
    )
    outage.start()
    try:
        for at, what in kills:
            if stop.wait(max(0.0, start + at - time.monotonic())):
                return
            log.append(f"{time.monotonic() - start:5.1f}s SIGKILL {what}")
            stack.kill(what)
            stack.back(what)  # its supervisor starts it again, nobody else
    finally:
        outage.join()


def _broker_outage(
    broker: LocalBroker, at: float, start: float, log: list[str], stop: threading.Event
) -> None:
    """Stop the broker at `at` (monotonic) for `OUTAGE_SECONDS`; a stopped broker is
    always started again."""
    if stop.wait(max(0.0, at - time.monotonic())):
        return
    log.append(
        f"{time.monotonic() - start:5.1f}s broker stopping, {OUTAGE_SECONDS} s down once stopped"
    )
    broker.stop(progress=lambda _: None)
    time.sleep(OUTAGE_SECONDS)
    broker.start(progress=lambda _: None)
    log.append(f"{time.monotonic() - start:5.1f}s broker started")


@pytest.mark.exclusive
def test_chaos(tmp_path: Path, codec: Codec) -> None:
    """The services run as `local up` runs them, each under its supervisord, and after
    each kill nobody starts them: their supervisors do."""
    seed = int(os.environ.get("SCALEFOLD_CHAOS_SEED") or random.SystemRandom().randrange(10**6))
    print(f"\nchaos seed {seed} (SCALEFOLD_CHAOS_SEED={seed} runs it again)")
    rng = random.Random(seed)
    with own_broker(tmp_path / "broker") as broker:
        settings = fresh_settings(broker)
        stack = SupervisedStack(
            settings,
            tmp_path,
            scheduler=tuple(f"-D{k}={v}" for k, v in DEFAULTS),
            actuator=("--provisioning-delay", "1", "--creation-delay", "0.2", "--seed", str(seed)),
            history=("--plan-interval", "2", "--provision-grace", "5"),
        )
        began = time.monotonic()
        stack.start_all()
        failure = f"(chaos seed {seed})"
        timings = {"start-up": time.monotonic() - began}

        def alive() -> None:
            assert all(stack.alive().values()), f"a service stopped {failure}:\n{stack.tails()}"

        stopping = threading.Event()
        chaos: threading.Thread | None = None
        try:
            inputs = Inputs(rng, codec, settings, tmp_path / "producer-trace.log")
            inputs.submit_all(int(time.time() * 1000))
            actions: list[str] = []
            start = time.monotonic()
            chaos = threading.Thread(
                target=_chaos,
                args=(rng, stack, broker, start, actions),
                kwargs={"stop": stopping},
            )
            chaos.start()
            learned = False
            while time.monotonic() < start + CHAOS_SECONDS:
                if not learned and time.monotonic() > start + 5 and broker.status():
                    inputs.learn(settings)
                    learned = True
                inputs.one(int(time.time() * 1000))
                time.sleep(rng.expovariate(RATE))
            chaos.join(600)
            assert not chaos.is_alive(), f"the chaos did not end {failure}"
            left = inputs.producer.flush(120)
            assert left == 0, (
                f"{left} inputs not delivered in 120 s {failure}: "
                f"{dict(+inputs.undelivered)}; broker {broker.status()}; chaos {actions}\n"
                f"{_trace_summary(inputs.trace)}"
            )
            timings["chaos"] = time.monotonic() - start
            _check(
                codec,
                settings,
                stack=stack,
                inputs=inputs,
                actions=actions,
                seed=seed,
                alive=alive,
                timings=timings,
            )
        finally:
            stopping.set()
            if chaos is not None:
                chaos.join(300)
            stack.stop()


def _check(
    codec: Codec,
    settings: Settings,
    *,
    stack: SupervisedStack,
    inputs: Inputs,
    actions: list[str],
    seed: int,
    alive: Any,
    timings: dict[str, float],
) -> None:
    failure = f"(chaos seed {seed})"
    topics = settings.topics
    began = time.monotonic()
    try:
        snapshot = quiescent_snapshot(settings, timeout=300, alive=alive)
    except AssertionError as error:
        raise AssertionError(f"{failure} {error}") from None
    timings["scheduler folded all"] = time.monotonic() - began
    replayed = replay_log(codec, topics.job_events, snapshot.log, DEFAULTS)

    # The scheduler: exactly the rescales of the replay; the history: the same rows.
    assert latest_rescales(codec, snapshot.rescales) == replayed.rescales, failure
    rows, wanted = wait_history_holds(settings, codec, stack.history_dir, timeout=240, alive=alive)
    assert rows == wanted, f"history rows != distinct rescales {failure}"
    assert all(wanted[u] >= record["revision"] for u, record in replayed.rescales.items()), failure
    timings["history caught up"] = time.monotonic() - began

    # Dead letters == bad inputs, repeats dropped by source offset.
    expected: dict[tuple[str, int, int], str] = {
        (topics.job_events, p, o): error for (p, o), error in replayed.dead_letters.items()
    }
    with inputs.ledger.lock:
        sent = dict(inputs.ledger.sent)
    for where, item in sent.items():
        if item.error_class not in (None, "replay"):
            expected[where] = item.error_class
        if item.error_class == "replay" and item.kind in BAD_JOB_EVENTS:
            assert where in expected, f"{item} at {where} is bad, the replay keeps it {failure}"
    letters = _dead_letters(codec, settings, expected, alive)
    assert letters == expected, f"dead letters != bad inputs {failure}"
    timings["dead letters checked"] = time.monotonic() - began

    # Commands: one outcome each; provisioned TaskManagers registered once.
    commands, outcomes = command_ledger(codec, settings)
    deadline = give_up_at(120)
    while set(outcomes) != set(commands) and time.monotonic() < deadline:
        alive()
        time.sleep(1)
        commands, outcomes = command_ledger(codec, settings)
    assert set(outcomes) == set(commands), failure
    assert all(len(o) == 1 for o in outcomes.values()), f"one outcome per command {failure}"
    log = read_topic(settings, topics.job_events)
    registered = registrations(codec, log)
    started = provisioned(outcomes)
    wrong = {tm: registered.get(tm, 0) for tm in started if registered.get(tm) != 1}
    assert not wrong, f"provisioned TaskManagers registered other than once: {wrong} {failure}"

    # The actuator's model: only accepted jobs, no slotless TaskManager, no runaway rate.
    with urllib.request.urlopen(
        f"http://127.0.0.1:{stack.actuator.port}/state", timeout=10
    ) as response:
        state = json.load(response)
    assert set(state) <= replayed.jobs, f"jobs never accepted in the model {failure}"
    assert all(s >= 1 for job in state.values() for s in job["taskManagers"].values()), failure
    rates, checkpoints = _actuator_events(codec, log)
    assert max(rates.values(), default=0) <= MAX_EVENTS_PER_JOB_SECOND, f"{rates} {failure}"
    triggers = _checkpoint_requests(codec, settings)
    for job, stamps in checkpoints.items():
        # Periodic checkpoints at most once a second, plus one per checkpoint request.
        seconds = (max(stamps) - min(stamps)) / MIN_CHECKPOINT_INTERVAL_MS + 1
        assert len(stamps) <= seconds + triggers.get(job, 0) + 1, f"{job} {failure}"
    alive()

    unique = {(d[0], d[1], d[2]) for d in letters}
    figures = {
        "seed": seed,
        "inputs": dict(sorted(inputs.ledger.kinds().items())),
        "inputs total": len(sent),
        "chaos": actions,
        "restarts": {k: v - 1 for k, v in stack.starts.items()},
        "dead letters (unique sources)": len(unique),
        "dead letters by topic": dict(Counter(t.rsplit(".", 1)[-1] for t, _, _ in unique)),
        "job-events messages": len(snapshot.log),
        "rescales (distinct)": len(replayed.rescales),
        "history rows": len(rows),
        "commands (distinct ids)": len(set(commands)),
        "outcomes": dict(Counter(o[0]["status"] for o in outcomes.values())),
        "accepted jobs": len(replayed.jobs),
        "max actuator events per job-second": max(rates.values(), default=0),
        "seconds": {k: round(v) for k, v in timings.items()},
    }
    print("chaos figures:", json.dumps(figures, indent=2))


def _dead_letters(
    codec: Codec, settings: Settings, expected: dict[tuple[str, int, int], str], alive: Any
) -> dict[tuple[str, int, int], str]:
    """The dead letters by source, repeats dropped; polled until they match or time out."""
    deadline = give_up_at(180)
    while True:
        found: dict[tuple[str, int, int], str] = {}
        for message in read_topic(settings, settings.topics.dead_letters):
            d = codec.decode(message.value).record
            found[(d["sourceTopic"], d["sourcePartition"], d["sourceOffset"])] = d["errorClass"]
        if found == expected or time.monotonic() > deadline:
            return found
        alive()
        time.sleep(1)


def _actuator_events(
    codec: Codec, log: list[Received]
) -> tuple[dict[str, int], dict[str, list[int]]]:
    """Per job, the most events the actuator wrote within one second (by event time), and
    the times of its checkpoints."""
    per_job: dict[str, list[int]] = {}
    checkpoints: dict[str, list[int]] = {}
    for message in log:
        try:
            decoded = codec.decode(message.value or b"")
        except Exception:
            continue
        record = decoded.record
        checkpoint = (
            decoded.schema == r.JOB_LIFECYCLE_EVENT
            and (record.get("checkpointId") or 0) > EMBEDDED_CHECKPOINT_IDS
        )
        own = (
            checkpoint
            or (decoded.schema == r.JOB_LIFECYCLE_EVENT and record["kind"].startswith("EXECUTION"))
            or (decoded.schema == r.TASK_MANAGER_REGISTERED and "-cmd-" in record["taskManagerId"])
        )
        if own and message.key == record["jobId"].encode():
            per_job.setdefault(record["jobId"], []).append(record["timestamp"])
            if checkpoint:
                checkpoints.setdefault(record["jobId"], []).append(record["timestamp"])
    rates = {}
    for job, stamps in per_job.items():
        stamps.sort()
        most, low = 0, 0
        for high, stamp in enumerate(stamps):
            while stamp - stamps[low] >= 1_000:
                low += 1
            most = max(most, high - low + 1)
        rates[job] = most
    return rates, checkpoints


def _checkpoint_requests(codec: Codec, settings: Settings) -> dict[str, int]:
    """Per job, the checkpoints the scheduler asked for (each decisions record once)."""
    seen: set[tuple[str, int]] = set()
    counts: dict[str, int] = {}
    for message in read_topic(settings, settings.topics.decisions):
        try:
            record = codec.decode(
                message.value or b"", expected=frozenset({r.SCHEDULER_DECISIONS})
            ).record
        except Exception:
            continue
        identity = (record["jobId"], record["sourceOffset"])
        if identity in seen or message.key != record["jobId"].encode():
            continue
        seen.add(identity)
        asked = sum(item["kind"] == "TRIGGER_CHECKPOINT" for item in record["items"])
        counts[record["jobId"]] = counts.get(record["jobId"], 0) + asked
    return counts
