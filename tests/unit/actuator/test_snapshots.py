"""The actuator's snapshot: folding the log from a snapshot on gives the cluster a fold
from the log's beginning gives, wherever the snapshot was taken."""

from __future__ import annotations

import dataclasses
from typing import Any

import msgspec
import pytest

from services.actuator import replay
from services.actuator.cluster import EMBEDDED_CHECKPOINT_IDS, EmbeddedCluster, provisioned_id
from services.actuator.snapshots import (
    CONFIGURED_FIELDS,
    MODEL_FIELDS,
    Model,
    Snapshot,
    capture,
    from_record,
    restore,
    to_record,
)
from services.contracts import Codec, SchemaRegistry
from services.contracts import records as r
from services.contracts.events import (
    ConfigurationUpdated,
    Event,
    JobEventKind,
    JobLifecycle,
    TaskManagerLost,
    TaskManagerRegistered,
)
from services.contracts.events import (
    to_record as event_record,
)
from services.contracts.jobconfig import COOLDOWN
from services.contracts.kafka import partition_for
from services.contracts.topics import JOB_EVENTS, Topics
from tests.unit.actuator.test_cluster import TIMING, decision, registered, submitted

TOPICS = Topics("t.")
CODEC = Codec(SchemaRegistry.load())


@dataclasses.dataclass
class Message:
    """What the fold reads of a consumed Kafka message."""

    _topic: str
    _partition: int
    _offset: int
    _key: bytes | None
    _value: bytes | None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> None:
        return None


def request(kind: str, graph: str, **details: str) -> dict[str, Any]:
    return {
        "category": "RUNTIME_REQUEST",
        "kind": kind,
        "executionGraphId": graph,
        "details": {"runtime": "external", **details},
    }


def released() -> dict[str, Any]:
    return decision("JOB_RELEASED")


class Log:
    """Decisions and own events of several jobs, each on its job's partition, in order."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.next: dict[tuple[str, int], int] = {}

    def _append(self, topic: str, job: str, value: bytes | None) -> int:
        partition = partition_for(job.encode(), JOB_EVENTS.partitions)
        offset = self.next.get((topic, partition), 0)
        self.next[(topic, partition)] = offset + 1
        self.messages.append(Message(topic, partition, offset, job.encode(), value))
        return offset

    def event(self, event: Event) -> int:
        return self._append(TOPICS.job_events, event.job_id, CODEC.encode(*event_record(event)))

    def decisions(self, job: str, source: int, *items: dict[str, Any]) -> None:
        record = {
            "jobId": job,
            "timestamp": 0,
            "sourceOffset": source,
            "items": [
                {"sequence": n, "timestamp": 0, "state": "Executing", **item}
                for n, item in enumerate(items)
            ],
        }
        self._append(TOPICS.decisions, job, CODEC.encode(r.SCHEDULER_DECISIONS, record))


def a_fleets_log(log: Log | None = None) -> list[Message]:
    log = log or Log()
    for job in ("a", "b", "ends"):
        tm = provisioned_id(job, f"c-{job}", 1)
        at = log.event(TaskManagerRegistered(job, 1, f"tm-{job}", 1, None))
        log.decisions(job, at, submitted(), registered(f"tm-{job}", 1))
        at = log.event(TaskManagerRegistered(job, 2, tm, 2, None))  # provisioned, before named
        log.decisions(job, at, request("CREATE_EXECUTION_GRAPH", "g1", slots=f"tm-{job}#0"))
        log.event(
            JobLifecycle(job, 3, JobEventKind.EXECUTION_GRAPH_CREATED, execution_graph_id="g1")
        )
        log.decisions(job, at, request("CREATE_EXECUTION_GRAPH", "g1"))  # a re-send
        at = log.event(TaskManagerRegistered(job, 4, tm, 2, None))
        log.decisions(job, at, registered(tm, 2), request("DEPLOY", "g1"))
        log.event(
            JobLifecycle(
                job, 5, JobEventKind.CHECKPOINT_COMPLETED, checkpoint_id=EMBEDDED_CHECKPOINT_IDS + 3
            )
        )
        log.event(ConfigurationUpdated(job, 6, ((COOLDOWN, "30000 ms"),), f"cool-{job}"))
        at = log.event(TaskManagerLost(job, 7, tm, f"released by command r-{job} of {tm}"))
        log.decisions(job, at, decision("RESOURCES_CHANGED", change="lost", taskManager=tm))
    at = log.event(JobLifecycle("ends", 8, JobEventKind.CANCEL))
    log.decisions("ends", at, released())
    log.messages.append(Message(TOPICS.decisions, 0, 99, b"a", b"not a record"))  # skipped
    return log.messages


def folded(messages: list[Message], into: EmbeddedCluster) -> EmbeddedCluster:
    for message in messages:
        replay.fold(into, CODEC, TOPICS.decisions, message)  # type: ignore[arg-type]
    return into


def model(cluster: EmbeddedCluster) -> Model:
    return Model(**{name: getattr(cluster, name) for name in MODEL_FIELDS})


def test_the_snapshot_holds_every_field_the_log_sets() -> None:
    fields = {f.name for f in dataclasses.fields(EmbeddedCluster)}
    assert set(MODEL_FIELDS) == fields - CONFIGURED_FIELDS


def test_a_fold_from_any_snapshot_on_equals_the_fold_from_the_beginning() -> None:
    messages = a_fleets_log()
    whole = folded(messages, EmbeddedCluster(TIMING))
    assert set(whole.jobs) == {"a", "b"} and set(whole.released) == {"ends"}
    assert whole.jobs["a"].status == "running" and whole.cooldowns["a"] == 30_000
    for cut in range(len(messages) + 1):
        head = folded(messages[:cut], EmbeddedCluster(TIMING))
        snapshot = capture(head, {}, taken_at=cut)
        again = from_record(
            CODEC.decode(CODEC.encode(r.ACTUATOR_SNAPSHOT, to_record(snapshot))).record
        )
        assert again == snapshot
        tail = EmbeddedCluster(TIMING)
        restore(again, tail)
        assert model(folded(messages[cut:], tail)) == model(whole), f"cut at {cut}"


def test_commands_and_released_jobs_are_forgotten_their_memory_after_a_sweep_saw_them() -> None:
    log = Log()
    a_fleets_log(log)  # stamped 1-8 ms: no sweep yet (one each 10 ms of the log's clock)
    checkpoint = EMBEDDED_CHECKPOINT_IDS + 4
    for at in (1_000, 4_599, 4_600):
        log.event(
            JobLifecycle("a", at, JobEventKind.CHECKPOINT_COMPLETED, checkpoint_id=checkpoint)
        )
    messages, memory = log.messages, 3_600
    cuts = {"seen": len(messages) - 2, "kept": len(messages) - 1, "gone": len(messages)}
    seen, kept, gone = (
        folded(messages[:cut], EmbeddedCluster(TIMING, memory_ms=memory)) for cut in cuts.values()
    )
    assert seen.learned and set(seen.learned.values()) == {1_000}
    assert seen.released_at == {"ends": 1_000}
    held = ("applied", "chosen", "learned", "released", "released_at")
    assert [getattr(kept, name) for name in held] == [getattr(seen, name) for name in held]
    assert kept.applied and kept.released  # 3,599 ms on: still held
    assert (gone.applied, gone.chosen, gone.learned) == ({}, {}, {})
    assert (gone.released, gone.released_at) == ({}, {})
    assert set(gone.jobs) == {"a", "b"} and gone.cooldowns["a"] == 30_000
    again = folded(messages[: cuts["seen"]], EmbeddedCluster(TIMING, memory_ms=memory))
    assert again.fresh("ends", 10_000)  # a new job under the released one's id
    assert "ends" not in again.released and "ends" not in again.released_at
    for cut in range(len(messages) + 1):  # the log's clock, not the fold's start, decides
        tail = EmbeddedCluster(TIMING, memory_ms=memory)
        head = folded(messages[:cut], EmbeddedCluster(TIMING, memory_ms=memory))
        restore(capture(head, {}, 0), tail)
        assert model(folded(messages[cut:], tail)) == model(gone), f"cut at {cut}"


def test_a_restored_cluster_keeps_its_own_configuration() -> None:
    snapshot = capture(folded(a_fleets_log(), EmbeddedCluster(TIMING, seed=1)), {}, 0)
    mine = EmbeddedCluster(TIMING, seed=7, spare_slots=2)
    restore(snapshot, mine)
    assert (mine.seed, mine.spare_slots, mine.timing) == (7, 2, TIMING)
    assert mine.empty().jobs == {} and mine.empty().spare_slots == 2


@pytest.mark.parametrize(
    "snapshot",
    [
        Snapshot(0, {}, 0, "msgpack/0", b""),
        Snapshot(0, {}, 0, "msgpack/1", b"\x93not a model"),
        Snapshot(0, {}, 0, "msgpack/2", b"\x93not a model"),
        Snapshot(0, {}, 0, "msgpack/1", msgspec.msgpack.encode({"jobs": {"a": []}})),
    ],
)
def test_a_snapshot_this_actuator_cannot_read_is_not_restored(snapshot: Snapshot) -> None:
    cluster = EmbeddedCluster(TIMING)
    with pytest.raises(ValueError):
        restore(snapshot, cluster)
    assert replay.restored(snapshot, cluster) is None and cluster.jobs == {}


def test_a_snapshot_of_the_format_before_is_restored_keeping_lost_ones_unread() -> None:
    """msgpack/1 kept every TaskManager a job's decisions named; restored, the lost ones it
    provisioned are held as maybe still to be read back, until the job is released."""
    whole = folded(a_fleets_log(), EmbeddedCluster(TIMING))
    raw = msgspec.to_builtins(model(whole))
    for job_id, job in raw["jobs"].items():
        del job["lost_unread"], job["events_read"]
        job["named"] = [f"tm-{job_id}", provisioned_id(job_id, f"c-{job_id}", 1)]
    restored = EmbeddedCluster(TIMING)
    restore(Snapshot(0, {}, 2, "msgpack/1", msgspec.msgpack.encode(raw)), restored)
    for job_id, job in restored.jobs.items():
        assert job.lost_unread == {provisioned_id(job_id, f"c-{job_id}", 1): 2**63 - 1}
        assert job.task_managers == whole.jobs[job_id].task_managers == {f"tm-{job_id}": 1}
    assert {n: getattr(restored, n) for n in MODEL_FIELDS if n != "jobs"} == {
        n: getattr(whole, n) for n in MODEL_FIELDS if n != "jobs"
    }
