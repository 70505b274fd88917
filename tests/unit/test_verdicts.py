"""`scalefold produce`'s verdicts: matched by partition and offset, a dead letter wins."""

from __future__ import annotations

import socket
from pathlib import Path

from services.contracts import Codec, SchemaRegistry
from services.contracts.eventlog import read_log
from services.contracts.settings import Settings
from services.tools.stackcheck import addresses, look, not_running
from services.tools.verdicts import (
    Observed,
    Sent,
    did,
    event_lines,
    judge,
    nothing_done,
    outcome,
    summary,
)

TOPIC = "scalefold.job-events"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _sent(job: str, partition: int, offset: int, line: int) -> Sent:
    return Sent(f"log.jsonl:{line}", "TaskManagerRegistered", job, partition, offset)


def _decided(job: str, offset: int, *kinds: str) -> dict[str, object]:
    items = [
        {"kind": kind, "message": f"{kind.lower()}: why"} for kind in kinds or ("STATE_TRANSITION",)
    ]
    return {"jobId": job, "sourceOffset": offset, "items": items}


def _dead(
    partition: int, offset: int, service: str = "scheduler", topic: str = TOPIC
) -> dict[str, object]:
    return {
        "sourceTopic": topic,
        "sourcePartition": partition,
        "sourceOffset": offset,
        "service": service,
        "errorClass": "UnknownJob",
        "errorMessage": "no job j2 has been submitted",
    }


def test_an_event_is_folded_by_its_decisions_and_rejected_by_its_dead_letter() -> None:
    sent = [_sent("j1", 3, 10, 2), _sent("j2", 0, 10, 3), _sent("j1", 3, 11, 4)]
    seen = Observed(TOPIC, frozenset({"j1", "j2"}))
    seen.decisions(_decided("j1", 10))
    seen.decisions(_decided("j2", 11))  # another event of j2: not ours
    seen.dead_letter(_dead(0, 10))
    seen.dead_letter(_dead(3, 11, service="actuator"))  # only the scheduler's verdict counts
    seen.dead_letter(_dead(3, 11, topic="other.job-events"))
    judged = judge(sent, seen)
    assert judged.folded == [sent[0]]
    assert [(r.sent, r.error_class) for r in judged.rejected] == [(sent[1], "UnknownJob")]
    assert judged.open == [sent[2]]
    lines = summary(judged, 5)
    assert lines[0] == "the scheduler folded 1 event(s) and rejected 1:"
    assert lines[1] == (
        "  log.jsonl:3: TaskManagerRegistered of job j2 rejected (UnknownJob): "
        "no job j2 has been submitted"
    )
    assert lines[2].startswith("no verdict on 1 event(s) within 5 s (the first: log.jsonl:4")


def test_a_dead_letter_wins_over_a_decision_of_the_same_fold() -> None:
    sent = [_sent("j2", 0, 7, 1)]
    seen = Observed(TOPIC, frozenset({"j2"}))
    seen.decisions(_decided("j2", 7))
    seen.dead_letter(_dead(0, 7))
    judged = judge(sent, seen)
    assert (judged.folded, len(judged.rejected), judged.open) == ([], 1, [])


def test_event_lines_are_the_lines_read_log_reads() -> None:
    path = EXAMPLES / "failover.jsonl"
    codec = Codec(SchemaRegistry.load(Settings(bootstrap_servers="x").schemas_dir))
    lines = event_lines(path.read_text("utf-8"))
    assert len(lines) == len(read_log(path, codec))
    assert all('"type"' in path.read_text().split("\n")[n - 1] for n in lines)
    assert event_lines("# a comment\n\n{}\n  # indented\n{}") == [3, 5]


def test_a_port_nobody_listens_on_is_refused_and_one_that_listens_is_not() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        assert look(f"127.0.0.1:{port}") == "listening"
        assert look(f"127.0.0.1:1,127.0.0.1:{port}") == "listening"
    assert look("127.0.0.1:1") == "refused"
    assert addresses("[::1]:9092, h:1") == [("::1", 9092), ("h", 1)]
    assert "`make up` starts it" in not_running("127.0.0.1:9092", local=True)
    # no stack ever wrote its address: the default is not where a stack would be
    assert "9092" not in not_running("127.0.0.1:9092", local=True)
    assert "127.0.0.1:20046" in not_running("127.0.0.1:20046", local=True)  # where it ran
    assert "SCALEFOLD_BOOTSTRAP_SERVERS" in not_running("h:1", local=False)


def test_a_folded_event_the_scheduler_ignored_is_named_with_why() -> None:
    sent = [_sent("j1", 3, 10, 2), _sent("j1", 3, 11, 3)]
    seen = Observed(TOPIC, frozenset({"j1"}))
    seen.decisions(_decided("j1", 10, "CLOCK_CLAMPED", "EVENT_IGNORED"))
    seen.decisions(_decided("j1", 11))
    judged = judge(sent, seen)
    assert judged.folded == sent and judged.ignored == [(sent[0], "event_ignored: why")]
    assert summary(judged, 5) == [
        "the scheduler folded 2 event(s)",
        "it ignored 1 of the folded event(s):",
        "  log.jsonl:2: TaskManagerRegistered of job j1: event_ignored: why",
    ]


def test_a_cluster_request_is_one_line_and_a_rejection_exits_1() -> None:
    reply = {
        "events": [{"type": "TaskManagerRegistered", "taskManager": f"j1-tm-{n}"} for n in (1, 2)]
    }
    done = did("add-taskmanagers", "j1", reply)
    assert done == "job j1: 2 TaskManager(s) started (j1-tm-1, j1-tm-2)"
    sent = [_sent("j1", 3, 10, 0), _sent("j1", 3, 11, 0)]
    seen = Observed(TOPIC, frozenset({"j1"}))
    seen.decisions(_decided("j1", 10))
    assert outcome(done, 2, judge(sent, seen), 5) == (
        f"{done}; no verdict from the scheduler on 1 of 2 event(s) within 5 s: "
        "is the scheduler running? `make status` shows it",
        0,
    )
    seen.dead_letter(_dead(3, 11))
    line, status = outcome(done, 2, judge(sent, seen), 5)
    assert status == 1
    assert (
        line
        == f"{done}, but the scheduler rejected its TaskManagerRegistered (UnknownJob): no job j2 has been submitted"
    )
    assert outcome(done, 3, judge(sent[:1], seen), 5)[0].endswith(
        "on 2 of 3 event(s) within 5 s: is the scheduler running? `make status` shows it"
    )  # one not even produced


def test_a_cluster_request_with_nothing_to_do_is_said_so() -> None:
    assert did("kill-taskmanager", "j1", {"events": []}) is None
    assert nothing_done("kill-taskmanager", "j1", "tm-9").startswith(
        "job j1 has no TaskManager tm-9"
    )
    assert did("fail-checkpoints", "j1", {"events": [], "failingCheckpoints": 3}) == (
        "job j1: the actuator fails its next 3 checkpoint(s)"
    )
