"""The scheduler service against the real broker: same output as replay, crash-safe,
and every malformed input dead-lettered with a reason while valid work goes on; no
message stops it."""

from __future__ import annotations

import os
import random
import re
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.contracts import records as r
from services.contracts.codec import HEADER_SIZE, MAGIC
from services.contracts.deadletters import PAYLOAD_LIMIT
from services.contracts.events import (
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    TaskManagerRegistered,
)
from services.contracts.jobconfig import JOB_STORE_EXPIRATION
from services.contracts.kafka import librdkafka_config, producer_config
from services.contracts.topics import JOB_EVENTS
from services.scheduler.adapters.app import ROCKSDB_MEMORY
from tests.disk_support import fill, small_disk
from tests.integration.scheduler_support import (
    SchedulerProcess,
    consume_records,
    encode_events,
    example_events,
    latest_by_uuid,
    replayed_records,
)
from tests.kafka_support import consume, produce, produce_located, set_topic_config
from tests.patience import give_up_at, patient

pytestmark = pytest.mark.integration

EXAMPLES = (
    "tm-join-one-by-one.jsonl",
    "reactive-mode.jsonl",
    "requirements-update.jsonl",
    "failover.jsonl",
)


@pytest.fixture
def scheduler(kafka: Settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    processes: list[SchedulerProcess] = []

    def start(*extra: str, data: str = "scheduler", port: int | None = None) -> SchedulerProcess:
        """A worker on `tmp_path/data`: a restarted one on its predecessor's, so that
        RocksDB's tables carry over; two at once each on its own (one RocksDB, one process).
        A web `port` of its own unless given (a predecessor's: restarted by the same command)."""
        process = SchedulerProcess(kafka, tmp_path / data, *extra, port=port).start()
        processes.append(process)
        process.wait_ready()
        return process

    yield start
    for process in processes:
        process.stop()


def by_job(records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    result: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        result.setdefault(record["jobId"], []).append(record)
    return result


def test_rescale_records_equal_what_replay_prints(kafka: Settings, codec: Codec, scheduler) -> None:  # type: ignore[no-untyped-def]
    events = example_events(codec, *EXAMPLES)
    expected = replayed_records(events)
    produce(kafka, kafka.topics.job_events, encode_events(codec, events))
    scheduler()
    total = sum(len(records) for records in expected.values())
    received = consume_records(codec, kafka, lambda got: len(got) >= total)
    assert by_job(received) == expected  # every revision, in order, byte-identical content
    decisions = consume(kafka, kafka.topics.decisions, lambda got: len(got) >= 10)
    assert codec.decode(decisions[0].value).schema == r.SCHEDULER_DECISIONS


def workload(jobs: int, per_job: int, seed: int) -> list[Event]:
    from bench.core_bench import job_events

    streams = [list(job_events(f"crash-{j}", per_job, seed + j)) for j in range(jobs)]
    merged = [event for stream in streams for event in stream]
    merged.sort(key=lambda e: (e.timestamp, e.job_id))
    return merged


def bad_inputs(
    codec: Codec, rng: random.Random, count: int, job: str
) -> list[tuple[bytes | None, bytes, str]]:
    """Malformed messages of every kind, with the error class each must be dead-lettered as.

    `job` must exist by the time the messages are read (for the invalid-value cases).
    """
    key = job.encode()
    valid = codec.encode(r.TIMER_FIRED, {"jobId": job, "timestamp": 1})
    rescale = bytes.fromhex(
        __import__("json").loads(
            (Path(__file__).parents[1] / "contract" / "golden" / "rescale.v2.json").read_text()
        )["hex"]
    )
    kinds = [
        lambda: (key, rng.randbytes(rng.randint(0, 40)), "DecodeError"),
        lambda: (key, valid[: rng.randint(1, len(valid) - 1)], "DecodeError"),
        lambda: (key, valid + b"\x00", "DecodeError"),
        lambda: (key, rescale, "DecodeError"),
        lambda: (
            b"nobody",
            codec.encode(r.TIMER_FIRED, {"jobId": "nobody", "timestamp": 5}),
            "UnknownJob",
        ),
        lambda: (b"someone-else", valid, "KeyMismatch"),
        lambda: (
            key,
            codec.encode(
                r.TASK_MANAGER_REGISTERED,
                {"jobId": job, "timestamp": 5, "taskManagerId": "x", "slots": 0},
            ),
            "InvalidEvent",
        ),
        lambda: (
            key,
            codec.encode(
                r.RESOURCE_REQUIREMENTS_UPDATED, {"jobId": job, "timestamp": 5, "requirements": []}
            ),
            "InvalidEvent",
        ),
    ]
    return [rng.choice(kinds)() for _ in range(count)]


def produce_mixed(  # noqa: PLR0917
    settings: Settings,
    topic: str,
    valid: list[tuple[bytes, bytes]],
    bad: list[tuple[bytes | None, bytes, str]],
    rng: random.Random,
    after: int,
) -> dict[tuple[int, int], str]:
    """Interleave bad messages into the valid stream after its first `after` messages;
    return each bad one's (partition, offset) with its expected error class."""
    from confluent_kafka import Producer

    producer = Producer(producer_config(settings))
    injected: dict[tuple[int, int], str] = {}
    positions = sorted(rng.sample(range(after, len(valid) + len(bad)), len(bad)))
    bad_iter, valid_iter = iter(bad), iter(valid)
    for index in range(len(valid) + len(bad)):
        if positions and index == positions[0]:
            positions.pop(0)
            key, value, error_class = next(bad_iter)

            def record(err: Any, msg: Any, error_class: str = error_class) -> None:
                assert err is None, err
                injected[(msg.partition(), msg.offset())] = error_class

            producer.produce(topic, key=key, value=value, on_delivery=record)
        else:
            key, value = next(valid_iter)
            producer.produce(topic, key=key, value=value)
        producer.poll(0)
    assert producer.flush(30) == 0
    return injected


@pytest.mark.parametrize("store", ["memory://", "rocksdb://"])
def test_kill_minus_nine_loses_and_invents_nothing(
    kafka: Settings, codec: Codec, scheduler, store: str
) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(7)
    events = workload(jobs=20, per_job=200, seed=100)  # 4,000 events
    expected = latest_by_uuid(r for records in replayed_records(events).values() for r in records)
    bad = bad_inputs(codec, rng, 60, "crash-3")
    injected = produce_mixed(
        kafka, kafka.topics.job_events, encode_events(codec, events), bad, rng, after=20
    )
    # 20 jobs and 5 decoded states kept: most events read their job's state from the table
    options = ("--batch-size", "20", "--store", store, "--state-cache", "5")
    worker = scheduler(*options)
    deadline = give_up_at(60)
    while (
        worker.metrics().get("scalefold_scheduler_events_in_total", 0) < 1_000
        and time.monotonic() < deadline
    ):
        time.sleep(0.05)
    processed_at_kill = worker.metrics()["scalefold_scheduler_events_in_total"]
    worker.kill()
    assert processed_at_kill < len(events) + len(bad), (
        "the worker finished before the kill: raise the load"
    )
    # restarted by the same command: with RocksDB the same static group member, which
    # takes its partitions back without waiting for the killed one's session to end
    again = scheduler(*options, port=worker.port)
    log = again.log.read_text(errors="replace")
    # the same cluster: RocksDB's tables are kept, only the changelogs' tail is replayed
    assert "discarding the tables" not in log
    members = re.findall(r"consumer group member (\S+) \(static membership\)", log)
    assert len(members) == (2 if store == "rocksdb://" else 0) and len(set(members)) <= 1

    def converged(records: list[dict[str, Any]]) -> bool:
        return latest_by_uuid(records) == expected

    received = consume_records(codec, kafka, converged, timeout=180)
    assert latest_by_uuid(received) == expected
    letters = consume(
        kafka,
        kafka.topics.dead_letters,
        lambda got: (
            len(
                {
                    (
                        codec.decode(m.value).record["sourcePartition"],
                        codec.decode(m.value).record["sourceOffset"],
                    )
                    for m in got
                }
            )
            >= len(injected)
        ),
        timeout=60,
    )
    seen = {
        (d["sourcePartition"], d["sourceOffset"]): d["errorClass"]
        for d in (codec.decode(m.value).record for m in letters)
    }
    assert seen == injected  # exactly the injected bad inputs, each with its reason
    if store == "rocksdb://":  # every table partition with the worker's own sizes
        options = list(again.data_dir.glob("**/v1/tables/*-[0-9].db/OPTIONS-*"))
        assert {o.parent.name.split("-")[0] for o in options} == {"jobs", "folded"}
        for written in options:
            text = written.read_text()
            assert "write_buffer_size=4194304" in text and "max_write_buffer_number=2" in text
        # and /metrics says what RocksDB holds in memory, within those sizes
        held = re.findall(
            r'rocksdb_memory_bytes\{table="(\w+)",kind="(\w+)"\} (\d+)', again.metrics_text()
        )
        kinds = {(table, kind) for table, kind, _ in held}
        assert kinds == {(t, k) for t in ("jobs", "folded") for k in ROCKSDB_MEMORY}
        memtables = {table: int(b) for table, kind, b in held if kind == "memtables"}
        assert 0 < memtables["jobs"] <= JOB_EVENTS.partitions * 2 * 4 * 2**20


def test_a_worker_with_an_id_of_its_own_restarted_on_another_port_gets_to_work(
    kafka: Settings, codec: Codec, scheduler
) -> None:  # type: ignore[no-untyped-def]
    """--group-instance-id ID joins with the web address after the id: Faust keeps a
    member's address in the assignment the broker holds for it, and a static member
    that came back on another port stopped in Faust's check of it and never got to
    work. With the address in the id it is a new member there."""
    events = workload(jobs=4, per_job=30, seed=400)
    expected = latest_by_uuid(r for records in replayed_records(events).values() for r in records)
    encoded = encode_events(codec, events)
    first = scheduler("--group-instance-id", "my worker")
    produce(kafka, kafka.topics.job_events, encoded[: len(encoded) // 2])
    first.kill()
    produce(kafka, kafka.topics.job_events, encoded[len(encoded) // 2 :])
    again = scheduler("--group-instance-id", "my worker")  # another web port
    assert again.port != first.port
    received = consume_records(
        codec, kafka, lambda got: latest_by_uuid(got) == expected, timeout=120
    )
    assert latest_by_uuid(received) == expected
    for worker in (first, again):
        log = worker.log.read_text(errors="replace")
        member = f"my_worker-127.0.0.1-{worker.port}"
        assert f"consumer group member {member} (static membership)" in log


@pytest.mark.parametrize("store", ["memory://", "rocksdb://"])
def test_what_is_produced_while_no_worker_runs_is_all_folded_after_a_restart(
    kafka: Settings, codec: Codec, scheduler, store: str
) -> None:  # type: ignore[no-untyped-def]
    """Each round kills the worker, produces the next jobs' events (nothing after them:
    a partition's last messages have no later one to reveal a gap), starts it again.

    Faust's recovery used to hand the first messages it fetched for the resumed
    partitions to a stream queue that its flow-control resume then emptied; they were
    neither folded nor acknowledged (fastpath.SeekFirstRecovery). Every one is folded in
    order. (A round holds whole jobs: the timers the worker fires on the wall clock then
    come after a job's last event, as replay's drain fires them.)

    With memory:// a worker still, rarely, finds Faust delivering a partition from past
    the offset through which its recovered `folded` table says all is folded (CI, twice
    in four runs of 2026-11-26; never in 46 runs here, 34 of them beside a busy loop):
    it reads that range from Kafka itself ("Faust skipped offsets" in its log) and the
    records below come out exact.
    Which side is stale, the group's committed offset or the replayed table, is not
    known yet (docs/scheduler-service.md; the warning now logs both, and the table's
    changelog as Kafka has it); with rocksdb:// no skip has been seen, and this test
    still asserts there is none."""
    events = workload(jobs=24, per_job=40, seed=300)
    expected = latest_by_uuid(r for records in replayed_records(events).values() for r in records)
    rounds = 6  # the old race dropped messages at about one restart in four here
    worker = scheduler("--store", store)
    for part in range(rounds):
        jobs = {f"crash-{j}" for j in range(part, 24, rounds)}
        worker.kill()
        produce(
            kafka,
            kafka.topics.job_events,
            encode_events(codec, (e for e in events if e.job_id in jobs)),
        )
        worker = scheduler("--store", store)
        deadline = give_up_at(60)  # this part folded (or, lost, never: then on)
        while time.monotonic() < deadline and worker.metrics().get(
            "scalefold_scheduler_events_in_total", 0
        ) < 40 * len(jobs):
            time.sleep(0.1)

    received = consume_records(
        codec, kafka, lambda got: latest_by_uuid(got) == expected, timeout=120
    )
    assert latest_by_uuid(received) == expected
    log = worker.log.read_text(errors="replace")  # every round's worker appends to it
    skips = [line for line in log.splitlines() if "Faust skipped offsets" in line]
    if store == "rocksdb://":  # the tables kept on disk: no skipped range, ever seen
        assert not skips, f"Faust lost messages at a recovery: {skips}"
    for line in skips:  # shown in the run's summary, so that CI's log keeps the facts
        warnings.warn(f"memory:// restart: {line}", stacklevel=1)


def test_malformed_messages_are_dead_lettered_and_valid_work_is_unaffected(
    kafka: Settings, codec: Codec, scheduler
) -> None:  # type: ignore[no-untyped-def]
    rng = random.Random(11)
    events = example_events(codec, "tm-join-one-by-one.jsonl", "failover.jsonl")
    expected = replayed_records(events)
    bad = bad_inputs(codec, rng, 2_000, "clicks")
    injected = produce_mixed(
        kafka, kafka.topics.job_events, encode_events(codec, events), bad, rng, after=1
    )
    scheduler()
    total = sum(len(records) for records in expected.values())
    received = consume_records(codec, kafka, lambda got: len(got) >= total)
    assert by_job(received) == expected
    letters = consume(kafka, kafka.topics.dead_letters, lambda got: len(got) >= len(injected))
    records = [codec.decode(m.value).record for m in letters]
    assert {(d["sourcePartition"], d["sourceOffset"]): d["errorClass"] for d in records} == injected
    assert all(d["errorMessage"] and d["service"] == "scheduler" for d in records)
    payloads = {(d["sourcePartition"], d["sourceOffset"]): d["payload"] for d in records}
    assert len(payloads) == len(injected)


def test_two_workers_split_the_partitions(kafka: Settings, codec: Codec, scheduler) -> None:  # type: ignore[no-untyped-def]
    vertices = example_events(codec, "tm-join-one-by-one.jsonl")[0].vertices  # type: ignore[attr-defined]
    events: list[Event] = []
    for j in range(12):
        events.append(JobSubmitted(f"split-{j}", 0, "split", vertices, None, ()))
        events.append(TaskManagerRegistered(f"split-{j}", 1000, "tm", 4, None))
    expected = latest_by_uuid(r for records in replayed_records(events).values() for r in records)
    first, second = scheduler(data="first"), scheduler(data="second")
    produce(kafka, kafka.topics.job_events, encode_events(codec, events))
    received = consume_records(codec, kafka, lambda got: latest_by_uuid(got) == expected)
    assert latest_by_uuid(received) == expected
    deadline = give_up_at(30)
    while time.monotonic() < deadline:
        counts = [
            w.metrics().get("scalefold_scheduler_events_in_total", 0) for w in (first, second)
        ]
        if all(counts) and sum(counts) >= len(events):
            break
        time.sleep(0.2)
    assert all(counts), f"one worker got no partitions: {counts}"


os.environ.setdefault("PYTHONUNBUFFERED", "1")


def test_no_message_stops_the_scheduler(kafka: Settings, codec: Codec, scheduler) -> None:  # type: ignore[no-untyped-def]
    """Tombstones (the issue's poison pill: one stopped the scheduler for good), no key,
    an empty value, one as big as the broker takes, a binary key, odd headers, a future
    schema, a record of another topic: each is dead-lettered once with the reason, and the
    jobs' rescales are exactly replay's. When even the dead letter is refused (the topic
    takes nothing that big), the scheduler counts it and goes on."""
    events = example_events(codec, "tm-join-one-by-one.jsonl")
    expected = replayed_records(events)
    job = events[0].job_id.encode()
    valid = codec.encode(r.TIMER_FIRED, {"jobId": events[0].job_id, "timestamp": 1})
    command = codec.encode(
        r.SCALING_COMMAND,
        {
            "commandId": "c",
            "jobId": "j",
            "action": "RAISE_COOLDOWN",
            "amount": 1,
            "reason": "r",
            "evidence": [],
            "issuedAtMillis": 0,
        },
    )
    poison: list[tuple[bytes | None, bytes | None, str]] = [
        (job, None, "DecodeError"),
        (None, None, "DecodeError"),
        (job, b"", "DecodeError"),
        (job, b"\x00" * 900_000, "DecodeError"),
        (b"\xff\xfe" * 20_000, valid, "KeyMismatch"),
        (None, valid, "KeyMismatch"),
        (job, MAGIC + bytes(8) + valid[HEADER_SIZE:], "DecodeError"),
        (job, command, "DecodeError"),
    ]
    headers: list[tuple[str | bytes, bytes | None]] = [("h", None), (b"\xfe\xff", b"\x00")]
    at = produce_located(kafka, kafka.topics.job_events, [(k, v) for k, v, _ in poison], headers)
    produce(kafka, kafka.topics.job_events, encode_events(codec, events))
    worker = scheduler()
    total = sum(len(records) for records in expected.values())
    received = consume_records(codec, kafka, lambda got: len(got) >= total)
    assert by_job(received) == expected
    letters = consume(kafka, kafka.topics.dead_letters, lambda got: len(got) >= len(poison))
    found = [codec.decode(m.value).record for m in letters]
    assert {(d["sourcePartition"], d["sourceOffset"]): d["errorClass"] for d in found} == {
        where: error for where, (_, _, error) in zip(at, poison, strict=True)
    }
    assert len(found) == len(poison)  # once each: no crash loop re-sending them
    assert sum(d["payloadNull"] for d in found) == 2
    (huge,) = [d for d in found if d["payloadSize"] == 900_000]
    assert huge["payloadTruncated"] and len(huge["payload"]) == PAYLOAD_LIMIT
    assert [d["keyTruncated"] for d in found].count(True) == 1

    set_topic_config(kafka, kafka.topics.dead_letters, max_message_bytes="64")
    more = [TaskManagerRegistered(events[0].job_id, 10**9, "late", 1, None)]
    produce(kafka, kafka.topics.job_events, [(job, None), *encode_events(codec, more)])
    deadline = give_up_at(60)
    while worker.metrics().get("scalefold_scheduler_dead_letters_failed_total", 0) < 1:
        assert time.monotonic() < deadline, worker.tail()
        time.sleep(0.2)
    while worker.metrics().get("scalefold_scheduler_events_in_total", 0) < len(events) + 10:
        assert time.monotonic() < deadline, worker.tail()
        time.sleep(0.2)
    assert worker.process is not None and worker.process.poll() is None


def test_the_partitions_of_a_worker_killed_before_its_first_commit_are_all_folded(
    kafka: Settings, codec: Codec, scheduler
) -> None:  # type: ignore[no-untyped-def]
    """Two workers split the partitions; one is killed (kill -9) as the events arrive,
    before it has committed anything; the other takes its partitions over.

    Faust drops the messages of a fetch cut short by a rebalance and relies on seeking
    every partition back to its committed offset; aiokafka's seek skips a partition
    with nothing committed, so the survivor's fetcher stayed past messages it never
    delivered: it folded none of the taken-over partitions (compose, 2026-11-27: lost
    80 revisions; fastpath.PromptFetchThread.seek_to_committed)."""
    events = workload(jobs=24, per_job=20, seed=500)
    expected = latest_by_uuid(r for records in replayed_records(events).values() for r in records)
    # whole jobs in each half: the timers a worker fires on the wall clock then come after
    # a job's last event, as replay's drain fires them
    first = {f"crash-{j}" for j in range(0, 24, 2)}
    survivor, victim = scheduler(data="survivor"), scheduler(data="victim")
    produce(
        kafka,
        kafka.topics.job_events,
        encode_events(codec, (e for e in events if e.job_id in first)),
    )
    victim.kill()
    produce(
        kafka,
        kafka.topics.job_events,
        encode_events(codec, (e for e in events if e.job_id not in first)),
    )
    received = consume_records(
        codec, kafka, lambda got: latest_by_uuid(got) == expected, timeout=90
    )
    assert latest_by_uuid(received) == expected
    assert survivor.metrics()["scalefold_scheduler_events_in_total"] > 0


@pytest.mark.parametrize("store", ["memory://", "rocksdb://"])
def test_a_finished_jobs_state_is_released_and_stays_released_after_a_restart(
    kafka: Settings, codec: Codec, scheduler, store: str
) -> None:  # type: ignore[no-untyped-def]
    """`jobstore.expiration-time` after a job finished its state is deleted (a tombstone
    on the changelog): a later input of it is dead-lettered as of an unknown job, before
    and after a kill -9, while a live job of the same worker goes on."""
    vertices = example_events(codec, "tm-join-one-by-one.jsonl")[0].vertices  # type: ignore[attr-defined]
    now = int(time.time() * 1000)
    expiring = ((JOB_STORE_EXPIRATION, "2"),)
    inputs: list[Event] = [
        JobSubmitted("ends", now, "ends", vertices, None, expiring),
        JobLifecycle("ends", now + 1, JobEventKind.CANCEL),  # WaitingForResources -> Finished
        JobSubmitted("lives", now, "lives", vertices, None, expiring),
        TaskManagerRegistered("lives", now + 1, "tm-1", 1, None),
    ]
    produce(kafka, kafka.topics.job_events, encode_events(codec, inputs))
    options = ("--store", store)
    worker = scheduler(*options)
    deadline = give_up_at(60)
    released = "scalefold_scheduler_jobs_released_total"
    while worker.metrics().get(released, 0) < 1 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert worker.metrics()[released] == 1  # the cancelled job only

    def late(tm: str) -> list[Event]:
        at = int(time.time() * 1000)
        return [
            TaskManagerRegistered("ends", at, tm, 1, None),
            TaskManagerRegistered("lives", at, tm, 1, None),
        ]

    def unknown(expected: int) -> list[dict[str, Any]]:
        def found(got: list[Any]) -> list[dict[str, Any]]:
            records = [codec.decode(m.value).record for m in got]
            return [d for d in records if d["errorClass"] == "UnknownJob"]

        letters = consume(kafka, kafka.topics.dead_letters, lambda got: len(found(got)) >= expected)
        return found(letters)

    produce(kafka, kafka.topics.job_events, encode_events(codec, late("tm-2")))
    first = unknown(1)
    assert "released" in first[0]["errorMessage"]
    worker.kill()
    scheduler(*options, port=worker.port)
    produce(kafka, kafka.topics.job_events, encode_events(codec, late("tm-3")))
    letters = unknown(2)
    assert len(letters) == 2  # not brought back by the changelog's recovery
    assert all(letter["key"] == b"ends" for letter in letters)

    def items(got: list[Any]) -> list[dict[str, Any]]:
        records = [codec.decode(m.value).record for m in got]
        return [{**i, "job": d["jobId"]} for d in records for i in d["items"]]

    def joined(got: list[Any]) -> bool:
        """The live job's TaskManager of after the restart, and the release (the two
        jobs' partitions are read in no particular order)."""
        found = items(got)
        return any(
            i["job"] == "lives" and (i["details"] or {}).get("taskManager") == "tm-3" for i in found
        ) and any(i["kind"] == "JOB_RELEASED" for i in found)

    decided = items(consume(kafka, kafka.topics.decisions, joined))
    assert [(i["job"], i["kind"]) for i in decided if i["kind"] == "JOB_RELEASED"] == [
        ("ends", "JOB_RELEASED")
    ]


def _two_parts(
    codec: Codec, seed: int
) -> tuple[dict[str, dict[str, Any]], list[list[tuple[bytes, bytes]]]]:
    """Twelve jobs' events in two parts of whole jobs (no wall-clock timer fires between a
    job's events), and the records replay makes of them, by uuid."""
    events = workload(jobs=12, per_job=40, seed=seed)
    expected = latest_by_uuid(r for records in replayed_records(events).values() for r in records)
    first_jobs = {f"crash-{j}" for j in range(6)}
    parts = [
        encode_events(codec, (e for e in events if (e.job_id in first_jobs) is first))
        for first in (True, False)
    ]
    return expected, parts


def _folded(kafka: Settings, worker: SchedulerProcess, part: list[tuple[bytes, bytes]]) -> None:
    """Produce `part` and wait (a minute at most) until the worker has read it."""
    produce(kafka, kafka.topics.job_events, part)
    deadline = give_up_at(60)
    while (
        worker.metrics().get("scalefold_scheduler_events_in_total", 0) < len(part)
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)


def test_a_damaged_table_store_is_rebuilt_from_its_changelog(
    kafka: Settings, codec: Codec, scheduler, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    """Issue 49: a RocksDB store a disk fault damaged (here its CURRENT file) would stop
    the worker at every start, or worse, read as fewer jobs; it is removed before Faust
    opens it and rebuilt from its changelog: the restarted worker holds the first jobs'
    states (its timers' rescan counts them) and folds the next jobs as replay does. Each
    part holds whole jobs, so that no wall-clock timer fires between a job's events."""
    expected, parts = _two_parts(codec, seed=500)
    worker = scheduler("--store", "rocksdb://")
    _folded(kafka, worker, parts[0])
    worker.stop()
    stores = sorted((tmp_path / "scheduler").glob("*/v1/tables/*.db"))
    assert stores, "the worker kept no table store"
    for store in stores:
        (store / "CURRENT").write_text("garbage")
    before = len(worker.log.read_bytes())  # the restarted worker appends to the same log
    again = scheduler("--store", "rocksdb://")

    def rescanned() -> list[int]:
        text = again.log.read_bytes()[before:].decode(errors="replace")
        return [int(n) for n in re.findall(r"timers rescanned: (\d+) jobs", text)]

    deadline = give_up_at(60)
    while not rescanned() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rescanned()[-1:] == [6], again.log.read_text(errors="replace")[-4000:]
    produce(kafka, kafka.topics.job_events, parts[1])
    received = consume_records(
        codec, kafka, lambda got: latest_by_uuid(got) == expected, timeout=120
    )
    assert latest_by_uuid(received) == expected
    log = again.log.read_bytes()[before:].decode(errors="replace")
    removed = [s for s in stores if f"the table store {s} is damaged (RocksDB: Corruption" in log]
    assert removed == stores, log[-4000:]


class _TablesOn(SchedulerProcess):
    """A worker whose tables (--data-dir) are on `disk`, its log beside the test's files."""

    def __init__(self, settings: Settings, log_dir: Path, disk: Path) -> None:
        super().__init__(settings, log_dir)
        self.disk = disk

    def arguments(self) -> list[str]:
        arguments = super().arguments()
        arguments[arguments.index("--data-dir") + 1] = str(self.disk)
        return arguments


def test_a_full_disk_stops_a_batch_and_the_worker_waits_for_room_losing_nothing(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    """Issue 49: RocksDB cannot write a batch on a full disk; the worker stops without
    commit saying so in one line. Started again (as its supervisor does) on the disk
    still full, it waits for room, alive (the local stack's supervisor gives up on a
    service that keeps dying within 10 s of its start), and once there is room it folds
    every input as replay does."""
    expected, parts = _two_parts(codec, seed=600)
    logs = tmp_path / "logs"
    with small_disk(tmp_path / "disk", 48) as disk:
        worker, again = _TablesOn(kafka, logs, disk).start(), None
        try:
            worker.wait_ready()
            _folded(kafka, worker, parts[0])
            filler = fill(disk)
            produce(kafka, kafka.topics.job_events, parts[1])
            assert worker.process is not None
            worker.process.wait(patient(120))
            stopped = worker.log.read_text(errors="replace")
            assert "a batch could not be processed: the disk of --data-dir is full" in stopped
            again = _TablesOn(kafka, logs, disk).start()
            time.sleep(12)  # longer than the supervisor's 10 s: a start, not a failed one
            assert again.process is not None and again.process.poll() is None, again.tail()
            assert f"the disk holding {disk}" in again.tail(20)
            filler.unlink()
            again.wait_ready()
            received = consume_records(
                codec, kafka, lambda got: latest_by_uuid(got) == expected, timeout=120
            )
            assert latest_by_uuid(received) == expected
        finally:
            for process in (worker, again):
                if process is not None:
                    process.stop()


def test_a_jobs_snapshots_stand_in_for_the_inputs_retention_deleted(  # type: ignore[no-untyped-def]
    kafka: Settings, codec: Codec, scheduler
) -> None:
    """The scheduler writes a job's state to job-snapshots at its first input of each
    interval (here a minute of the job's clock); once retention has deleted the job's first
    inputs, a forecast folds on from the oldest snapshot the log still follows and answers
    what it answered from the first input; with inputs gone that no snapshot follows, it
    says so rather than fold what is left."""
    from services.contracts.foresight import ForecastUnknownError
    from services.contracts.kafka import read_to_end
    from services.scheduler.foresight import forecast
    from tests.integration.test_whatif import COOLDOWN, whatif
    from tests.kafka_support import delete_records_before

    events = example_events(codec, "requirements-update.jsonl")  # inputs at minutes 0, 1, 3, 4
    job = events[0].job_id
    located = produce_located(kafka, kafka.topics.job_events, encode_events(codec, events))
    partition = located[0][0]
    scheduler("--snapshot-hours", str(1 / 60))
    total = sum(len(records) for records in replayed_records(events).values())
    consume_records(codec, kafka, lambda got: len(got) >= total)
    settled(kafka, kafka.topics.job_events, partition)  # its own timers' inputs written too
    group = kafka.topics.own("test")
    received_snapshots = list(read_to_end(kafka, kafka.topics.job_snapshots, group, keys=[job]))
    snapshots = [codec.decode(m.value()).record for m in received_snapshots]
    minutes = [s["stateTimestampMillis"] // 60_000 for s in snapshots]
    assert minutes[:3] == [1, 3, 4], minutes  # one at the first input of each minute
    assert {(s["jobId"], s["partition"]) for s in snapshots} == {(job, partition)}
    assert snapshots[0]["offset"] == next(
        o for (_, o), e in zip(located, events, strict=True) if e.timestamp >= 60_000
    )

    targets, now = {"source": 2, "sink": 2}, 600_000
    before = forecast(kafka, job, targets, now)
    assert before.trigger_cause == "UPDATE_REQUIREMENT"
    second = snapshots[1]
    delete_records_before(kafka, kafka.topics.job_events, partition, second["offset"] + 1)
    assert forecast(kafka, job, targets, now) == before
    shown = whatif(kafka, "--job", job, "-D", f"{COOLDOWN}=60s")
    assert shown.returncode == 0, shown.stderr
    assert "recorded inputs since its snapshot at 1970-01-01 00:03:20 UTC" in shown.stdout

    # the snapshots gone too (as if kept shorter than the inputs): said, not guessed
    ends = [(p, o + 1) for p, o in {(m.partition(), m.offset()) for m in received_snapshots}]
    for snapshot_partition, end in ends:
        delete_records_before(kafka, kafka.topics.job_snapshots, snapshot_partition, end)
    with pytest.raises(ForecastUnknownError, match="first inputs have left job-events"):
        forecast(kafka, job, targets, now)
    shown = whatif(kafka, "--job", job, "-D", f"{COOLDOWN}=60s")
    assert shown.returncode == 2 and "no snapshot on job-snapshots follows" in shown.stderr


def settled(kafka: Settings, topic: str, partition: int, quiet_s: float = 3.0) -> None:
    """Wait until nothing more is written to the partition for `quiet_s`."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(librdkafka_config(kafka, **{"group.id": "settled"}))
    try:
        deadline, last, since = give_up_at(120), -1, time.monotonic()
        while time.monotonic() < deadline:
            end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
            if end != last:
                last, since = end, time.monotonic()
            elif time.monotonic() - since >= quiet_s:
                return
            time.sleep(0.5)
        raise AssertionError(f"{topic}[{partition}] still written to after 120 s")
    finally:
        consumer.close()
