"""`scalefold replay`: the log format, determinism, what-if comparison; state storage."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from bench.core_bench import job_events
from services.contracts import Codec
from services.contracts.eventlog import LogError, read_log
from services.contracts.events import JobSubmitted, TaskManagerRegistered, VertexSpec
from services.scheduler.core import handle
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import Rejected, RescaleUpdated
from services.scheduler.core.enums import RejectionKind
from services.scheduler.core.model import Timer
from services.scheduler.core.serde import StateFormatError, dumps, loads
from services.scheduler.replay import run_command

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "tm-join-one-by-one.jsonl"


def run(codec: Codec, *argv: str, log: Path = EXAMPLE) -> tuple[int, str]:
    args = argparse.Namespace(
        log=str(log),
        define=None,
        format="json",
        only=None,
        job=None,
        summary=False,
        until=None,
        no_drain=False,
        compare=None,
    )
    i = 0
    while i < len(argv):
        flag = argv[i]
        if flag == "-D":
            args.define = [*(args.define or []), argv[i + 1]]
            i += 2
        elif flag == "--compare":
            args.compare = list(argv[i + 1 :])
            break
        elif flag in ("--format", "--only", "--job", "--until"):
            setattr(args, flag[2:], int(argv[i + 1]) if flag == "--until" else argv[i + 1])
            i += 2
        else:
            setattr(args, flag[2:].replace("-", "_"), True)
            i += 1
    out = io.StringIO()
    return run_command(args, codec, out), out.getvalue()


def test_every_example_replays_byte_for_byte_the_same(codec: Codec) -> None:
    for example in sorted((ROOT / "examples").glob("*.jsonl")):
        first, second = run(codec, log=example), run(codec, log=example)
        assert first == second and first[0] == 0, example.name
        assert first[1].count("\n") > 5


def test_json_output_is_one_effect_per_line(codec: Codec) -> None:
    _, out = run(codec)
    lines = [json.loads(line) for line in out.splitlines()]
    assert {line["effect"] for line in lines} == {"decision", "request", "rescale"}
    assert [line["seq"] for line in lines] == list(range(1, len(lines) + 1))


def test_text_summary_and_filters(codec: Codec) -> None:
    _, text = run(codec, "--format", "text", "--only", "transitions")
    assert "WaitingForResources -> CreatingExecutionGraph" in text
    assert "RESCALE_TRIGGERED" not in text
    _, summary = run(codec, "--summary")
    assert "job clicks: Executing, running source=4, enrich=4" in summary
    assert "2 completed" in summary


def test_compare_shows_what_a_shorter_cooldown_changes(codec: Codec) -> None:
    code, out = run(
        codec,
        "--compare",
        "--",
        "-D",
        "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling=0s",
    )
    assert code == 0
    assert "-  +45.000s clicks Executing -> Restarting" in out
    assert "+  +38.000s clicks Executing -> Restarting" in out


def test_until_and_no_drain_stop_the_timers(codec: Codec, tmp_path: Path) -> None:
    log = tmp_path / "wait.jsonl"
    log.write_text(
        '{"type": "JobSubmitted", "event": {"jobId": "j", "timestamp": 0, "vertices": '
        '[{"id": "v", "name": "V", "slotSharingGroupId": "g", "parallelism": 2}]}}\n'
    )
    _, drained = run(codec, "--only", "transitions", log=log)
    assert "CreatingExecutionGraph" in drained  # the 5 min resource timeout fired at the end
    _, stopped = run(codec, "--only", "transitions", "--until", "1000", log=log)
    assert "CreatingExecutionGraph" not in stopped
    _, undrained = run(codec, "--only", "transitions", "--no-drain", log=log)
    assert "CreatingExecutionGraph" not in undrained


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", "wait.jsonl:2"),
        ('{"type": "Teleported", "event": {}}', "types are"),
        ('{"event": {}}', "missing or unknown"),
        (
            '{"type": "JobLifecycleEvent", "event": {"jobId": "j", "timestamp": 1, '
            '"kind": "CANCEL", "checkpointId": 5}}',
            "wrapped",
        ),
    ],
)
def test_bad_log_lines_name_file_and_line(
    codec: Codec, tmp_path: Path, line: str, message: str
) -> None:
    log = tmp_path / "wait.jsonl"
    log.write_text("# a comment\n" + line + "\n")
    with pytest.raises(LogError, match=message):
        read_log(log, codec)
    code, _ = run(codec, log=log)
    assert code == 2


def test_invalid_defines_are_an_error_before_replaying(codec: Codec) -> None:
    assert (
        run(codec, "-D", "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling=soon")[0]
        == 2
    )
    assert run(codec, "-D", "no-equals-sign")[0] == 2


def test_timers_of_every_job_fire_as_the_log_time_advances() -> None:
    vertices = (VertexSpec("v", "V", "g", "g", 4, None),)
    events = [
        JobSubmitted("a", 0, "a", vertices, None, ()),
        TaskManagerRegistered("a", 1_000, "tm-a", 1, None),  # stabilizes until 11 s
        JobSubmitted("b", 0, "b", vertices, None, ()),
        TaskManagerRegistered("b", 20_000, "tm-b", 4, None),
    ]
    _, effects = replay(events, drain=False)
    job_a_running = [
        e
        for e in effects
        if e.job_id == "a" and isinstance(e, RescaleUpdated) and e.record["terminalState"]
    ]
    assert job_a_running and job_a_running[0].at == 11_000
    assert effects.index(job_a_running[0]) < max(
        i for i, e in enumerate(effects) if e.job_id == "b"
    )


def test_events_for_an_unknown_job_are_rejected() -> None:
    _, effects = replay([TaskManagerRegistered("ghost", 0, "tm", 1, None)])
    (rejected,) = effects
    assert isinstance(rejected, Rejected) and rejected.kind is RejectionKind.UNKNOWN_JOB


def test_stored_state_is_versioned() -> None:
    run_, _ = replay(
        [JobSubmitted("j", 0, "j", (VertexSpec("v", "V", "g", "g", 1, None),), None, ())]
    )
    assert run_.jobs["j"] is None  # drained: it failed waiting for resources, then released
    job = run_.released["j"]
    assert loads(dumps(job)) == job
    with pytest.raises(StateFormatError, match="format 99"):
        loads(json.dumps([99, []]).encode())
    with pytest.raises(StateFormatError, match="not a stored job state"):
        loads(b"\x00garbage")


def test_a_stored_state_is_read_without_the_timers_of_states_it_has_left() -> None:
    """Schedulers before 2026-11-27 stored such timers until due; they never run."""
    job = None
    for event in job_events("job-3", 40, 3):
        job = handle(job, event).job
    assert job is not None and job.timers
    left = Timer(job.now + 1, job.timer_seq + 1, "waiting.resource-timeout", job.state.epoch - 1)
    stored = replace(job, timers=tuple(sorted((*job.timers, left))))
    assert loads(dumps(stored)) == job


def test_a_state_stored_by_the_previous_format_reads_as_this_one_would_have_it() -> None:
    """States of format 3 (tests/unit/scheduler/data, written by the scheduler before
    format 4 along the core bench's event mix, a rescale in progress or terminated):
    each reads as the state this scheduler reaches after the same events."""
    stored = json.loads((Path(__file__).parent / "data" / "states-format-3.json").read_text())
    job = None
    states = {}
    for count, event in enumerate(job_events("job-7", 120, 7), start=1):
        job = handle(job, event).job
        states[count] = job
    for entry in stored:
        data = entry["state"].encode()
        assert data.startswith(b"[3,")
        assert loads(data) == states[entry["after_events"]], entry["after_events"]
    with pytest.raises(StateFormatError, match="not a stored job state of format 3"):
        loads(b'[3, ["j", "j", 0]]')


@pytest.mark.flink(
    "ExecutingTest.testTransitionToFinishedOnFailedExecutionGraph",
    "ExecutingTest.testActiveCheckpointTriggerRespectsMinPauseBetweenCheckpoints",
    "ExecutingTest.testActiveCheckpointTriggerSkipsWhenParallelismUnchanged",
    "AdaptiveSchedulerComputeReactiveModeVertexParallelismTest.testCreateStoreWithAdjustedParallelism",
)
def test_the_fidelity_example_prints_what_flink_does(codec: Codec) -> None:
    """examples/flink-fidelity.jsonl: issue 12's behaviours, as `scalefold replay` prints them."""
    log = ROOT / "examples" / "flink-fidelity.jsonl"
    code, text = run(codec, "--format", "text", log=log)
    assert code == 0
    lines = text.splitlines()

    def line(job: str, *words: str) -> str:
        found = [x for x in lines if f" {job} " in x and all(w in x for w in words)]
        assert found, (job, words)
        return found[0]

    # 1. maxParallelism -1 is "not set": 171 -> 256 in reactive mode; 0 is refused.
    assert "desired_slots=256" in line("keyed", "DECLARE_RESOURCES")
    assert "max parallelism 0 is not within 1..32768" in line("badmax", "InvalidEvent")
    # 2. the active checkpoint waits for the min pause; 4. one at a time, dropped if useless.
    assert line("orders", "ACTIVE_CHECKPOINT", "deferred").startswith("  +31.000s")
    assert line("orders", "TRIGGER_CHECKPOINT").startswith("  +50.000s")
    assert "already scheduled" in line("orders", " +40.000s", "ACTIVE_CHECKPOINT")
    assert "a triggered checkpoint is pending" in line("orders", " +51.000s", "ACTIVE_CHECKPOINT")
    assert "no longer changes" in line("drops", " +50.000s", "ACTIVE_CHECKPOINT")
    assert not [x for x in lines if " drops " in x and "TRIGGER_CHECKPOINT" in x]
    # 3. the graph failing by itself: Finished FAILED, no restart; 6. the end, typed.
    assert "Executing -> Finished" in line("graph", "Finished [FAILED]")
    assert not [x for x in lines if " graph " in x and "RESTART_DECIDED" in x]
    assert "Canceling -> Finished" in line("orders", "Finished [CANCELED]")
    _, summary = run(codec, "--summary", log=log)
    assert "job graph: Finished FAILED" in summary and "job orders: Finished CANCELED" in summary
    # 7. natural order of ids.
    assert "slots=tm-2#0 tm-9#0 tm-10#0" in line("ordered", "CREATE_EXECUTION_GRAPH")
    # 5. spans and exceptions, in the records.
    _, out = run(codec, "--only", "rescales", log=log)
    final: dict[str, dict[str, Any]] = {}
    for entry in map(json.loads, out.splitlines()):
        final[entry["record"]["rescaleUuid"]] = entry["record"]
    ended = {
        (rec["jobId"], rec["triggerCause"], rec["terminatedReason"]): [
            (s["state"], s["stringifiedException"]) for s in rec["schedulerStates"]
        ]
        for rec in final.values()
        if rec["terminalState"]
    }
    assert ended[("drops", "UPDATE_REQUIREMENT", "NO_RESOURCES_OR_PARALLELISMS_CHANGE")] == []
    assert all(e is None for _, e in ended[("orders", "RECOVERABLE_FAILOVER", "SUCCEEDED")])
    assert ended[("graph", "NEW_RESOURCE_AVAILABLE", "JOB_FINISHED")] == [("Executing", None)]
    assert ended[("fatal", "NEW_RESOURCE_AVAILABLE", "JOB_FAILED")] == [
        (
            "Executing",
            "org.apache.flink.runtime.JobException: The failure is not recoverable\n"
            "Caused by: java.lang.OutOfMemoryError: Metaspace",
        )
    ]
