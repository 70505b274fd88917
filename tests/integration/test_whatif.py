"""`scalefold whatif` against a real broker: a Flink job's recorded inputs (the bridge's
observations of real Flink answers) and Flink's own records on their topics, and the
what-if's figures checked against a replay this test computes itself; and `tail
--format log --to-end`, the recorded inputs as the log `scalefold replay` reads."""

from __future__ import annotations

import re
import subprocess
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path

from services.contracts import Codec
from services.contracts import records as r
from services.contracts.eventlog import read_log
from services.contracts.events import (
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    TaskManagerRegistered,
    TimerFired,
    to_record,
)
from services.contracts.settings import Settings
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import RescaleUpdated
from tests.kafka_support import cli_env, produce
from tests.unit.bridge.test_step import JID, NOW, first_poll

SCALEFOLD = [sys.executable, "-m", "services.cli"]
COOLDOWN = "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling"


def whatif(settings: Settings, *args: str) -> subprocess.CompletedProcess[str]:
    env = cli_env(settings)
    return subprocess.run(
        [*SCALEFOLD, "whatif", *args],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def row(output: str, name: str) -> list[str]:
    """A row of the what-if's table, its cells (two spaces apart) after the name."""
    line = next(x for x in output.splitlines() if x[2:].startswith(f"{name}  "))
    return re.split(r"\s{2,}", line[2:].strip())[1:]


def test_a_flink_jobs_whatif_reads_its_recorded_inputs_and_flinks_records(
    kafka: Settings, codec: Codec
) -> None:
    seen = first_poll()  # a real Flink's answers, observed: the job, 3 TaskManagers
    key = f"local.{JID}"
    inputs = [
        *seen.events,
        TaskManagerRegistered(key, NOW + 5_000, "tm-9", 2, None),
        JobLifecycle(key, NOW + 120_000, JobEventKind.CANCEL, True, "Flink job CANCELED"),
    ]
    produce(
        kafka,
        kafka.topics.job_events,
        ((key.encode(), codec.encode(*to_record(e))) for e in inputs),
    )
    produce(
        kafka,
        kafka.topics.flink_rescales,
        ((key.encode(), codec.encode(r.FLINK_RESCALE, rec)) for rec in seen.rescales),
    )
    # another job's inputs on the same topic are not this job's
    other = JobLifecycle("local.other", NOW, JobEventKind.CANCEL, True, None)
    produce(kafka, kafka.topics.job_events, [(b"local.other", codec.encode(*to_record(other)))])

    def replayed(cooldown: str | None) -> tuple[str, dict[str, str]]:
        """This test's own replay, the cooldown pinned or not: outcomes, last parallelism."""
        events = [
            replace(e, configuration=(*own(e.configuration), (COOLDOWN, cooldown)))
            if isinstance(e, JobSubmitted) and cooldown is not None
            else e
            for e in inputs
        ]
        _, effects = replay(events)
        latest = {e.rescale_uuid: e.record for e in effects if isinstance(e, RescaleUpdated)}
        ended = Counter(rec["terminalState"] for rec in latest.values())
        done = [rec for rec in latest.values() if rec["terminalState"] == "COMPLETED"]
        last = max(done, key=lambda rec: rec["startTimestampInMillis"])
        return (
            ", ".join(f"{n} {state}" for state, n in sorted(ended.items())),
            {v["jobVertexName"]: str(v["postRescaleParallelism"]) for v in last["vertices"]},
        )

    assert replayed("0s") != replayed("10min")  # the key matters for these inputs
    # The job named by Flink's id alone; the cooldown pinned at 0 s and at 10 min.
    for cooldown in ("0s", "10min"):
        result = whatif(kafka, "--job", JID, "-D", f"{COOLDOWN}={cooldown}")
        assert result.returncode == 0, result.stderr
        out = result.stdout
        assert out.splitlines()[0] == (
            f"job {key}: {len(inputs)} recorded inputs; what-if: {COOLDOWN}={cooldown}"
        ), out
        assert row(out, "rescales")[0] == str(len(seen.rescales)), out  # Flink's
        assert row(out, "outcomes")[1:] == [replayed(None)[0], replayed(cooldown)[0]], out
        for vertex, parallelism in replayed(cooldown)[1].items():
            assert row(out, f"  {vertex}")[1:] == [replayed(None)[1][vertex], parallelism], out
        assert "\nFlink:\n" in out, out

    # A cluster's table; a job the topics do not know, answered with the ones they do.
    table = whatif(kafka, "--cluster", "local", "-D", f"{COOLDOWN}=0s")
    assert table.returncode == 0, table.stderr
    assert [line.split()[0] for line in table.stdout.splitlines()] == ["job", key, "local.other"]
    unknown = whatif(kafka, "--job", "nosuchjob", "-D", f"{COOLDOWN}=0s")
    assert unknown.returncode == 2
    assert unknown.stderr.count("\n") == 1 and key in unknown.stderr, unknown.stderr
    nothing = whatif(kafka, "--job", JID)
    assert nothing.returncode == 2 and "-D key=value" in nothing.stderr, nothing.stderr


def own(configuration: tuple[tuple[str, str], ...]) -> list[tuple[str, str]]:
    return [(k, v) for k, v in configuration if k != COOLDOWN]


def test_tail_writes_the_log_replay_reads_and_ends_at_the_topics_end(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    example = Path("examples/failover.jsonl")
    events = read_log(example, codec)
    timer = TimerFired("payments", events[2].timestamp)  # the scheduler's own tick
    produce(
        kafka,
        kafka.topics.job_events,
        (
            (e.job_id.encode(), codec.encode(*to_record(e)))
            for e in [*events[:2], timer, *events[2:]]
        ),
    )
    env = cli_env(kafka)
    tail = [*SCALEFOLD, "tail", "job-events", "--job", "payments", "--format", "log", "--to-end"]
    written = subprocess.run(
        tail, check=False, capture_output=True, text=True, env=env, timeout=120
    )
    assert written.returncode == 0, written.stderr
    log = tmp_path / "payments.jsonl"
    log.write_text(written.stdout)
    assert written.stdout.count("# TimerFired payments") == 1, written.stdout

    def replayed(path: Path) -> str:
        run = subprocess.run(
            [*SCALEFOLD, "replay", str(path)],
            check=False,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr
        return run.stdout

    assert replayed(log) == replayed(example)
    wrong = subprocess.run(
        [*SCALEFOLD, "tail", "rescales", "--format", "log", "--to-end"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert wrong.returncode == 2 and "job-events" in wrong.stderr, wrong.stderr


def test_a_forecast_reads_its_jobs_partition_as_the_scheduler_folds_it(
    kafka: Settings, codec: Codec
) -> None:
    """The history's question before it sends a decision (scheduler/foresight.py) reads
    the partition of `job-events` Kafka's partitioner gives the job's key, where the
    scheduler folds it, not the whole topic: an input of the job on another partition,
    which the scheduler dead-letters (`PartitionMismatch`), is not in its forecast."""
    from confluent_kafka import Producer

    from services.contracts.kafka import partition_for, producer_config
    from services.contracts.topics import JOB_EVENTS
    from services.scheduler.foresight import forecast, foresee

    seen = first_poll()
    key = f"local.{JID}"
    produce(
        kafka,
        kafka.topics.job_events,
        ((key.encode(), codec.encode(*to_record(e))) for e in seen.events),
    )
    slots = TaskManagerRegistered(key, NOW + 5_000, "tm-stray", 16, None)
    stray = (partition_for(key.encode(), JOB_EVENTS.partitions) + 1) % JOB_EVENTS.partitions
    producer = Producer(producer_config(kafka))
    producer.produce(
        kafka.topics.job_events, codec.encode(*to_record(slots)), key.encode(), partition=stray
    )
    assert producer.flush(30) == 0
    submitted = next(e for e in seen.events if isinstance(e, JobSubmitted))
    targets = {vertex.id: 6 for vertex in submitted.vertices}  # more slots than it has
    now = NOW + 60_000

    found = forecast(kafka, key, targets, now)
    assert found == foresee(key, seen.events, targets, now)
    assert found != foresee(key, [*seen.events, slots], targets, now)  # the stray would count
