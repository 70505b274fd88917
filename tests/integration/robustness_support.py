"""What the broker-restart and chaos tests share: a broker of their own (they stop it), the
three services as subprocesses (or under their supervisors, as the local stack runs
them), and the checks that nothing was lost or duplicated.

"Nothing lost, nothing invented" is checked against a replay: the job-events log
as it stands, folded message by message through the scheduler's own
`Processor` (decode, key and partition checks, the core's `handle`), gives
every rescale record the scheduler must have written; the rescales topic must
hold exactly those (latest revision per rescale), and so must the history's
Parquet table. The replay folds the log per partition in offset order, as the
service does: a replay by event time (`core.driver`) would fold out-of-order
events differently.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from services.contracts import Codec, DecodeError, Settings
from services.contracts import records as r
from services.contracts.kafka import ensure_topics
from services.history.sinklog import committed_files
from services.localstack.broker import LocalBroker
from services.localstack.jars import kafka_jars
from services.localstack.layout import cache_dir
from services.scheduler.adapters.processor import Incoming, Processor, Stored
from services.scheduler.core.fold import Defaults
from tests.history.support import HistoryProcess, read_topic
from tests.integration.scheduler_support import ActuatorProcess, SchedulerProcess
from tests.kafka_support import Received
from tests.patience import give_up_at

HISTORY_READY = "streaming query started"


@contextmanager
def own_broker(run_dir: Path) -> Iterator[LocalBroker]:
    """A fresh broker of this test's own: the test stops and starts it."""
    broker = LocalBroker(run_dir, kafka_jars(cache_dir(os.environ)))
    broker.start(fresh=True, progress=lambda _: None)
    try:
        yield broker
    finally:
        broker.stop(progress=lambda _: None)


def fresh_settings(broker: LocalBroker) -> Settings:
    running = broker.status()
    assert running is not None
    settings = Settings(bootstrap_servers=running.bootstrap).with_overrides(
        topic_prefix=f"t{uuid.uuid4().hex[:8]}."
    )
    ensure_topics(settings, settings.topics.all())
    return settings


class Stack:
    """The scheduler, the actuator and the history service of one test."""

    def __init__(
        self,
        settings: Settings,
        root: Path,
        scheduler: tuple[str, ...] = (),
        actuator: tuple[str, ...] = (),
        history: tuple[str, ...] = (),
    ) -> None:
        self.settings, self.root = settings, root
        self.scheduler = SchedulerProcess(settings, root / "scheduler", *scheduler)
        self.actuator = ActuatorProcess(settings, root / "actuator", *actuator)
        self.history_args = history
        self.history: HistoryProcess | None = None
        self.starts = {"scheduler": 0, "actuator": 0, "history": 0}

    @property
    def history_dir(self) -> Path:
        return self.root / "history"

    def start(self, name: str) -> None:
        self.starts[name] += 1
        if name == "history":
            self.history = HistoryProcess(
                self.settings,
                self.history_dir,
                self.root / "history.log",
                "--trigger-seconds",
                "1",
                *self.history_args,
            )
        else:
            getattr(self, name).start()

    def start_all(self) -> None:
        for name in ("scheduler", "actuator", "history"):
            self.start(name)
        self.wait_ready()

    def wait_ready(self, timeout: float = 240) -> None:
        self.scheduler.wait_ready(timeout)
        self.actuator.wait_ready(timeout)
        self.wait_history(timeout)

    def wait_history(self, timeout: float = 240) -> None:
        assert self.history is not None
        deadline = give_up_at(timeout)
        log = self.root / "history.log"
        while time.monotonic() < deadline:
            self.history.running()
            text = log.read_text(errors="replace") if log.exists() else ""
            if text.count(HISTORY_READY) >= self.starts["history"]:
                return
            time.sleep(0.5)
        raise AssertionError(f"history not ready in {timeout} s:\n{self.history.tail()}")

    def kill(self, name: str) -> None:
        """SIGKILL: no shutdown, no flush, no commit."""
        if name == "history":
            assert self.history is not None
            self.history.kill()
        else:
            getattr(self, name).kill()

    def alive(self) -> dict[str, bool]:
        history = self.history is not None and self.history.process.poll() is None
        return {
            "scheduler": self.scheduler.process is not None
            and self.scheduler.process.poll() is None,
            "actuator": self.actuator.process is not None and self.actuator.process.poll() is None,
            "history": history,
        }

    def stop(self) -> None:
        self.actuator.stop()
        self.scheduler.stop()
        if self.history is not None and self.history.process.poll() is None:
            self.history.terminate()
            with contextlib.suppress(AssertionError):  # killed by wait() after 60 s
                self.history.wait(60)

    def tails(self) -> str:
        parts = [f"--- {p.service}\n{p.tail(15)}" for p in (self.scheduler, self.actuator)]
        if self.history is not None:
            parts.append(f"--- history\n{self.history.tail(15)}")
        return "\n".join(parts)


class SupervisedStack:
    """The three services as the local stack runs them, each under its supervisord
    (services/localstack/processes.py): one that is killed is started again by its
    supervisor, nobody else. The interface of `Stack` that the chaos test uses."""

    def __init__(
        self,
        settings: Settings,
        root: Path,
        scheduler: tuple[str, ...] = (),
        actuator: tuple[str, ...] = (),
        history: tuple[str, ...] = (),
    ) -> None:
        from services.localstack import ports, stack

        self.settings, self.root = settings, root
        scheduler_port, actuator_port = ports.free_ports(2)
        self.processes = {
            "scheduler": stack.scheduler_process(
                root, scheduler_port, "--session-timeout", "6", *scheduler
            ),
            "actuator": stack.actuator_process(root, actuator_port, *actuator),
            "history": stack.history_process(root, "--trigger-seconds", "1", *history),
        }
        self.actuator = SimpleNamespace(port=actuator_port)
        self.killed: dict[str, int] = {}

    @property
    def history_dir(self) -> Path:
        return self.root / "history"

    @property
    def starts(self) -> dict[str, int]:
        """Each service's starts: the first, and its supervisor's restarts."""
        return {name: p.restarts().count + 1 for name, p in self.processes.items()}

    def start_all(self) -> None:
        from services.localstack import stack

        for process in self.processes.values():
            stack.start(process, self.settings)
        for process in self.processes.values():
            stack.wait_ready(process)

    def kill(self, name: str) -> None:
        """SIGKILL to the service (not its supervisor): no shutdown, no flush, no commit."""
        pid = self.processes[name].pid()
        assert pid is not None, f"{name} is not running"
        os.kill(pid, signal.SIGKILL)
        self.killed[name] = pid

    def back(self, name: str, timeout: float = 240) -> None:
        """Until the supervisor has started `name` again (a new pid) and it is ready."""
        from services.localstack import stack

        process = self.processes[name]
        deadline = give_up_at(timeout)
        while process.pid() in (None, self.killed.get(name)):
            assert time.monotonic() < deadline, f"{name} not started again:\n{process.tail()}"
            time.sleep(0.2)
        stack.wait_ready(process)

    def wait_history(self, timeout: float = 240) -> None:
        self.back("history", timeout)

    def alive(self) -> dict[str, bool]:
        return {name: p.pid() is not None for name, p in self.processes.items()}

    def stop(self) -> None:
        for process in reversed(self.processes.values()):
            process.stop()

    def tails(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.tail(15)}" for p in self.processes.values())


@dataclass(frozen=True)
class Replayed:
    """What the scheduler must have done with a job-events log."""

    rescales: dict[str, dict[str, Any]]
    """The latest revision of every rescale record."""
    dead_letters: dict[tuple[int, int], str]
    """(partition, offset) -> error class of every input it must dead-letter."""
    jobs: set[str]
    """The jobs it accepted."""


def replay_log(codec: Codec, topic: str, log: list[Received], defaults: Defaults) -> Replayed:
    """Fold `log` as the scheduler does: per partition, in offset order."""
    processor = Processor(codec, _topics_of(topic), defaults, clock=lambda: 0.0)
    stored: dict[str, Stored] = {}
    latest: dict[str, dict[str, Any]] = {}
    dead: dict[tuple[int, int], str] = {}
    for message in sorted(log, key=lambda m: (m.partition, m.offset)):
        incoming = Incoming(topic, message.partition, message.offset, message.key, message.value)
        job = processor.job_of(incoming)
        outcome = processor.process(incoming, stored.get(job) if job else None)
        if outcome.stored is not None and outcome.job_id is not None:
            stored[outcome.job_id] = outcome.stored
        for out in outcome.outgoing:
            decoded = codec.decode(out.value)
            if decoded.schema == r.RESCALE:
                latest[decoded.record["rescaleUuid"]] = decoded.record
            elif decoded.schema == r.DEAD_LETTER:
                dead[(message.partition, message.offset)] = decoded.record["errorClass"]
    return Replayed(latest, dead, set(stored))


def _topics_of(job_events: str) -> Any:
    from services.contracts import Topics

    return Topics(job_events.removesuffix("job-events"))


def latest_rescales(codec: Codec, received: list[Received]) -> dict[str, dict[str, Any]]:
    """The latest revision per rescale of the rescales topic (re-sends are byte-identical);
    what the history rejects (undecodable, keyed by another job) is not a rescale."""
    latest: dict[str, dict[str, Any]] = {}
    for message in received:
        try:
            record = codec.decode(message.value or b"", expected=frozenset({r.RESCALE})).record
        except DecodeError:
            continue
        if message.key != record["jobId"].encode():
            continue
        known = latest.get(record["rescaleUuid"])
        if known is None or record["revision"] >= known["revision"]:
            latest[record["rescaleUuid"]] = record
    return latest


def folded_offsets(settings: Settings) -> dict[int, int]:
    """Per job-events partition, the offset through which the scheduler has folded and
    stored everything (its `folded` table's changelog, latest value per key)."""
    topic = f"{settings.topics.prefix}scheduler-folded-changelog"
    folded: dict[int, int] = {}
    for message in read_topic(settings, topic):
        if message.key is not None and message.value is not None:
            folded[int(message.key)] = int(message.value)
    return folded


@dataclass(frozen=True)
class Snapshot:
    """The job-events log, all of it folded, and the rescales that came of it."""

    log: list[Received]
    rescales: list[Received]


def quiescent_snapshot(
    settings: Settings,
    timeout: float,
    alive: Callable[[], None],
    read_log: Callable[[], list[Received]] | None = None,
) -> Snapshot:
    """Wait until the scheduler has folded the whole log, and read it with its outputs.

    Taken as: folded == end of every partition, the rescales read, and then the
    log and the folded offsets unchanged (nothing new happened while reading).
    `read_log`: the whole job-events log to its current end, where retention has deleted
    part of the topic (default: the topic, read from its beginning)."""
    deadline = give_up_at(timeout)
    topics = settings.topics
    whole = read_log or (lambda: read_topic(settings, topics.job_events, timeout=60))
    looks: list[str] = []  # what each look saw, for the failure's message
    while time.monotonic() < deadline:
        alive()
        log = whole()
        ends = _ends(log)
        folded = folded_offsets(settings)
        if folded != ends:
            looks.append(f"ends {ends} folded {folded}")
            time.sleep(1)
            continue
        rescales = read_topic(settings, topics.rescales, timeout=60)
        again = whole()
        if _ends(again) == ends and folded_offsets(settings) == ends:
            return Snapshot(log, rescales)
        looks.append(f"ends {ends} folded, then ends {_ends(again)} while reading the rescales")
    raise AssertionError(
        f"the scheduler did not fold the whole log within {timeout} s; the last looks:\n"
        + "\n".join(looks[-5:])
    )


def _ends(log: list[Received]) -> dict[int, int]:
    ends: dict[int, int] = {}
    for message in log:
        ends[message.partition] = max(ends.get(message.partition, -1), message.offset)
    return ends


def history_revisions(data_dir: Path) -> dict[str, int]:
    """The history's `rescales` table as committed: latest revision per rescale."""
    import pyarrow.parquet as pq

    latest: dict[str, int] = {}
    for path in committed_files(data_dir / "tables" / "rescales"):
        table = pq.read_table(path, columns=["rescale_uuid", "revision"])
        for rescale, revision in zip(
            table.column("rescale_uuid").to_pylist(),
            table.column("revision").to_pylist(),
            strict=True,
        ):
            latest[rescale] = max(latest.get(rescale, -1), revision)
    return latest


def wait_history_holds(
    settings: Settings, codec: Codec, data_dir: Path, timeout: float, alive: Callable[[], None]
) -> tuple[dict[str, int], dict[str, int]]:
    """Poll until the history's table holds exactly the rescales topic's latest revision of
    every rescale (or the deadline); return (what it holds, what the topic says).

    The topic is read again at every look: the loop does not stop when the scheduler has
    folded its log (the actuator still registers TaskManagers it was asked for, the
    history's planner still asks), so the scheduler's later revisions count too."""
    deadline = give_up_at(timeout)
    while True:
        alive()
        wanted = {
            rescale: record["revision"]
            for rescale, record in latest_rescales(
                codec, read_topic(settings, settings.topics.rescales)
            ).items()
        }
        found = history_revisions(data_dir)
        if found == wanted or time.monotonic() > deadline:
            return found, wanted
        time.sleep(1)


def command_ledger(codec: Codec, settings: Settings) -> tuple[list[str], dict[str, list[Any]]]:
    """The commands on the commands topic (usable ones) and the outcomes per command id."""
    commands: list[str] = []
    for message in read_topic(settings, settings.topics.commands):
        try:
            record = codec.decode(message.value or b"", expected=frozenset({r.SCALING_COMMAND}))
        except Exception:
            continue
        if message.key == record.record["jobId"].encode():
            commands.append(record.record["commandId"])
    outcomes: dict[str, list[Any]] = {}
    for message in read_topic(settings, settings.topics.command_outcomes):
        outcome = codec.decode(message.value).record
        outcomes.setdefault(outcome["commandId"], []).append(outcome)
    return commands, outcomes


def provisioned(outcomes: dict[str, list[Any]]) -> list[str]:
    """The TaskManagers the applied PROVISION_TASK_MANAGERS commands started. A RELEASE
    outcome lists TaskManagers too (the ones it stopped), which any producer may have
    registered, and more than once: those are not the actuator's to count."""
    return [
        tm
        for records in outcomes.values()
        for outcome in records
        if outcome["action"] == "PROVISION_TASK_MANAGERS" and outcome["status"] == "APPLIED"
        if "taskManagers" in outcome["details"]
        for tm in outcome["details"]["taskManagers"].split(",")
    ]


def registrations(codec: Codec, log: list[Received]) -> dict[str, int]:
    """How often each TaskManager id was registered on job-events."""
    counts: dict[str, int] = {}
    for message in log:
        try:
            decoded = codec.decode(message.value or b"")
        except Exception:
            continue
        if decoded.schema == r.TASK_MANAGER_REGISTERED:
            tm = decoded.record["taskManagerId"]
            counts[tm] = counts.get(tm, 0) + 1
    return counts
