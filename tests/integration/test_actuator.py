"""The actuator against the real broker: each command applied exactly once, also across kill -9;
it acts only on what the scheduler accepted, and no input stops it."""

from __future__ import annotations

import json
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient

from services.actuator.cluster import EMBEDDED_CHECKPOINT_IDS
from services.actuator.replay import latest_snapshot, watermarks
from services.actuator.snapshots import Snapshot
from services.contracts import Codec, Settings
from services.contracts import jobconfig as c
from services.contracts import records as r
from services.contracts.codec import HEADER_SIZE, MAGIC
from services.contracts.commands import CommandBasis, ScalingAction, ScalingCommand
from services.contracts.deadletters import KEY_LIMIT, PAYLOAD_LIMIT
from services.contracts.events import (
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    TaskManagerRegistered,
    VertexSpec,
    to_record,
)
from services.contracts.kafka import librdkafka_config
from services.contracts.topics import JOB_EVENTS
from tests.history.support import read_topic
from tests.integration.scheduler_support import ActuatorProcess, SchedulerProcess
from tests.kafka_support import consume, produce, produce_located, set_topic_config
from tests.patience import give_up_at

GOLDEN = Path(__file__).parents[1] / "contract" / "golden"

pytestmark = pytest.mark.integration


def command(
    command_id: str, job: str, action: str = "PROVISION_TASK_MANAGERS", amount: int = 2
) -> dict[str, object]:
    return {
        "commandId": command_id,
        "jobId": job,
        "action": action,
        "amount": amount,
        "reason": "test",
        "evidence": [],
        "issuedAtMillis": 1,
    }


def _submit(kafka: Settings, codec: Codec, job: str, *, parallelism: int) -> JobSubmitted:
    submitted = JobSubmitted(
        job,
        int(time.time() * 1000),
        "a",
        (VertexSpec("v", "V", "g", "g", parallelism, None),),
        None,
        (),
    )
    produce(kafka, kafka.topics.job_events, [(job.encode(), codec.encode(*to_record(submitted)))])
    return submitted


@pytest.fixture
def scheduler(kafka: Settings, tmp_path: Path):  # type: ignore[no-untyped-def]
    """The scheduler the actuator follows: the cluster knows only the jobs it accepted."""
    process = SchedulerProcess(kafka, tmp_path / "scheduler").start()
    process.wait_ready()
    yield process
    process.stop()


def test_kill_minus_nine_between_consuming_and_applying_applies_each_command_once(
    kafka: Settings, codec: Codec, tmp_path: Path, scheduler: SchedulerProcess
) -> None:
    job = "act-1"
    _submit(kafka, codec, job, parallelism=8)
    ids = [f"prov-{i}" for i in range(3)]
    produce(
        kafka,
        kafka.topics.commands,
        [(job.encode(), codec.encode(r.SCALING_COMMAND, command(i, job))) for i in ids],
    )

    first = ActuatorProcess(
        kafka, tmp_path / "a", "--apply-delay", "30", "--provisioning-delay", "0.2"
    ).start()
    first.wait_ready()
    deadline = give_up_at(30)
    while (
        first.metrics().get("scalefold_actuator_commands_total", 0) < 1
        and time.monotonic() < deadline
    ):
        time.sleep(0.1)
    assert first.metrics()["scalefold_actuator_commands_total"] >= 1  # consumed, waiting to apply
    first.kill()

    second = ActuatorProcess(kafka, tmp_path / "b", "--provisioning-delay", "0.2").start()
    try:
        second.wait_ready()
        outcomes = consume(
            kafka, kafka.topics.command_outcomes, lambda got: len(got) >= 3, timeout=60
        )
        decoded = [codec.decode(m.value).record for m in outcomes]
        assert Counter(o["commandId"] for o in decoded) == Counter(ids)  # exactly one outcome each
        assert {o["status"] for o in decoded} == {"APPLIED"}
        # Everything on job-events, read after the outcomes (which follow the registrations):
        # each provisioned TaskManager must be registered exactly once.
        everything = consume(kafka, kafka.topics.job_events, lambda got: False, timeout=5)
        registered = Counter(
            record["taskManagerId"]
            for record in (codec.decode(m.value).record for m in everything)
            if "taskManagerId" in record and "slots" in record
        )
        assert sorted(registered) == sorted(f"{job}-cmd-{i}-{n}" for i in ids for n in range(2))
        assert set(registered.values()) == {1}
    finally:
        second.stop()


def test_undecodable_commands_are_dead_lettered_and_valid_ones_still_applied(
    kafka: Settings, codec: Codec, tmp_path: Path, scheduler: SchedulerProcess
) -> None:
    job = "act-dlq"
    submitted = _submit(kafka, codec, job, parallelism=2)
    not_avro = b"provision 2 please"
    not_a_command = codec.encode(*to_record(submitted))  # valid Avro, wrong record
    valid = codec.encode(r.SCALING_COMMAND, command("prov-ok", job))
    produce(
        kafka,
        kafka.topics.commands,
        [(job.encode(), not_avro), (job.encode(), not_a_command), (job.encode(), valid)],
    )
    actuator = ActuatorProcess(kafka, tmp_path / "a", "--provisioning-delay", "0.2").start()
    try:
        actuator.wait_ready()
        outcomes = consume(kafka, kafka.topics.command_outcomes, lambda got: len(got) >= 1, 60)
        dead = consume(kafka, kafka.topics.dead_letters, lambda got: len(got) >= 2, timeout=30)
    finally:
        actuator.stop()
    assert [codec.decode(m.value).record["status"] for m in outcomes] == ["APPLIED"]
    mine = [codec.decode(m.value).record for m in dead]
    assert {d["service"] for d in mine} == {"actuator"}
    assert [d["payload"] for d in mine] == [not_avro, not_a_command]
    assert {d["errorClass"] for d in mine} == {"DecodeError"}
    assert all(d["sourceTopic"] == kafka.topics.commands for d in mine)
    assert all(d["key"] == job.encode() and d["errorMessage"] for d in mine)


def test_a_command_whose_basis_no_longer_holds_is_superseded_and_starts_nothing(
    kafka: Settings, codec: Codec, tmp_path: Path, scheduler: SchedulerProcess
) -> None:
    """Issue 46 on the embedded cluster: the planner saw the job waiting with 0 slots, but
    it holds 2 registered TaskManagers, all it needs: its PROVISION gets one SUPERSEDED
    outcome naming them and starts no TaskManager; an operator's command (no basis) is
    applied as before."""
    job = "act-stale"
    now = int(time.time() * 1000)
    _submit(kafka, codec, job, parallelism=2)
    tms = [TaskManagerRegistered(job, now, f"tm-{n}", 1, None) for n in (1, 2)]
    produce(kafka, kafka.topics.job_events, [_event(codec, tm) for tm in tms])
    actuator = ActuatorProcess(kafka, tmp_path / "a", "--provisioning-delay", "0.2").start()
    try:
        actuator.wait_ready()
        _wait(lambda: len(_state(actuator).get(job, {}).get("taskManagers", {})) == 2, 60, "2 TMs")
        seen = CommandBasis(
            rescale_uuid="7d0e5b2a-91c4-5f63-8a1e-2c4b6d8f0a17",
            revision=1,
            state="WaitingForResources",
            available_slots=0,
            desired_slots=2,
            observed_at_millis=now,
            decided_at_millis=now + 60_000,
            fresh_as_of_millis=now,
        )
        stale = ScalingCommand(
            command_id="stale-1",
            job_id=job,
            action=ScalingAction.PROVISION_TASK_MANAGERS,
            amount=2,
            reason="waited for resources with 0 of 2 slots",
            issued_at_millis=now,
            basis=seen,
        )
        operator = command("operator-1", job, amount=1)
        produce(
            kafka,
            kafka.topics.commands,
            [
                (job.encode(), codec.encode(r.SCALING_COMMAND, stale.to_record())),
                (job.encode(), codec.encode(r.SCALING_COMMAND, operator)),
            ],
        )
        outcomes = consume(kafka, kafka.topics.command_outcomes, lambda got: len(got) >= 2, 60)
        _wait(lambda: len(_state(actuator)[job]["taskManagers"]) == 3, 60, "the operator's TM")
        metrics = actuator.metrics()
    finally:
        actuator.stop()
    decoded = [codec.decode(m.value).record for m in outcomes]
    assert Counter(o["commandId"] for o in decoded) == Counter(["stale-1", "operator-1"])
    by_id = {o["commandId"]: o for o in decoded}
    superseded = by_id["stale-1"]
    assert superseded["status"] == "SUPERSEDED", superseded
    assert superseded["message"].startswith(
        f"job {job} holds 2 slot(s) of registered TaskManagers and 0 more are starting; "
        "the command was decided on 0 slot(s)"
    )
    assert superseded["details"] == {
        "heldSlots": "2",
        "startingSlots": "0",
        "seenSlots": "0",
        "neededSlots": "2",
    }
    assert by_id["operator-1"]["status"] == "APPLIED"
    assert metrics["scalefold_actuator_superseded_total"] == 1
    assert metrics["scalefold_actuator_applied_total"] == 1
    everything = [codec.decode(m.value).record for m in read_topic(kafka, kafka.topics.job_events)]
    started = sorted(
        e["taskManagerId"] for e in everything if "-cmd-" in e.get("taskManagerId", "")
    )
    assert started == [f"{job}-cmd-operator-1-0"]  # none for the superseded command


def _state(actuator: ActuatorProcess) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{actuator.port}/state", timeout=5) as response:
        state: dict[str, Any] = json.load(response)
        return state


def _event(codec: Codec, event: Any, key: str | None = None) -> tuple[bytes, bytes]:
    return ((key or event.job_id).encode(), codec.encode(*to_record(event)))


def _wait(condition: Any, timeout: float, what: str) -> None:
    deadline = give_up_at(timeout)
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def test_the_cluster_follows_only_what_the_scheduler_accepted(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    """The issue's reproduction: inputs the scheduler refuses (a second submission with a
    20 ms checkpoint interval, a TaskManager with -3 slots, TaskManagers and a finish of
    jobs nobody submitted) once made the simulated cluster flood the broker with
    checkpoints and hold 'jobs' and negative slots that were never accepted."""
    job = "acc"
    vertices = (VertexSpec("v", "V", "g", "g", 2, None),)
    quick = ((c.SUBMISSION_STABILIZATION, "0 s"), (c.RUNTIME_MODE, "external"))
    now = int(time.time() * 1000)
    accepted = [
        JobSubmitted(job, now, job, vertices, 1_000, quick),
        TaskManagerRegistered(job, now, "tm-1", 1, None),
        TaskManagerRegistered(job, now, "tm-2", 1, None),
    ]
    refused = [
        JobSubmitted(job, now, job, vertices, 20, quick),
        TaskManagerRegistered(job, now, "neg", -3, None),
        *(TaskManagerRegistered(f"ghost-{i}", now, "tm", 4, None) for i in range(30)),
        JobSubmitted("bad-config", now, "b", vertices, 20, ((c.COOLDOWN, "soon"),)),
        JobLifecycle("ghost-1", now, JobEventKind.FINISHED),
    ]
    wrong_key = [_event(codec, JobLifecycle(job, now, JobEventKind.FINISHED), key="other")]
    scheduler = SchedulerProcess(kafka, tmp_path / "s").start()
    actuator = ActuatorProcess(kafka, tmp_path / "a", "--creation-delay", "0.1").start()
    try:
        scheduler.wait_ready()
        actuator.wait_ready()
        produce(kafka, kafka.topics.job_events, [_event(codec, e) for e in accepted])
        _wait(lambda: _state(actuator).get(job, {}).get("status") == "running", 60, "running")
        produce(kafka, kafka.topics.job_events, [_event(codec, e) for e in refused] + wrong_key)
        letters = consume(
            kafka,
            kafka.topics.dead_letters,
            lambda got: len(got) >= len(refused) + 1,
            timeout=60,
        )
        assert len(letters) == len(refused) + 1
        refused_at = max(codec.decode(m.value).record["timestampMillis"] for m in letters)
        _wait(lambda: _state(actuator)[job]["checkpoints"] >= 5, 60, "five checkpoints")
        state = _state(actuator)
        until = int(time.time() * 1000)
    finally:
        actuator.stop()
        scheduler.stop()
    assert set(state) == {job}  # never a job the scheduler refused
    assert state[job]["taskManagers"] == {"tm-1": 1, "tm-2": 1}
    assert state[job]["status"] == "running"  # not finished by a refused FINISHED
    everything = [codec.decode(m.value).record for m in read_topic(kafka, kafka.topics.job_events)]
    checkpoints = [
        e["timestamp"]
        for e in everything
        if e.get("kind") == "CHECKPOINT_COMPLETED"
        and e["jobId"] == job
        and e["checkpointId"] > EMBEDDED_CHECKPOINT_IDS
        and e["timestamp"] >= refused_at
    ]
    assert checkpoints, "the embedded runtime checkpoints the accepted job"
    # The accepted interval is 1 s; the refused 20 ms one would give ~50 a second.
    assert len(checkpoints) <= (until - refused_at) / 1_000 + 2


def _external_jobs(jobs: tuple[str, ...], *config: tuple[str, str]) -> list[Any]:
    """Each job submitted with the external runtime (the embedded cluster runs it) and no
    stabilization wait, checkpointing every second, and one TaskManager of one slot."""
    vertices = (VertexSpec("v", "V", "g", "g", 1, None),)
    quick = ((c.SUBMISSION_STABILIZATION, "0 s"), (c.RUNTIME_MODE, "external"), *config)
    now = int(time.time() * 1000)
    return [
        event
        for job in jobs
        for event in (
            JobSubmitted(job, now, job, vertices, 1_000, quick),
            TaskManagerRegistered(job, now, "tm-1", 1, None),
        )
    ]


def test_a_released_job_is_forgotten_also_by_a_restarted_actuator(
    kafka: Settings, codec: Codec, tmp_path: Path, scheduler: SchedulerProcess
) -> None:
    """The cluster holds what live jobs need: a job the scheduler released
    (`jobstore.expiration-time` after its cancel) leaves it, and the rebuild of a
    restarted actuator, which reads the whole log again, does not bring it back."""
    jobs = ("ends", "stays")
    started = _external_jobs(jobs, (c.JOB_STORE_EXPIRATION, "1"))
    actuator = ActuatorProcess(kafka, tmp_path / "a", "--creation-delay", "0.1").start()
    try:
        actuator.wait_ready()
        produce(kafka, kafka.topics.job_events, [_event(codec, e) for e in started])

        def running() -> set[str]:
            return {j for j, s in _state(actuator).items() if s["status"] == "running"}

        _wait(lambda: running() == set(jobs), 60, "both jobs running")
        cancel = JobLifecycle("ends", int(time.time() * 1000), JobEventKind.CANCEL)
        produce(kafka, kafka.topics.job_events, [_event(codec, cancel)])
        _wait(lambda: set(_state(actuator)) == {"stays"}, 60, "the ended job forgotten")
        actuator.stop()
        actuator = ActuatorProcess(kafka, tmp_path / "a", "--creation-delay", "0.1").start()
        actuator.wait_ready()
        state = _state(actuator)
        checkpoints = state["stays"]["checkpoints"]
        _wait(
            lambda: _state(actuator)["stays"]["checkpoints"] > checkpoints,
            30,
            "the live job checkpointing after the restart",
        )
    finally:
        actuator.stop()
    assert set(state) == {"stays"} and state["stays"]["status"] == "running"
    decisions = [codec.decode(m.value).record for m in read_topic(kafka, kafka.topics.decisions)]
    released = [d for d in decisions for item in d["items"] if item["kind"] == "JOB_RELEASED"]
    assert [d["jobId"] for d in released] == ["ends"]


def test_no_input_stops_the_actuator(kafka: Settings, codec: Codec, tmp_path: Path) -> None:
    """Tombstones, empty and huge values, null and foreign keys, odd headers, a future
    schema, records of other topics, on both topics the actuator consumes: each becomes a
    dead letter with the reason, valid commands are still applied, and a restart does not
    dead-letter the decisions again. When even the dead letter is refused by the broker,
    the actuator counts it and goes on."""
    job = "poison"
    scheduler = SchedulerProcess(kafka, tmp_path / "s").start()
    scheduler.wait_ready()
    _submit(kafka, codec, job, parallelism=2)
    valid = codec.encode(r.SCALING_COMMAND, command("ok-1", job))
    future = MAGIC + bytes.fromhex("0123456789abcdef") + valid[HEADER_SIZE:]
    rescale = bytes.fromhex(json.loads((GOLDEN / "rescale.v2.json").read_text())["hex"])
    key = job.encode()
    poison_commands: list[tuple[bytes | None, bytes | None, str]] = [
        (key, None, "DecodeError"),
        (None, None, "DecodeError"),
        (key, b"", "DecodeError"),
        (key, b"\x00" * 900_000, "DecodeError"),
        (b"\xff" * 300_000, valid, "KeyMismatch"),
        (None, valid, "KeyMismatch"),
        (key, future, "DecodeError"),
        (key, rescale, "DecodeError"),
        (key, codec.encode(*to_record(JobLifecycle(job, 1, JobEventKind.CANCEL))), "DecodeError"),
    ]
    poison_decisions: list[tuple[bytes | None, bytes | None, str]] = [
        (key, None, "DecodeError"),
        (key, b"garbage", "DecodeError"),
        (key, valid, "DecodeError"),
        (b"someone-else", _decisions_record(codec, job), "KeyMismatch"),
    ]
    headers: list[tuple[str | bytes, bytes | None]] = [
        ("a", b"\xff\x00"),
        ("a", None),
        (b"\xfe\xff", b"not utf-8"),
    ]
    at = produce_located(
        kafka, kafka.topics.commands, [(k, v) for k, v, _ in poison_commands], headers
    )
    at += produce_located(
        kafka, kafka.topics.decisions, [(k, v) for k, v, _ in poison_decisions], headers
    )
    absurd = codec.encode(r.SCALING_COMMAND, command("absurd", job, amount=10**12))
    produce(kafka, kafka.topics.commands, [(key, absurd), (key, valid)])
    expected = {
        (topic, partition, offset): error
        for (topic, poison), (partition, offset), error in zip(
            [(kafka.topics.commands, p) for p in poison_commands]
            + [(kafka.topics.decisions, p) for p in poison_decisions],
            at,
            [p[2] for p in poison_commands + poison_decisions],
            strict=True,
        )
    }
    actuator = ActuatorProcess(kafka, tmp_path / "a", "--provisioning-delay", "0.2").start()
    try:
        actuator.wait_ready()
        outcomes = consume(kafka, kafka.topics.command_outcomes, lambda got: len(got) >= 2, 60)
        letters = consume(
            kafka, kafka.topics.dead_letters, lambda got: len(got) >= len(expected), 60
        )
        found = [codec.decode(m.value).record for m in letters]
        assert {
            (d["sourceTopic"], d["sourcePartition"], d["sourceOffset"]): d["errorClass"]
            for d in found
        } == expected
        assert len(found) == len(expected)
        assert all(d["service"] == "actuator" and d["errorMessage"] for d in found)
        assert sum(d["payloadNull"] for d in found) == 3
        (huge,) = [d for d in found if d["payloadSize"] == 900_000]
        assert huge["payloadTruncated"] and len(huge["payload"]) == PAYLOAD_LIMIT
        (long_key,) = [d for d in found if d["keyTruncated"]]
        assert long_key["key"] == b"\xff" * KEY_LIMIT
        decided = {o["commandId"]: o for o in (codec.decode(m.value).record for m in outcomes)}
        assert decided["ok-1"]["status"] == "APPLIED"
        assert (
            decided["absurd"]["status"] == "REJECTED" and "between" in decided["absurd"]["message"]
        )

        actuator.stop()  # a restart reads the decisions again, but knows it checked them
        actuator.start().wait_ready()
        assert len(read_topic(kafka, kafka.topics.dead_letters)) == len(expected)

        # Even the dead letter refused (the topic takes nothing that big): counted, and on.
        set_topic_config(kafka, kafka.topics.dead_letters, max_message_bytes="64")
        again = codec.encode(r.SCALING_COMMAND, command("ok-2", job))
        produce(kafka, kafka.topics.commands, [(key, None), (key, again)])
        applied = consume(kafka, kafka.topics.command_outcomes, lambda got: len(got) >= 3, 60)
        assert {codec.decode(m.value).record["commandId"] for m in applied} == {
            "ok-1",
            "absurd",
            "ok-2",
        }
        _wait(
            lambda: actuator.metrics().get("scalefold_actuator_dead_letters_failed_total", 0) >= 1,
            30,
            "the refused dead letter to be counted",
        )
        assert actuator.process is not None and actuator.process.poll() is None
    finally:
        actuator.stop()
        scheduler.stop()


def _decisions_record(codec: Codec, job: str) -> bytes:
    return codec.encode(
        r.SCHEDULER_DECISIONS, {"jobId": job, "timestamp": 1, "sourceOffset": 10**9, "items": []}
    )


def test_a_restarted_actuator_reads_on_from_its_snapshot_where_retention_deleted_the_log(
    kafka: Settings, codec: Codec, tmp_path: Path, scheduler: SchedulerProcess
) -> None:
    """Every start writes a snapshot of what it rebuilt, and a thread writes one every
    `--snapshot-minutes`; a restart restores the latest and folds only what came after
    it, so `decisions` and `job-events` may lose what came before (their retention):
    the jobs, their TaskManagers and checkpoint ids come back as they were."""
    jobs = ("first", "second")
    started = _external_jobs(jobs)
    args = ("--creation-delay", "0.1", "--snapshot-minutes", "0.05")
    actuator = ActuatorProcess(kafka, tmp_path / "a", *args).start()
    logs = [tmp_path / "a"]
    try:
        actuator.wait_ready()
        produce(kafka, kafka.topics.job_events, [_event(codec, e) for e in started])

        def running() -> set[str]:
            return {j for j, s in _state(actuator).items() if s["status"] == "running"}

        _wait(lambda: running() == set(jobs), 60, "both jobs running")
        _wait(  # a busy machine's first checkpoint may come after the first snapshot (CI)
            lambda: all(s["checkpoints"] > 0 for s in _state(actuator).values()),
            60,
            "both jobs checkpointing",
        )
        admin = AdminClient(librdkafka_config(kafka))
        topics = (kafka.topics.decisions, kafka.topics.job_events)
        reader = Consumer(librdkafka_config(kafka, **{"group.id": f"{kafka.topics.prefix}ends"}))
        ends = {
            (t, p): watermarks(reader, t, p)[1]
            for t in topics
            for p in range(JOB_EVENTS.partitions)
        }
        reader.close()

        def covering() -> Snapshot | None:
            snapshot = latest_snapshot(kafka, codec)
            if snapshot is None or snapshot.jobs < 2:
                return None
            decided = all(
                snapshot.positions[tp] >= end for tp, end in ends.items() if tp[0] == topics[0]
            )
            return snapshot if decided else None

        _wait(lambda: covering() is not None, 60, "a snapshot of both jobs running")
        before = _state(actuator)
        actuator.stop()
        snapshot = covering()
        assert snapshot is not None
        deleted = admin.delete_records(
            [TopicPartition(t, p, o) for (t, p), o in snapshot.positions.items() if o > 0]
        )
        for future in deleted.values():
            future.result(30)
        actuator = ActuatorProcess(kafka, tmp_path / "b", *args).start()
        logs.append(tmp_path / "b")
        actuator.wait_ready()
        after = _state(actuator)
        _wait(
            lambda: all(_state(actuator)[j]["checkpoints"] > after[j]["checkpoints"] for j in jobs),
            30,
            "both jobs checkpointing after the restart",
        )
        url = f"http://127.0.0.1:{actuator.port}/metrics"
        with urllib.request.urlopen(url, timeout=5) as response:
            metrics = dict(line.split() for line in response.read().decode().splitlines())
    finally:
        actuator.stop()

    def kept(state: dict[str, Any]) -> dict[str, Any]:
        return {j: {k: v for k, v in s.items() if k != "checkpoints"} for j, s in state.items()}

    assert kept(after) == kept(before)
    counts = {j: (before[j]["checkpoints"], after[j]["checkpoints"]) for j in jobs}
    assert all(b <= a and b > 0 for b, a in counts.values()), f"(before, after): {counts}"
    text = "\n".join(p.read_text() for d in logs for p in d.glob("*.log"))
    assert "a snapshot of 2 jobs" in text and "were deleted before a snapshot" not in text
    assert int(metrics["scalefold_actuator_snapshots_total"]) >= 1
    assert metrics["scalefold_actuator_snapshots_failed_total"] == "0"
