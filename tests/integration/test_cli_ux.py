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
from services.localstack.ports import free_port
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import Rejected
from tests.integration.scheduler_support import (
    EXAMPLES,
    ROOT,
    ActuatorProcess,
    SchedulerProcess,
    consume_records,
    example_events,
    latest_by_uuid,
    replayed_records,
)
from tests.kafka_support import cli_env
from tests.patience import give_up_at, patient

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
    """Within 2 s (issue 41), saying the stack is not running and what to run."""
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    started = time.monotonic()
    done = subprocess.run(
        [*SCALEFOLD, "--bootstrap-servers", address, *command],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={k: v for k, v in os.environ.items() if not k.startswith("SCALEFOLD_")},
        timeout=HANG_GUARD,
        check=False,
    )
    took = time.monotonic() - started
    lines = done.stderr.splitlines()
    assert done.returncode == EXIT_UNREACHABLE, done.stderr
    assert len(lines) == 1 and address in lines[0], done.stderr
    assert "the stack is not running" in lines[0] and "`make up`" in lines[0], lines[0]
    assert took - _startup() <= patient(2.0), f"{took:.1f} s"


def _startup() -> float:
    """How long the CLI takes to start and answer without a broker here, now: on a
    loaded machine that alone can take seconds, which the 2 s are not about."""
    started = time.monotonic()
    assert _scalefold("topics").returncode == 0
    return time.monotonic() - started


@pytest.mark.parametrize(
    ("verb", "where", "next_step"),
    [
        (("jobs",), "run-dir", "`scalefold local up --flink --run-dir "),
        (("submit",), "rest", "check --rest URL"),
        (("requirements", "--job", "j1", "Bucket=1:2"), "rest", "check --rest URL"),
        (("taskmanager", "add"), "run-dir", "`scalefold local up --flink --run-dir "),
    ],
)
def test_with_no_flink_a_flink_verb_fails_in_one_line_naming_what_to_start(
    verb: tuple[str, ...], where: str, next_step: str, tmp_path: Path
) -> None:
    """No Flink there: one line with the next step and exit 69, as with no broker (issue 48);
    `submit` says so before it builds the sample job."""
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    place = ("--run-dir", str(tmp_path)) if where == "run-dir" else ("--rest", url)
    done = _scalefold("flink", *verb, *place)
    lines = done.stderr.splitlines()
    assert done.returncode == EXIT_UNREACHABLE, done.stderr
    assert len(lines) == 1 and next_step in lines[0], done.stderr
    assert (str(tmp_path) if where == "run-dir" else url) in lines[0], lines[0]


def test_with_no_actuator_a_cluster_command_fails_in_one_line() -> None:
    port = str(free_port())  # nothing listens there
    started = time.monotonic()
    done = _scalefold("cluster", "--port", port, "add-taskmanagers", "--job", "j1")
    took = time.monotonic() - started
    lines = done.stderr.splitlines()
    assert done.returncode == EXIT_UNREACHABLE, done.stderr
    assert len(lines) == 1 and f"127.0.0.1:{port}" in lines[0], done.stderr
    assert "the stack is not running" in lines[0] and "`make up`" in lines[0], lines[0]
    assert took - _startup() <= patient(2.0), f"{took:.1f} s"


@pytest.mark.parametrize(
    ("command", "usage", "extra"),
    [
        (["tail", "rescales", "--timeout", "5"], "scalefold tail", "--timeout 5"),
        (["cluster", "add-taskmanagers", "--job", "j1", "--bogus"], "scalefold cluster add-taskmanagers", "--bogus"),
        (["local", "status", "--nope"], "scalefold local status", "--nope"),
        (["--log-level", "INFO", "replay", "x.jsonl", "--fast"], "scalefold replay", "--fast"),
    ],
    ids=["tail", "cluster-verb", "local-verb", "after-a-global-option"],
)  # fmt: skip
def test_a_subcommand_mistake_gets_the_subcommands_usage(
    command: list[str], usage: str, extra: str
) -> None:
    done = _scalefold(*command)
    lines = done.stderr.splitlines()
    assert done.returncode == 2, done.stderr
    assert lines[0].startswith(f"usage: {usage} "), done.stderr
    errors = [line for line in lines if "error:" in line]
    assert errors == [f"{usage}: error: unrecognized arguments: {extra}"], done.stderr


def _scalefold(*args: str, settings: Settings | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI, as a user runs it (against `settings`' broker, if given)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCALEFOLD_")}
    if settings is not None:
        env["SCALEFOLD_BOOTSTRAP_SERVERS"] = settings.bootstrap_servers
        env["SCALEFOLD_TOPIC_PREFIX"] = settings.topic_prefix
    return subprocess.run(
        [*SCALEFOLD, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=HANG_GUARD,
        check=False,
    )


VERTICES = '[{"id": "source", "name": "Source", "slotSharingGroupId": "default", "parallelism": 4}]'


def _submit(kafka: Settings, job: str) -> subprocess.CompletedProcess[str]:
    # --wait is a hang guard here: produce returns as soon as the verdict is in
    return _scalefold(
        *("produce", "job-submitted", "--job-id", job, "--vertices", VERTICES, "--wait", "60"),
        settings=kafka,
    )


def test_produce_reports_each_rejected_event_with_its_line(kafka: Settings, tmp_path: Path) -> None:
    """Issue 41: the README's job `clicks` exists; the example log submits it again."""
    log = EXAMPLES / "tm-join-one-by-one.jsonl"
    scheduler = SchedulerProcess(kafka, tmp_path).start()
    try:
        scheduler.wait_ready()
        first = _submit(kafka, "clicks")
        assert first.returncode == 0, first.stderr
        assert "the scheduler folded 1 event(s)" in first.stderr.splitlines(), first.stderr
        done = _scalefold("produce", "--from", str(log), "--wait", "60", settings=kafka)
    finally:
        scheduler.stop()
    submitted = next(
        n for n, line in enumerate(log.read_text().split("\n"), 1) if '"JobSubmitted"' in line
    )
    rejected = [line for line in done.stderr.splitlines() if "rejected (" in line]
    assert done.returncode == 1, done.stderr
    assert rejected == [
        f"  {log}:{submitted}: JobSubmitted of job clicks rejected (InvalidEvent): "
        "the job was already submitted"
    ], done.stderr
    assert "the scheduler folded 4 event(s) and rejected 1:" in done.stderr, done.stderr


def test_produce_with_no_scheduler_says_no_verdict_came(kafka: Settings) -> None:
    done = _scalefold("produce", "--from", str(EXAMPLES / "failover.jsonl"), "--wait", "1", settings=kafka)  # fmt: skip
    lines = done.stderr.splitlines()
    assert done.returncode == 0, done.stderr  # delivered; nobody has judged them yet
    assert lines[-1].startswith("no verdict on 9 event(s) within 1 s"), done.stderr
    assert "is the scheduler running?" in lines[-1]


def test_a_cluster_command_reports_the_schedulers_verdict_in_one_line(
    kafka: Settings, tmp_path: Path
) -> None:
    """Issue 41: an unknown job is refused at once; otherwise the command waits for the
    scheduler's verdict on the events it caused, and a rejection exits 1."""
    scheduler = SchedulerProcess(kafka, tmp_path / "scheduler").start()
    actuator = ActuatorProcess(kafka, tmp_path / "actuator").start()
    try:
        scheduler.wait_ready()
        actuator.wait_ready()
        assert _submit(kafka, "known").returncode == 0
        cluster = ("cluster", "--port", str(actuator.port))
        unknown = _scalefold(*cluster, "add-taskmanagers", "--job", "no-such-job", "--count", "1", "--slots", "1")  # fmt: skip
        # --wait is a hang guard here: the command returns as soon as the verdict is in
        added = _scalefold(*cluster, "add-taskmanagers", "--job", "known", "--count", "2", "--wait", "60", settings=kafka)  # fmt: skip
        slotless = _scalefold(*cluster, "add-taskmanagers", "--job", "known", "--slots", "0", "--wait", "60", settings=kafka)  # fmt: skip
        nothing = _scalefold(*cluster, "kill-taskmanager", "--job", "known", "--tm", "tm-9", settings=kafka)  # fmt: skip
    finally:
        actuator.stop()
        scheduler.stop()
    assert unknown.returncode == 1, unknown.stderr
    assert unknown.stdout == ""
    assert unknown.stderr.splitlines() == [
        "scalefold cluster: no job no-such-job on the cluster (the scheduler has not "
        "accepted it); `scalefold cluster state` lists the jobs"
    ]
    assert added.returncode == 0, added.stderr
    assert added.stdout.splitlines() == [
        "job known: 2 TaskManager(s) started (known-tm-1, known-tm-2); "
        "the scheduler folded 2 of 2 event(s)"
    ], added.stderr
    assert slotless.returncode == 1, slotless.stderr
    assert slotless.stdout == ""
    assert slotless.stderr.splitlines()[-1] == (
        "scalefold cluster: job known: 1 TaskManager(s) started (known-tm-3), but the "
        "scheduler rejected its TaskManagerRegistered (InvalidEvent): "
        "TaskManager known-tm-3 offers 0 slots"
    ), slotless.stderr
    assert nothing.returncode == 1, nothing.stderr
    assert nothing.stderr.splitlines() == [
        "scalefold cluster: job known has no TaskManager tm-9 on the cluster to kill; "
        "`scalefold cluster state --job known`"
    ], nothing.stderr


def _interrupt(process: subprocess.Popen[bytes], log: Path) -> str:
    os.kill(process.pid, signal.SIGINT)
    try:  # the history waits up to 60 s for its batches to end, then Spark stops
        code = process.wait(patient(90))
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
    env = cli_env(kafka)
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
    rejections = {
        name: sorted(
            f"{e.job_id} rejected ({e.kind!s}): {e.message}"
            for e in replay(example_events(codec, name))[1]
            if isinstance(e, Rejected)
        )
        for name in names
    }
    assert any(rejections.values())  # flink-fidelity's invalid submissions
    scheduler = SchedulerProcess(kafka, tmp_path).start()
    try:
        scheduler.wait_ready()
        env = cli_env(kafka)
        producers = [
            subprocess.Popen(
                # --wait: a hang guard; produce returns once every verdict is in
                [
                    *SCALEFOLD,
                    "produce",
                    "--from",
                    str(EXAMPLES / name),
                    "--now",
                    "--speed",
                    "20",
                    "--wait",
                    "60",
                ],
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
            # the events replay rejects (flink-fidelity's invalid jobs), each named, status 1
            reported = sorted(line.split(" of job ", 1)[1] for line in stderr.splitlines() if " rejected (" in line)  # fmt: skip
            assert reported == rejections[name], stderr
            assert producer.returncode == (1 if rejections[name] else 0), f"{name}: {stderr}"
        # a hang guard, not a timing: the longest span (320 s) plus a loaded machine's slack
        live = per_job(consume_records(codec, kafka, lambda got: per_job(got) == wanted, 900))
    finally:
        scheduler.stop()
    assert live == wanted
