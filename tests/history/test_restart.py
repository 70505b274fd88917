"""`scalefold history run` as a process: killed mid-run it loses and repeats nothing, and
it sends a scaling command once, also when it is started again."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.contracts import records as r
from services.history import synthetic
from services.history.decode import RescaleSchemas
from services.history.paths import Layout
from services.history.sinklog import committed_files, uncommitted_files
from services.history.tables import TABLES
from tests.history.support import HistoryProcess, encoded, read_topic, views, wait_for
from tests.kafka_support import produce

pytestmark = [pytest.mark.integration, pytest.mark.spark]

START = 1_700_000_000_000


def _fleet_messages(codec: Codec) -> list[tuple[bytes, bytes]]:
    records = list(synthetic.fleet(jobs=6, rescales_per_job=10, start_ms=START))
    return encoded(codec, records)


def test_killed_and_restarted_job_neither_loses_nor_repeats_rows(
    kafka: Settings, codec: Codec, spark: Any, schemas: RescaleSchemas, tmp_path: Path
) -> None:
    messages = _fleet_messages(codec)  # 60 rescales, 300 messages
    first, during, after = messages[:100], messages[100:220], messages[220:]
    topic = kafka.topics.rescales
    produce(kafka, topic, first)
    layout = Layout(tmp_path / "data")
    job = _started_with_a_committed_batch(kafka, layout, tmp_path / "run-1.log")
    try:
        halfway = threading.Event()
        feeder = threading.Thread(target=_trickle, args=(kafka, topic, during, halfway))
        feeder.start()
        # Kill while records still arrive every few ms: a batch is likely in flight.
        assert halfway.wait(60), "the trickle did not get halfway"
    finally:
        job.kill()
    feeder.join()
    produce(kafka, topic, after)

    restarted = HistoryProcess(
        kafka, layout.data_dir, tmp_path / "run-2.log", "--available-now", "--no-commands"
    )
    assert restarted.wait(180) == 0, restarted.tail()

    found = views(spark, layout, schemas)
    raw = found["raw_rescales"]
    assert raw.count() == len(messages)
    assert raw.select("kafka_partition", "kafka_offset").distinct().count() == len(messages)
    for table in ("rescale_vertices", "rescale_slots", "rescale_states"):
        index = {"rescale_vertices": "vertex_index", "rescale_slots": "slot_index"}.get(
            table, "span_index"
        )
        rows = found[f"raw_{table}"]
        keys = rows.select("kafka_partition", "kafka_offset", index).distinct().count()
        assert keys == rows.count(), f"{table} holds a row twice"
    latest = found["rescales"].collect()
    assert len(latest) == 60
    assert {row["revision"] for row in latest} == {5}
    assert all(row["terminal_state"] == "COMPLETED" for row in latest)
    for table in TABLES:  # the restart removed what the killed batch had left behind
        assert uncommitted_files(layout.table(table)) == []


def test_sigterm_stops_the_queries_cleanly_and_a_restart_carries_on(
    kafka: Settings, codec: Codec, spark: Any, schemas: RescaleSchemas, tmp_path: Path
) -> None:
    messages = _fleet_messages(codec)
    first, rest = messages[:150], messages[150:]
    produce(kafka, kafka.topics.rescales, first)
    layout = Layout(tmp_path / "data")
    job = _started_with_a_committed_batch(kafka, layout, tmp_path / "run-1.log")
    try:
        job.terminate()
        assert job.wait(60) == 0, job.tail()
    finally:
        if job.process.poll() is None:
            job.kill()
    log = job.tail(400)
    assert "received SIGTERM; stopping" in log
    assert "stopping the streaming queries" in log
    assert "Traceback" not in log
    produce(kafka, kafka.topics.rescales, rest)

    restarted = HistoryProcess(
        kafka, layout.data_dir, tmp_path / "run-2.log", "--available-now", "--no-commands"
    )
    assert restarted.wait(180) == 0, restarted.tail()
    raw = views(spark, layout, schemas)["raw_rescales"]
    assert raw.count() == len(messages)
    assert raw.select("kafka_partition", "kafka_offset").distinct().count() == len(messages)


def _started_with_a_committed_batch(kafka: Settings, layout: Layout, log: Path) -> HistoryProcess:
    job = HistoryProcess(kafka, layout.data_dir, log, "--trigger-seconds", "1", "--no-commands")
    try:
        wait_for(
            lambda: job.running() and bool(committed_files(layout.table("rescales"))),
            120,
            "the first committed batch",
        )
    except BaseException:
        job.kill()
        raise
    return job


def _trickle(
    settings: Settings, topic: str, messages: list[tuple[bytes, bytes]], halfway: threading.Event
) -> None:
    for start in range(0, len(messages), 10):
        produce(settings, topic, messages[start : start + 10])
        if start >= len(messages) // 2:
            halfway.set()
        time.sleep(0.05)  # pacing the producer, not waiting for anything


def _starving_job(codec: Codec) -> tuple[list[tuple[bytes, bytes]], str, int]:
    """A rescale stuck in WaitingForResources with 2 of 4 minimal slots, updated 3 times.

    Recent (ten minutes ago): the planner only looks at the last `--plan-lookback` hours.
    """
    start = int(time.time() * 1000) - 600_000
    uuid = synthetic.stable_uuid("starving", 1)
    base = [("Executing", start, start + 1_000), ("Restarting", start + 1_000, start + 2_000)]
    wait_since = start + 2_000
    revisions = []
    for revision in range(1, 4):
        spans = [*base, ("WaitingForResources", wait_since, None)]
        record = synthetic.rescale(
            "starving",
            uuid,
            spans=spans,
            groups=[synthetic.Group(desired=8, minimal=4, pre=4)],
            revision=revision,
            available_slots=2,
        )
        record["updatedAtMillis"] = wait_since + revision * 10_000
        revisions.append(record)
    healthy = synthetic.rescale(  # at its desired slots, none idle: no command
        "healthy",
        synthetic.stable_uuid("healthy", 1),
        spans=[("Restarting", start, start + 500), ("Executing", start + 500, start + 500)],
        groups=[synthetic.Group(desired=4, pre=2, post=4)],
        reason="SUCCEEDED",
        available_slots=4,
    )
    ancient = {**revisions[0], "jobId": "ancient", "rescaleUuid": "ancient-1"}
    ancient["schedulerStates"] = [  # starving too, but in 2023: beyond the lookback
        {**span, "enterTimestampInMillis": START + i, "leaveTimestampInMillis": None}
        for i, span in enumerate(ancient["schedulerStates"][-1:])
    ]
    ancient["startTimestampInMillis"] = ancient["updatedAtMillis"] = START
    messages = encoded(codec, [*revisions, healthy, ancient])
    messages += messages[:2]  # re-sent by a scheduler that crashed
    return messages, uuid, revisions[-1]["updatedAtMillis"]


def _commands(settings: Settings, codec: Codec) -> list[dict[str, Any]]:
    return [
        codec.decode(m.value, expected=frozenset({r.SCALING_COMMAND})).record
        for m in read_topic(settings, settings.topics.commands)
    ]


def test_a_starving_rescale_gets_one_provisioning_command_across_restarts(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    messages, uuid, updated_at = _starving_job(codec)
    produce(kafka, kafka.topics.rescales, messages)
    data = tmp_path / "data"

    # The long-running job plans on its timer; it crashes once the command is out.
    first = HistoryProcess(
        kafka, data, tmp_path / "run-1.log", "--trigger-seconds", "1", "--plan-interval", "1"
    )
    try:
        wait_for(lambda: first.running() and bool(_commands(kafka, codec)), 120, "a command")
    finally:
        first.kill()
    (command,) = _commands(kafka, codec)
    assert command["jobId"] == "starving"
    assert command["action"] == "PROVISION_TASK_MANAGERS"
    assert command["amount"] == 6  # 8 desired - 2 available
    assert command["evidence"] == [uuid]
    assert command["issuedAtMillis"] == updated_at
    assert "WaitingForResources" not in command["reason"]  # a sentence, not a state dump
    assert "waited for resources" in command["reason"]

    again = HistoryProcess(kafka, data, tmp_path / "run-2.log", "--available-now")
    assert again.wait(180) == 0, again.tail()
    assert "1 commands issued" in again.tail(200)
    assert _commands(kafka, codec) == [command]
