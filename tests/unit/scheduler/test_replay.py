"""`scalefold replay`: the log format, determinism, what-if comparison; state storage."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path

import pytest

from services.contracts import Codec
from services.contracts.eventlog import LogError, read_log
from services.contracts.events import JobSubmitted, TaskManagerRegistered, VertexSpec
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import Rejected, RejectionKind, RescaleUpdated
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
    assert "-   45.000s clicks Executing -> Restarting" in out
    assert "+   38.000s clicks Executing -> Restarting" in out


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
    job = run_.jobs["j"]
    assert job is not None and loads(dumps(job)) == job
    with pytest.raises(StateFormatError, match="format 99"):
        loads(json.dumps([99, []]).encode())
    with pytest.raises(StateFormatError, match="not a stored job state"):
        loads(b"\x00garbage")
