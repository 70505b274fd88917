"""The CLI as a user meets it: closed pipes, cwd-relative paths, no broker, Ctrl-C, pacing."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from services.contracts import Codec, Settings
from services.contracts.access import EXIT_UNREACHABLE
from tests.integration.scheduler_support import (
    EXAMPLES,
    ROOT,
    ActuatorProcess,
    SchedulerProcess,
    consume_records,
    example_events,
    free_port,
    latest_by_uuid,
    replayed_records,
)
from tests.patience import give_up_at

SCALEFOLD = [sys.executable, "-m", "services.cli"]
HANG_GUARD = 120  # a subprocess that has not ended by then hangs: the test fails, it is no timing


def test_a_closed_pipe_ends_the_command_quietly() -> None:
    process = subprocess.Popen(
        [*SCALEFOLD, "replay", str(EXAMPLES / "reactive-mode.jsonl"), "--format", "text"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()  # the reader is gone before the first line: every write is EPIPE
    stderr = process.stderr.read().decode()
    assert process.wait(HANG_GUARD) == 141
    assert stderr == ""


def test_a_log_path_is_relative_to_the_current_directory(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "failover.jsonl", tmp_path / "mine.jsonl")
    done = subprocess.run(
        [*SCALEFOLD, "replay", "mine.jsonl", "--format", "text", "--only", "rescales"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=HANG_GUARD,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first = done.stdout.splitlines()[0]
    assert first.lstrip().startswith("+") and "s  payments" in first  # an offset, not epoch s


@pytest.mark.parametrize(
    "command",
    [
        ["produce", "--from", str(EXAMPLES / "failover.jsonl")],
        ["tail", "--max", "1"],
        ["topics", "--create"],
    ],
    ids=["produce", "tail", "topics"],
)
def test_with_no_broker_a_command_fails_in_one_line(command: list[str]) -> None:
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    done = subprocess.run(
        [*SCALEFOLD, "--bootstrap-servers", address, *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("SCALEFOLD_")},
        timeout=HANG_GUARD,
        check=False,
    )
    lines = done.stderr.splitlines()
    assert done.returncode == EXIT_UNREACHABLE, done.stderr
    assert len(lines) == 1 and address in lines[0], done.stderr


def _interrupt(process: subprocess.Popen[bytes], log: Path) -> str:
    os.kill(process.pid, signal.SIGINT)
    try:
        code = process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError(f"still running after SIGINT:\n{log.read_text()[-3000:]}") from None
    text = log.read_text(errors="replace")
    assert code == 0, text[-3000:]
    assert "Traceback" not in text, text[-3000:]
    return text


@pytest.mark.parametrize("service", [SchedulerProcess, ActuatorProcess], ids=lambda s: s.service)
def test_ctrl_c_stops_a_service_cleanly(
    service: type[SchedulerProcess], kafka: Settings, tmp_path: Path
) -> None:
    running = service(kafka, tmp_path).start()
    running.wait_ready()
    assert running.process is not None
    _interrupt(running.process, running.log)


def test_ctrl_c_stops_the_history_service_cleanly(kafka: Settings, tmp_path: Path) -> None:
    log = tmp_path / "history.log"
    env = {
        **os.environ,
        "SCALEFOLD_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "SCALEFOLD_TOPIC_PREFIX": kafka.topic_prefix,
    }
    with log.open("ab") as out:
        process = subprocess.Popen(
            [*SCALEFOLD, "history", "run", "--data-dir", str(tmp_path / "history")],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
        )
    deadline = give_up_at(240)
    while "streaming query started" not in log.read_text(errors="replace"):
        assert process.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
        time.sleep(0.5)
    text = _interrupt(process, log)
    assert "reentrant call" not in text and "Py4J" not in text


def test_paced_produce_of_every_example_gives_the_rescales_of_replay(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    """`produce --from LOG --now --speed` of each file in examples/ to a live scheduler
    folds as `replay` of that file does.

    Timers due after a log's last event fire on the wall clock, so a live run lasts its
    log's span whatever the speed (reactive-mode's 320 s is the longest): the examples'
    job ids are distinct, so every file is produced at once to one scheduler.
    """
    names = sorted(p.name for p in EXAMPLES.glob("*.jsonl"))
    expected: dict[str, dict[str, dict[str, object]]] = {}
    for name in names:
        for job, records in replayed_records(example_events(codec, name)).items():
            assert job not in expected, f"{job} is in two examples: give it its own id"
            expected[job] = latest_by_uuid(records)
    assert "reactive" in expected and "clicks" in expected

    def shape(records: dict[str, dict[str, object]]) -> list[tuple[object, ...]]:
        # repr: a job may have two rescales of one attempt id (None beside a reason)
        return sorted(
            (
                (
                    r["rescaleAttemptId"],
                    r["triggerCause"],
                    r["terminalState"],
                    r["terminatedReason"],
                )
                for r in records.values()
            ),
            key=repr,
        )

    def per_job(records: list[dict[str, object]]) -> dict[str, list[tuple[object, ...]]]:
        return {
            job: shape(latest_by_uuid(r for r in records if r["jobId"] == job)) for job in expected
        }

    wanted = {job: shape(records) for job, records in expected.items()}
    scheduler = SchedulerProcess(kafka, tmp_path).start()
    try:
        scheduler.wait_ready()
        env = {
            **os.environ,
            "SCALEFOLD_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
            "SCALEFOLD_TOPIC_PREFIX": kafka.topic_prefix,
        }
        producers = [
            subprocess.Popen(
                [*SCALEFOLD, "produce", "--from", str(EXAMPLES / name), "--now", "--speed", "20"],
                env=env,
                cwd=ROOT,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name in names
        ]
        for name, producer in zip(names, producers, strict=True):
            _, stderr = producer.communicate(timeout=HANG_GUARD)
            assert producer.returncode == 0, f"{name}: {stderr}"
        # a hang guard, not a timing: the longest span (320 s) plus a loaded machine's slack
        live = per_job(consume_records(codec, kafka, lambda got: per_job(got) == wanted, 900))
    finally:
        scheduler.stop()
    assert live == wanted
