"""One poll folded into records and events (services/bridge/step.py), on captured answers,
and the events fed to the scheduler core: it takes them, and predicts the job."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from services.bridge import rescales as rs
from services.bridge import step
from services.bridge import translate as tr
from services.bridge.offsets import JobOffset, from_record, to_record
from services.bridge.poll import Instant, Presence
from services.contracts import Codec
from services.contracts import jobconfig as k
from services.contracts import records as r
from services.contracts.events import (
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    TimerFired,
    Window,
)
from services.contracts.events import (
    to_record as event_record,
)
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import Rejected, RescaleUpdated
from tests.unit.bridge.test_translate import answer

JID = "cc408c8079b82a80a401c5ac85881e95"
FIRST, SECOND = "afc103edd691c5267ae684fefa3ae972", "f92913c3d29ca43b741b9115e1b16e4a"
NOW = 1795935506540
NO_CLOCK = 10**12
"""A cache refresh interval so long that no poll moves the job's clock: the tests of what
a poll sends but TimerFired (test_the_jobs_clock_moves_with_what_the_polls_have_seen)."""


def answers(**changes: Any) -> step.Answers:
    history = rs.summaries(answer("rescales-history.json"))
    full = step.Answers(
        job=answer("job.json"),
        task_managers=tr.task_managers(answer("taskmanagers.json")),
        requirements=answer("resource-requirements.json"),
        rescales_config=answer("rescales-config.json"),
        job_config=answer("job-config.json"),
        checkpoints_config=None,
        checkpointing_known=True,
        exceptions=answer("exceptions.json"),
        history=history,
        details={u: answer(f"rescales-details-{u}.json") for u in (FIRST, SECOND)},
        refresh_ms=NO_CLOCK,
    )
    return replace(full, **changes)


def first_poll() -> step.Observed:
    return step.observe(JobOffset("local", JID), answers(), NOW)


def test_the_first_poll_sends_both_rescales_oldest_first_and_submits_the_job() -> None:
    seen = first_poll()
    assert [(x["rescaleUuid"], x["revision"]) for x in seen.rescales] == [(FIRST, 1), (SECOND, 1)]
    assert seen.rescales[0]["triggerCause"] == "INITIAL_SCHEDULE"
    assert [v["slotSharingGroupName"] for v in seen.rescales[0]["vertices"]] == ["sums", "default"]
    submitted = seen.events[0]
    assert isinstance(submitted, JobSubmitted)
    assert submitted.job_id == f"local.{JID}" and submitted.timestamp == 1795935403027
    assert {(v.ssg_name, v.parallelism, v.max_parallelism) for v in submitted.vertices} == {
        ("default", 4, 8),
        ("sums", 4, 8),
    }
    config = dict(submitted.configuration)
    assert config[k.OBSERVED_CLUSTER] == "local" and config[k.RUNTIME_MODE] == "simulated"
    assert config[k.RESTART_STRATEGY] == "fixed-delay" and config[k.COOLDOWN] == "1000 ms"
    assert [type(e) for e in seen.events[1:]] == [TaskManagerRegistered] * 3
    assert seen.offset.submitted and seen.offset.task_managers == ("tm-1", "tm-2", "tm-3")
    assert seen.problems == ()


def test_the_records_fit_their_schema(codec: Codec) -> None:
    seen = first_poll()
    for record in seen.rescales:
        assert codec.decode(codec.encode(r.FLINK_RESCALE, record)).record == record
    offset = to_record(seen.offset)
    assert (
        from_record(codec.decode(codec.encode(r.FLINK_BRIDGE_OFFSET, offset)).record) == seen.offset
    )
    for event in seen.events:
        codec.encode(*event_record(event))


def test_a_second_poll_of_the_same_answers_sends_nothing() -> None:
    seen = first_poll()
    again = step.observe(seen.offset, answers(details={}), NOW + 5000)
    assert (again.rescales, again.events) == ((), ())
    assert step.details_to_fetch(seen.offset, answers().history or []) == []


def test_an_in_progress_rescale_is_sent_again_when_it_changes() -> None:
    details = answer(f"rescales-details-{SECOND}.json")
    running = {
        **details,
        "endTimestampInMillis": None,
        "terminalState": None,
        "terminatedReason": None,
    }
    running["schedulerStates"] = details["schedulerStates"][:2]
    seen = step.observe(JobOffset("local", JID), answers(details={SECOND: running}), NOW)
    assert step.details_to_fetch(seen.offset, answers().history or []) == [FIRST, SECOND]
    same = step.observe(seen.offset, answers(details={SECOND: running}), NOW + 1)
    assert same.rescales == ()
    done = step.observe(seen.offset, answers(details={SECOND: details}), NOW + 2)
    assert [(x["revision"], x["terminalState"]) for x in done.rescales] == [(2, "COMPLETED")]


def test_a_newer_flinks_fields_and_values_are_kept() -> None:
    details = answer(f"rescales-details-{FIRST}.json")
    newer = {**details, "triggerCause": "AUTOSCALER", "rescaleReasonText": {"a": 1}}
    vertex = dict(newer["vertices"]["cbc357ccb763df2852fee8c4fc7d55f2"], newField=3)
    newer["vertices"] = {**newer["vertices"], vertex["jobVertexId"]: vertex}
    (record,) = step.observe(JobOffset("local", JID), answers(details={FIRST: newer}), NOW).rescales
    assert record["triggerCause"] == "AUTOSCALER"
    assert record["unknownFields"] == {
        "$.rescaleReasonText": '{"a":1}',
        "$.vertices.cbc357ccb763df2852fee8c4fc7d55f2.newField": "3",
    }


def test_a_malformed_rescale_is_a_problem_and_the_rest_goes_on() -> None:
    bad = {**answer(f"rescales-details-{SECOND}.json"), "schedulerStates": "soon"}
    seen = step.observe(
        JobOffset("local", JID), answers(details={**answers().details, SECOND: bad}), NOW
    )
    assert [x["rescaleUuid"] for x in seen.rescales] == [FIRST]
    assert seen.problems == (
        (
            f"rescales/details/{SECOND}",
            "rescales/details.schedulerStates: expected list or null, got 'soon'",
        ),
    )
    assert SECOND in step.details_to_fetch(seen.offset, answers().history or [])


def test_the_job_waits_for_the_group_names_unless_history_is_off() -> None:
    early = answers(history=[], details={}, job={**answer("job.json"), "start-time": NOW - 1000})
    assert step.observe(JobOffset("local", JID), early, NOW).events == ()
    off = replace(early, history=None, history_enabled=False)
    (submitted, *_) = step.observe(JobOffset("local", JID), off, NOW).events
    assert isinstance(submitted, JobSubmitted)
    assert {v.ssg_name for v in submitted.vertices} == {v.ssg_id for v in submitted.vertices}


def later(seen: step.Observed, **changes: Any) -> step.Observed:
    return step.observe(seen.offset, answers(details={}, **changes), NOW + 5000)


def test_task_managers_come_and_go_and_requirements_change() -> None:
    seen = first_poll()
    tms = tr.task_managers(answer("taskmanagers.json"))
    more = (*tms[1:], replace(tms[0], id="tm-4"))
    raised = {
        v: {"parallelism": {"lowerBound": 2, "upperBound": 4}}
        for v in answer("resource-requirements.json")
    }
    changed = later(seen, task_managers=more, requirements=raised)
    assert [(type(e), getattr(e, "task_manager_id", None)) for e in changed.events] == [
        (TaskManagerLost, "tm-1"),
        (TaskManagerRegistered, "tm-4"),
        (RequirementsUpdated, None),
    ]
    assert all(e.timestamp == NOW + 5000 for e in changed.events)


def test_a_task_manager_is_announced_at_the_poll_that_sees_its_slots() -> None:
    # CI of stop 51: tm-19 listed with slotsNumber 0 (registered with the ResourceManager,
    # its slot report not in yet) reached the scheduler, which refused it
    seen = first_poll()
    tms = tr.task_managers(answer("taskmanagers.json"))
    early = (*tms, replace(tms[0], id="tm-4", slots=0))
    registering = later(seen, task_managers=early)
    assert registering.events == ()
    assert "tm-4" not in registering.offset.task_managers
    offering = (*tms, replace(tms[0], id="tm-4"))
    announced = step.observe(
        registering.offset, answers(details={}, task_managers=offering), NOW + 6000
    )
    assert [(type(e), e.timestamp) for e in announced.events] == [
        (TaskManagerRegistered, NOW + 6000)
    ]
    # a known TaskManager listed with no slots for a poll is neither lost nor announced again
    emptied = (*tms, replace(tms[0], id="tm-4", slots=0))
    again = step.observe(announced.offset, answers(details={}, task_managers=emptied), NOW + 7000)
    assert again.events == () and "tm-4" in again.offset.task_managers


def failure(at: int, tm: str | None) -> dict[str, Any]:
    return {
        "exceptionName": "java.lang.RuntimeException",
        "timestamp": at,
        "taskName": "Sum (1/1)",
        "taskManagerId": tm,
    }


def test_failures_recoverable_by_the_job_state_and_not_those_of_a_lost_task_manager() -> None:
    seen = first_poll()
    entries = [failure(NOW + 100, "tm-2"), failure(NOW + 200, "tm-9")]
    restarting = later(
        seen,
        exceptions={"exceptionHistory": {"entries": entries}},
        job={**answer("job.json"), "state": "RESTARTING"},
    )
    (event,) = restarting.events
    assert event == JobLifecycle(
        f"local.{JID}", NOW + 100, JobEventKind.TASK_FAILURE, True, "java.lang.RuntimeException"
    )
    failing = later(
        seen,
        exceptions={"exceptionHistory": {"entries": entries[:1]}},
        job={**answer("job.json"), "state": "FAILING"},
    )
    assert [e.recoverable for e in failing.events if isinstance(e, JobLifecycle)] == [False]
    assert later(restarting, exceptions={"exceptionHistory": {"entries": entries}}).events == ()


def test_a_terminal_state_is_reported_once() -> None:
    seen = first_poll()
    job = {**answer("job.json"), "state": "CANCELED", "end-time": NOW + 10}
    canceled = later(seen, job=job)
    assert canceled.events == (
        JobLifecycle(f"local.{JID}", NOW + 10, JobEventKind.CANCEL, True, "Flink job CANCELED"),
    )
    assert later(canceled, job=job).events == ()


def test_the_scheduler_core_takes_the_events_and_predicts_the_job() -> None:
    seen = first_poll()
    job = {**answer("job.json"), "state": "CANCELED", "end-time": NOW + 10}
    events = [*seen.events, *later(seen, job=job).events]
    _, effects = replay(events)
    assert not [e for e in effects if isinstance(e, Rejected)]
    records = [e.record for e in effects if isinstance(e, RescaleUpdated)]
    assert records and records[0]["triggerCause"] == "INITIAL_SCHEDULE"
    assert records[-1]["schedulerSettings"][k.OBSERVED_CLUSTER] == "local"
    assert json.dumps(records[-1]["jobId"]) == json.dumps(f"local.{JID}")


def test_checkpoints_ended_since_the_submission_reach_the_scheduler_once() -> None:
    seen = first_poll()
    history = answer("checkpoints.json")["history"]
    stamps = sorted(c["latest_ack_timestamp"] for c in history)
    offset = replace(seen.offset, checkpoint_floor=stamps[0])  # submitted as the oldest ended
    polled = step.observe(offset, answers(details={}, checkpoints={"history": history}), stamps[-1])
    assert [(e.kind, e.checkpoint_id) for e in polled.events if isinstance(e, JobLifecycle)] == [
        (JobEventKind.CHECKPOINT_COMPLETED, 1239),
        (JobEventKind.CHECKPOINT_COMPLETED, 1240),
    ]
    again = step.observe(
        polled.offset, answers(details={}, checkpoints={"history": history}), stamps[-1] + 5000
    )
    assert again.events == ()


def test_a_job_the_jobmanager_no_longer_lists_is_suspended_once() -> None:
    seen = first_poll()
    gone = step.vanished(seen.offset, NOW + 5000)
    assert gone is not None and gone.offset.terminal == "VANISHED"
    assert [(e.kind, e.timestamp) for e in gone.events if isinstance(e, JobLifecycle)] == [
        (JobEventKind.SUSPEND, NOW + 5000)
    ]
    assert step.vanished(gone.offset, NOW + 10000) is None
    assert step.vanished(JobOffset("local", JID), NOW) is None  # never submitted


def without_tm_1(seen: step.Observed, *entries: dict[str, Any]) -> step.Observed:
    """The poll after tm-1 was killed: /taskmanagers lists it no more, the job restarts."""
    tms = tr.task_managers(answer("taskmanagers.json"))
    return later(
        seen,
        task_managers=tuple(tm for tm in tms if tm.id != "tm-1"),
        exceptions={"exceptionHistory": {"entries": list(entries)}},
        job={**answer("job.json"), "state": "RESTARTING"},
    )


def views_without(*ids: str) -> tuple[tr.TaskManagerView, ...]:
    return tuple(tm for tm in tr.task_managers(answer("taskmanagers.json")) if tm.id not in ids)


def test_a_lost_task_manager_is_lost_before_the_failures_its_loss_caused() -> None:
    # Flink's graph cannot finish cancelling before the JobMaster released the lost
    # TaskManager's slots (docs/flink-conformance.md, "Against a real Flink 2.3.0"), so
    # the loss goes first, at the poll's first failure, not at the poll.
    seen = first_poll()
    gone = without_tm_1(seen, failure(NOW + 100, "tm-2"))
    assert [(type(e), e.timestamp) for e in gone.events] == [
        (TaskManagerLost, NOW + 100),
        (JobLifecycle, NOW + 100),
    ]
    own = without_tm_1(seen, failure(NOW + 300, "tm-1"))  # the JobMaster's, not sent
    assert [(type(e), e.timestamp) for e in own.events] == [(TaskManagerLost, NOW + 300)]
    quiet = without_tm_1(seen)
    assert [(type(e), e.timestamp) for e in quiet.events] == [(TaskManagerLost, NOW + 5000)]


def polled(offset: JobOffset, now: int, **changes: Any) -> step.Observed:
    """A poll of a JobManager that caches its job answers for 3 s (web.refresh-interval)."""
    quiet = {"exceptionHistory": {"entries": []}}
    return step.observe(
        offset, answers(details={}, refresh_ms=3_000, **{"exceptions": quiet, **changes}), now
    )


def losses(seen: step.Observed) -> list[tuple[str, int, Window | None]]:
    return [
        (e.task_manager_id, e.timestamp, e.window)
        for e in seen.events
        if isinstance(e, TaskManagerLost)
    ]


def test_a_loss_seen_in_the_listing_waits_for_flinks_exceptions_and_takes_their_instant() -> None:
    # Flink fails the job over when a killed TaskManager's connections break, often seconds
    # before the ResourceManager stops listing it; its exceptions say when, from a cache up
    # to web.refresh-interval old. The loss waits for an answer that would show the failover.
    start = first_poll().offset
    left = Window(NOW + 1500, NOW + 1750)
    gone = {"task_managers": views_without("tm-1"), "departed": {"tm-1": left}}
    waiting = polled(start, NOW + 2000, **gone)
    assert losses(waiting) == [] and "tm-1" in waiting.offset.task_managers
    timers = [e.timestamp for e in waiting.events if isinstance(e, TimerFired)]
    assert timers and max(timers) < left.by  # the job's clock stays before the loss
    failed = {"exceptionHistory": {"entries": [failure(NOW + 1200, "tm-1")]}}
    shown = polled(waiting.offset, NOW + 4000, exceptions=failed, **gone)
    assert losses(shown) == [("tm-1", NOW + 1200, None)]  # Flink's instant, exact
    assert [type(e) for e in shown.events] == [TimerFired, TaskManagerLost]  # clock NOW + 500
    assert "tm-1" not in shown.offset.task_managers
    # no failover by the time an answer would show one: the listing's window
    quiet = polled(waiting.offset, NOW + 4000, **gone)
    assert losses(quiet) == []
    late = polled(quiet.offset, left.by + 3_500, **gone)
    assert losses(late) == [("tm-1", left.by, left)]
    # a restarted bridge has no listing's window: the loss is sent at once
    restarted = polled(waiting.offset, NOW + 4000, task_managers=views_without("tm-1"))
    assert losses(restarted) == [("tm-1", NOW + 4000, None)]


def checkpoint(cid: int, at: int) -> dict[str, Any]:
    return {"id": cid, "status": "COMPLETED", "latest_ack_timestamp": at}


def test_a_held_loss_keeps_the_jobs_inputs_in_time_order() -> None:
    # the scheduler folds inputs in the order sent, each moving the job's clock: a
    # checkpoint that ended after the job's clock waits with the loss, not to pass it
    start = replace(first_poll().offset, checkpoint_floor=NOW)
    left = Window(NOW + 1500, NOW + 1750)
    gone = {"task_managers": views_without("tm-1"), "departed": {"tm-1": left}}
    ended = {"history": [checkpoint(7, NOW + 1000), checkpoint(8, NOW + 2600)]}
    waiting = polled(start, NOW + 3000, checkpoints=ended, **gone)
    assert losses(waiting) == []
    assert [e.checkpoint_id for e in waiting.events if isinstance(e, JobLifecycle)] == []
    clock = max(e.timestamp for e in waiting.events if isinstance(e, TimerFired))
    assert clock < left.by
    # 7 ended after the job's clock too (the first poll's, NOW - 3.5 s): the loss may be
    # stamped at any instant after that clock, and every input after it waits
    later = {"history": [*ended["history"], checkpoint(9, NOW + 4600)]}
    sent = polled(waiting.offset, left.by + 3_500, checkpoints=later, **gone)
    inputs = [e for e in sent.events if not isinstance(e, TimerFired)]
    assert [(type(e), e.timestamp) for e in inputs] == [
        (JobLifecycle, NOW + 1000),
        (TaskManagerLost, left.by),
        (JobLifecycle, NOW + 2600),
        (JobLifecycle, NOW + 4600),
    ]
    again = polled(sent.offset, left.by + 5_000, checkpoints=later, **gone)
    assert [e for e in again.events if not isinstance(e, TimerFired)] == []
    # another input in the poll: the loss goes at once, at its window's end, sorted with it
    added = replace(answer_views()[0], id="tm-9")
    joined = polled(
        start,
        NOW + 3000,
        task_managers=(*views_without("tm-1"), added),
        departed={"tm-1": left},
        appeared={"tm-9": Window(NOW + 1750, NOW + 2000)},
    )
    inputs = [e for e in joined.events if not isinstance(e, TimerFired)]
    assert [(type(e), e.timestamp) for e in inputs] == [
        (TaskManagerLost, left.by),
        (TaskManagerRegistered, NOW + 2000),
    ]


def answer_views() -> tuple[tr.TaskManagerView, ...]:
    return tr.task_managers(answer("taskmanagers.json"))


def test_a_task_manager_that_left_and_came_back_under_its_id_is_lost_and_registered() -> None:
    # item 5 of issue 47: a TaskManager restarted with a fixed resource id between two polls
    start = first_poll().offset
    left, back = Window(NOW + 600, NOW + 850), Window(NOW + 850, NOW + 1100)
    flap = {"departed": {"tm-1": left}, "appeared": {"tm-1": back}}
    seen = polled(start, NOW + 2000, **flap)
    inputs = [e for e in seen.events if not isinstance(e, TimerFired)]
    assert [(type(e), e.timestamp, getattr(e, "window", None)) for e in inputs] == [
        (TaskManagerLost, left.by, left),
        (TaskManagerRegistered, back.by, back),
    ]
    assert "tm-1" in seen.offset.task_managers
    # Flink's exceptions name it lost before it came back: not lost a second time
    named = {
        "exceptionHistory": {
            "entries": [
                {
                    "exceptionName": "java.util.concurrent.TimeoutException",
                    "timestamp": NOW + 700,
                    "stacktrace": "TaskManager with id tm-1 is no longer reachable.",
                }
            ]
        }
    }
    after = polled(seen.offset, NOW + 4000, exceptions=named, **flap)
    assert losses(after) == [] and "tm-1" in after.offset.task_managers
    assert not [e for e in after.events if isinstance(e, JobLifecycle)]  # its loss, not a failure
    together = polled(start, NOW + 2000, exceptions=named, **flap)
    assert losses(together) == [("tm-1", NOW + 700, None)]  # Flink's instant
    _, effects = replay([*first_poll().events, *together.events])
    assert not [e for e in effects if isinstance(e, Rejected)]


def test_a_lost_task_manager_says_whether_it_held_the_jobs_tasks_as_last_read() -> None:
    # which of more TaskManagers than it needs a job runs on is Flink's ResourceManager's
    # choice: the bridge reads it once the cached graph is the running one
    seen = first_poll()
    graph = max(e["endTimestampInMillis"] for e in answers().history or [])  # last Executing

    def lost(
        placement: step.Placement | None, *entries: dict[str, Any], history: Any = None
    ) -> bool | None:
        tms = tr.task_managers(answer("taskmanagers.json"))
        gone = later(
            seen,
            task_managers=tuple(tm for tm in tms if tm.id != "tm-1"),
            exceptions={"exceptionHistory": {"entries": list(entries)}},
            placement=placement,
            refresh_ms=3_000,
            **({"history": history} if history is not None else {}),
        )
        (event,) = [e for e in gone.events if isinstance(e, TaskManagerLost)]
        return event.hosted_tasks

    assert step.placement_current(answers().history, graph + 3_600, 3_000)
    assert not step.placement_current(answers().history, graph + 3_400, 3_000)
    assert lost(step.Placement(frozenset({"tm-2", "tm-3"}), graph + 3_600)) is False
    assert lost(step.Placement(frozenset({"tm-1", "tm-2"}), graph + 3_600)) is True
    assert lost(None) is None  # not read: the scheduler's own assignment decides
    assert lost(step.Placement(frozenset({"tm-2"}), graph + 1_000)) is None  # a stale graph
    # a rescale in progress (waiting for its cooldown, say) has deployed nothing yet
    waiting = {"rescaleUuid": "0" * 32, "startTimestampInMillis": graph + 4_000}
    history = [*(answers().history or []), waiting]
    assert not step.placement_current(history, graph + 3_400, 3_000)
    assert lost(step.Placement(frozenset({"tm-2"}), graph + 3_600), history=history) is False
    # a task of the job failed there: it held tasks, whatever the reading said
    assert lost(step.Placement(frozenset({"tm-2"}), graph + 3_600), failure(NOW + 100, "tm-1"))


def test_a_killed_task_manager_gives_one_failover_through_waiting_for_resources() -> None:
    seen = first_poll()
    gone = without_tm_1(seen, failure(NOW + 100, "tm-2"))
    _, effects = replay([*seen.events, *gone.events])
    records = {e.record["rescaleUuid"]: e.record for e in effects if isinstance(e, RescaleUpdated)}
    failovers = [r for r in records.values() if r["triggerCause"] == "RECOVERABLE_FAILOVER"]
    assert [[s["state"] for s in r["schedulerStates"]] for r in failovers] == [
        ["Executing", "Restarting", "WaitingForResources", "CreatingExecutionGraph", "Executing"]
    ]


def test_a_failure_without_a_task_that_names_a_lost_task_manager_is_its_loss() -> None:
    # Killed while its tasks were still being deployed, Flink's exception history holds
    # the JobMaster's own exception, with no task and no taskManagerId (the demo on a
    # busy CI machine): sent as a global failure, it failed the predicted job.
    seen = first_poll()
    lost = {
        "exceptionName": "org.apache.flink.runtime.jobmaster.JobMasterException",
        "timestamp": NOW + 100,
        "stacktrace": "org.apache.flink.runtime.jobmaster.JobMasterException: "
        "TaskManager with id tm-1 is no longer reachable.\n\tat org.apache.flink...",
        "taskName": None,
        "taskManagerId": None,
    }
    gone = without_tm_1(seen, lost)
    assert [(type(e), e.timestamp) for e in gone.events] == [(TaskManagerLost, NOW + 100)]
    listed = tr.task_managers(answer("taskmanagers.json"))
    still = later(seen, task_managers=listed, exceptions={"exceptionHistory": {"entries": [lost]}})
    # still listed (the ResourceManager had not dropped it yet): the JobMaster lost it
    assert [(type(e), e.timestamp) for e in still.events] == [(TaskManagerLost, NOW + 100)]


def test_failures_that_name_a_lost_task_manager_by_connection_or_address_are_its_loss() -> None:
    # Flink 2.3's adaptive scheduler records failures without a task: after tm-1 was
    # killed, a task's closed connection to it and a deployment to its slots (sent
    # before the JobMaster released them) are both entries with no taskName (the demo
    # on a busy machine, 2026-12-02); sent, the second failed a prediction that was
    # waiting for resources.
    seen = first_poll()
    closed = {
        "exceptionName": "org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException",
        "timestamp": NOW + 100,
        "stacktrace": "org.apache.flink...RemoteTransportException: Connection unexpectedly "
        "closed by remote task manager '127.0.0.1/127.0.0.1:35451 [ tm-1 ] '. This might...",
    }
    tm_1 = "pekko.tcp://flink@127.0.0.1:38337/user/rpc/taskmanager_0"  # taskmanagers.json
    tm_2 = "pekko.tcp://flink@127.0.0.1:42439/user/rpc/taskmanager_0"

    def deploy(at: int, path: str) -> dict[str, Any]:
        return {
            "exceptionName": "org.apache.flink.runtime.rpc.exceptions.RecipientUnreachableException",
            "timestamp": at,
            "stacktrace": "org.apache.flink...RecipientUnreachableException: Could not send "
            "message [RemoteRpcInvocation(TaskExecutorGateway.submitTask(...))] from sender "
            f"[Actor[pekko://flink/temp/taskmanager_0$9i]] to recipient [Actor[{path}]], "
            "because the recipient is unreachable.",
        }

    gone = without_tm_1(seen, closed, deploy(NOW + 1300, tm_1))
    assert [(type(e), e.timestamp) for e in gone.events] == [(TaskManagerLost, NOW + 100)]
    # the network stack's other wording of the same loss (a later busy run of the demo)
    lost = {
        **closed,
        "stacktrace": "org.apache.flink...RemoteTransportException: Lost connection to task "
        "manager '127.0.0.1/127.0.0.1:35451 [ tm-1 ] '. This indicates that the remote task "
        "manager was lost.",
    }
    assert [type(e) for e in without_tm_1(seen, lost).events] == [TaskManagerLost]
    # the path as Flink 2.3 writes it, with the actor's uid (a busy demo's prediction
    # failed on it, 2026-12-02: the pattern wanted the path's end right after the name)
    uid = without_tm_1(seen, closed, deploy(NOW + 1300, f"{tm_1}#-1618999474"))
    assert [(type(e), e.timestamp) for e in uid.events] == [(TaskManagerLost, NOW + 100)]
    # the same to a TaskManager still listed: the JobMaster lost it before the
    # ResourceManager dropped it (a busy demo's prediction failed on it as a global
    # failure, 2026-12-02): lost at the entry's instant, not registered again while listed
    listed = without_tm_1(seen, deploy(NOW + 1300, tm_2))
    assert [(type(e), e.timestamp) for e in listed.events] == [
        (TaskManagerLost, NOW + 1300),  # tm-1, no longer listed: at the first new entry
        (TaskManagerLost, NOW + 1300),
    ]
    assert [e.task_manager_id for e in listed.events] == ["tm-1", "tm-2"]  # type: ignore[union-attr]
    assert listed.offset.lost_task_managers == ("tm-2",)
    still = step.observe(
        listed.offset, answers(details={}, task_managers=views_without("tm-1")), NOW + 3000
    )
    assert still.events == ()
    dropped = step.observe(
        still.offset, answers(details={}, task_managers=views_without("tm-1", "tm-2")), NOW + 5000
    )
    assert dropped.events == () and dropped.offset.lost_task_managers == ()


def test_a_checkpoint_a_cached_answer_shows_late_is_still_sent_once() -> None:
    """Flink serves /checkpoints from a cache (web.refresh-interval): a checkpoint that
    ended before one poll may first show at the next; it is sent then, with its instant."""
    seen = first_poll()
    history = answer("checkpoints.json")["history"]
    stamps = sorted(c["latest_ack_timestamp"] for c in history)
    offset = replace(seen.offset, checkpoint_floor=stamps[0] - 1)
    newest = max(history, key=lambda c: c["latest_ack_timestamp"])
    stale = [c for c in history if c is not newest]
    first = step.observe(offset, answers(details={}, checkpoints={"history": stale}), stamps[-1])
    late = step.observe(
        first.offset, answers(details={}, checkpoints={"history": history}), stamps[-1] + 2000
    )
    ids = [e.checkpoint_id for e in late.events if isinstance(e, JobLifecycle)]
    assert ids == [newest["id"]]
    assert [e.timestamp for e in late.events if isinstance(e, JobLifecycle)] == [stamps[-1]]
    again = step.observe(
        late.offset, answers(details={}, checkpoints={"history": history}), stamps[-1] + 4000
    )
    assert again.events == ()
    assert from_record(to_record(late.offset)) == late.offset


def test_an_offset_of_version_1_sends_what_ended_since_its_last_poll() -> None:
    history = answer("checkpoints.json")["history"]
    stamps = sorted(c["latest_ack_timestamp"] for c in history)
    record = to_record(replace(first_poll().offset, updated_at=stamps[0]))
    del record["checkpointsSent"], record["checkpointFloorMillis"]
    offset = from_record(record)
    polled = step.observe(offset, answers(details={}, checkpoints={"history": history}), stamps[-1])
    ids = [e.checkpoint_id for e in polled.events if isinstance(e, JobLifecycle)]
    assert ids == [c["id"] for c in sorted(history, key=lambda c: c["latest_ack_timestamp"])][1:]


def test_a_job_on_flink_2_3_is_predicted_without_the_active_checkpoint_trigger() -> None:
    def submitted(version: str | None) -> dict[str, str]:
        polled = step.observe(JobOffset("local", JID), answers(flink_version=version), NOW)
        (job,) = [e for e in polled.events if isinstance(e, JobSubmitted)]
        return dict(job.configuration)

    assert submitted("2.3.0")[k.ACTIVE_CHECKPOINT] == "false"
    assert submitted("1.20.1")[k.ACTIVE_CHECKPOINT] == "false"
    assert k.ACTIVE_CHECKPOINT not in submitted("2.4-SNAPSHOT")
    assert k.ACTIVE_CHECKPOINT not in submitted(None)  # unknown: the core's default


def test_a_job_on_the_clusters_default_restart_strategy_is_predicted_with_the_clusters() -> None:
    # Flink 2.3's /jobs/:jid/config says only "Cluster level default restart strategy";
    # /jobmanager/config holds it (the Flink demo's cluster: fixed-delay, 10 s)
    shown = tr.cluster_restart_strategy(
        [
            {"key": "restart-strategy.type", "value": "fixed-delay"},
            {"key": "restart-strategy.fixed-delay.delay", "value": "10000 ms"},
            {"key": "rest.port", "value": "8081"},
            {"key": None, "value": "x"},
        ]
    )
    assert shown == {
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.delay": "10000 ms",
    }
    default = {**answer("job-config.json")}
    default["execution-config"] = {
        **default["execution-config"],
        "restart-strategy": "Cluster level default restart strategy",
    }

    def submitted(**changes: Any) -> dict[str, str]:
        polled = step.observe(JobOffset("local", JID), answers(**changes), NOW)
        (job,) = [e for e in polled.events if isinstance(e, JobSubmitted)]
        return dict(job.configuration)

    assert submitted(job_config=default, cluster_restart=shown)[k.FIXED_DELAY] == "10000 ms"
    assert k.RESTART_STRATEGY not in submitted(job_config=default)  # Flink's default then
    assert submitted(cluster_restart=shown)[k.FIXED_DELAY] == "1000 ms"  # the job's own wins
    assert tr.cluster_restart_strategy({"not": "a list"}) == {}


def test_observed_inputs_carry_the_window_they_are_known_to_lie_in() -> None:
    seen = first_poll()
    listed = answers().task_managers or ()
    gone, kept = listed[0], listed[1:]
    new = tr.TaskManagerView("tm-new", 2, None)
    raised = {
        v: {"parallelism": {"lowerBound": 1, "upperBound": 3}}
        for v in answer("resource-requirements.json")
    }
    now = NOW + 4000  # a loss is sent once Flink's exceptions would show it (refresh 3 s)
    polled = step.observe(
        seen.offset,
        answers(
            details={},
            task_managers=(*kept, new),
            requirements=raised,
            appeared={"tm-new": Window(NOW + 100, now + 30)},
            departed={gone.id: Window(NOW + 100, NOW + 130)},
            requirements_window=Window(NOW + 120, now + 40),
            exceptions={"exceptionHistory": {"entries": []}},
            refresh_ms=3_000,
        ),
        now,
    )
    windows = {type(e).__name__: e.window for e in polled.events if hasattr(e, "window")}
    assert windows == {
        "TaskManagerLost": Window(NOW + 100, NOW + 130),
        "TaskManagerRegistered": Window(NOW + 100, now + 30),
        "RequirementsUpdated": Window(NOW + 120, now + 40),
    }
    stale = step.observe(
        seen.offset,
        answers(details={}, task_managers=(*listed, new), appeared={"tm-new": Window(1, 2)}),
        now,
    )
    (registered,) = [e for e in stale.events if isinstance(e, TaskManagerRegistered)]
    assert registered.window is None  # a window that does not hold the stamp is not its


def test_a_task_manager_that_came_after_the_job_started_has_a_window_from_the_start() -> None:
    start = answer("job.json")["start-time"]
    listed = answers().task_managers or ()
    windows = {
        listed[0].id: Window(start - 50_000, start - 10_000),
        listed[1].id: Window(start + 500, start + 1500),
    }
    polled = step.observe(JobOffset("local", JID), answers(appeared=windows), NOW)
    registered = {
        e.task_manager_id: e for e in polled.events if isinstance(e, TaskManagerRegistered)
    }
    assert registered[listed[0].id].window is None  # there before the job: exact, at its start
    assert registered[listed[1].id].window == Window(start + 500, start + 1500)
    assert all(e.timestamp == start for e in registered.values())


def test_presence_windows_run_from_the_listing_before_to_the_one_that_shows_the_change() -> None:
    presence = Presence()
    one, two = tr.TaskManagerView("tm-1", 1, None), tr.TaskManagerView("tm-2", 1, None)
    wall = 1_000_000  # the wall clock is the monotonic one + 1,000,000 ms, until it steps
    presence.update((one,), 1000, Instant(wall + 1010, 1010))
    assert presence.appeared == {"tm-1": None}  # the first listing read: no window
    presence.update((one, tr.TaskManagerView("tm-2", 0, None)), 2000, Instant(wall + 2010, 2010))
    assert "tm-2" not in presence.appeared  # no slots reported yet
    presence.update((one, two), 3000, Instant(wall + 3020, 3020))
    assert presence.appeared["tm-2"] == Window(wall + 2000, wall + 3020)
    stepped = wall - 60_000  # the machine's clock stepped back a minute
    presence.update((two,), 4000, Instant(stepped + 4005, 4005))
    assert presence.departed == {"tm-1": Window(stepped + 3000, stepped + 4005)}
    assert set(presence.appeared) == {"tm-2"}
    presence.update((one,), 5000, Instant(stepped + 5005, 5005))  # tm-2 dropped, tm-1 back
    assert presence.left == {"tm-2": step.Left(two, Window(wall + 2000, wall + 3020))}


def test_a_change_a_listing_between_polls_saw_is_stamped_when_that_listing_saw_it() -> None:
    seen = first_poll()
    listed = answers().task_managers or ()
    new = tr.TaskManagerView("tm-new", 2, None)
    now = NOW + 2000
    between = Window(NOW + 500, NOW + 750)  # the listing of NOW + 750 showed it first
    polled = step.observe(
        seen.offset,
        answers(details={}, task_managers=(*listed, new), appeared={"tm-new": between}),
        now,
    )
    (registered,) = [e for e in polled.events if isinstance(e, TaskManagerRegistered)]
    assert (registered.timestamp, registered.window) == (NOW + 750, between)


def test_the_bridge_lists_task_managers_between_polls_when_due() -> None:
    from services.bridge.service import Bridge

    class Poller:
        name = "local"
        listings = 0

        def list_presence(self) -> None:
            self.listings += 1

    poller = Poller()
    bridge = Bridge([poller], None, 2.0, {}, presence_interval_s=0.25)  # type: ignore[list-item,arg-type]
    for monotonic in (0.0, 0.1, 0.2, 0.3, 0.5, 0.55):
        bridge.list_presence(monotonic)
    assert poller.listings == 3  # at 0.0, 0.3 and 0.55
    bridge.schedules["local"].failures = 1  # a cluster away: its polls' backoff alone
    bridge.list_presence(10.0)
    assert poller.listings == 3


def test_the_jobs_clock_moves_with_what_the_polls_have_seen() -> None:
    """TimerFired at the poll's instant less the cached answers' age: the scheduler runs an
    observed job's timers by it, so a late input is not folded after a deadline it
    preceded."""
    seen = first_poll()
    start = answer("job.json")["start-time"]
    assert seen.offset.advanced_to == start
    quiet = step.observe(seen.offset, answers(details={}, refresh_ms=3000), NOW + 2000)
    assert quiet.events == (TimerFired(f"local.{JID}", NOW + 2000 - 3000 - step.CLOCK_MARGIN_MS),)
    assert quiet.offset.advanced_to == NOW - 1500
    again = step.observe(quiet.offset, answers(details={}, refresh_ms=3000), NOW + 2000)
    assert again.events == ()  # the clock did not move
    # an input this poll sends at a later instant goes before the tick: never after it
    new = tr.TaskManagerView("tm-new", 1, None)
    listed = (*(answers().task_managers or ()), new)
    joined = step.observe(
        quiet.offset, answers(details={}, task_managers=listed, refresh_ms=3000), NOW + 9000
    )
    assert [type(e) for e in joined.events] == [TimerFired, TaskManagerRegistered]
    assert joined.events[0].timestamp == NOW + 5500 < joined.events[1].timestamp


def test_requirements_changed_before_the_first_poll_are_a_change_after_the_start() -> None:
    """The job started wanting 4 of Slow map (Flink's initial schedule says so); its upper
    bound was 2 by the bridge's first poll: submitted as it started, then the change, in
    the window between the start and the poll."""
    lowered = answer("resource-requirements.json")
    slow_map = "cbc357ccb763df2852fee8c4fc7d55f2"
    lowered[slow_map]["parallelism"]["upperBound"] = 2
    polled = step.observe(JobOffset("local", JID), answers(requirements=lowered), NOW)
    (submitted,) = [e for e in polled.events if isinstance(e, JobSubmitted)]
    assert {v.id: v.parallelism for v in submitted.vertices}[slow_map] == 4
    (changed,) = [e for e in polled.events if isinstance(e, RequirementsUpdated)]
    start = answer("job.json")["start-time"]
    assert (changed.timestamp, changed.window) == (NOW, Window(start, NOW))
    assert {q.vertex_id: q.upper for q in changed.requirements}[slow_map] == 2


def test_a_job_waiting_for_its_first_resources_is_submitted_from_the_sources() -> None:
    """Before its first execution graph Flink 2.3 answers from a sparse graph: a plan of no nodes,
    the vertices sinks first (seen on a real 2.3.0, 2026-12-03); the bridge reverses them."""
    job = answer("job.json")
    sparse = {**job, "vertices": list(reversed(job["vertices"])), "plan": {"nodes": []}}
    polled = step.observe(JobOffset("local", JID), answers(job=sparse), NOW)
    (submitted,) = [e for e in polled.events if isinstance(e, JobSubmitted)]
    assert [v.name for v in submitted.vertices] == [
        "Source: Numbers -> Slow map",
        "Sum -> Discard: Writer",
    ]
    planless = {k: v for k, v in job.items() if k != "plan"}  # no plan at all: as answered
    polled = step.observe(JobOffset("local", JID), answers(job=planless), NOW)
    (submitted,) = [e for e in polled.events if isinstance(e, JobSubmitted)]
    assert [v.name for v in submitted.vertices] == [v["name"] for v in job["vertices"]]


def test_the_job_is_submitted_with_its_vertices_from_the_sources() -> None:
    """/jobs/:jid may list the sink's vertex first; Flink iterates its job graph from the
    sources, which decides which of two alike-hashed groups gets a spare slot."""
    job = answer("job.json")
    reversed_job = {**job, "vertices": list(reversed(job["vertices"]))}
    polled = step.observe(JobOffset("local", JID), answers(job=reversed_job), NOW)
    (submitted,) = [e for e in polled.events if isinstance(e, JobSubmitted)]
    assert [v.name for v in submitted.vertices] == [
        "Source: Numbers -> Slow map",
        "Sum -> Discard: Writer",
    ]


def test_a_task_manager_waits_for_its_slots_offer_while_nothing_else_comes_after_it() -> None:
    seen = first_poll()
    listed = answers().task_managers or ()
    new = tr.TaskManagerView("tm-new", 2, None)
    appeared = {"tm-new": Window(NOW + 4_000, NOW + 4_500)}

    def poll(offset: JobOffset, now: int, **changes: Any) -> step.Observed:
        got = answers(details={}, task_managers=(*listed, new), appeared=appeared, **changes)
        return step.observe(offset, replace(got, refresh_ms=3_000), now)

    waiting = poll(seen.offset, NOW + 5_000, awaiting_offer=frozenset({"tm-new"}))
    assert not [e for e in waiting.events if isinstance(e, TaskManagerRegistered)]
    assert waiting.offset.advanced_to <= NOW + 4_000  # the job's clock stays before it
    # offered 2 s after the listing showed it: held until Flink's cached answers would
    # show whatever came before the offer (its refresh interval), then registered at it
    offer = Window(NOW + 6_400, NOW + 6_450)
    seen_offer = poll(waiting.offset, NOW + 7_000, offers={"tm-new": offer})
    assert not [e for e in seen_offer.events if isinstance(e, TaskManagerRegistered)]
    assert seen_offer.offset.advanced_to <= offer.after
    offered = poll(seen_offer.offset, NOW + 10_000, offers={"tm-new": offer})
    (joined,) = [e for e in offered.events if isinstance(e, TaskManagerRegistered)]
    assert (joined.timestamp, joined.window) == (NOW + 6_401, offer)
    # never offered (the job needs no more slots): registered once the wait is over,
    # anywhere from its listing to that poll
    late = NOW + 4_500 + step.OFFER_WAIT_MS
    given_up = poll(waiting.offset, late, awaiting_offer=frozenset({"tm-new"}))
    (joined,) = [e for e in given_up.events if isinstance(e, TaskManagerRegistered)]
    assert (joined.timestamp, joined.window) == (late, Window(NOW + 4_000, late))
    # another input after its listing ends the wait: the scheduler folds in order sent
    raised = {
        v: {"parallelism": {"lowerBound": 1, "upperBound": 3}}
        for v in answer("resource-requirements.json")
    }
    other = poll(
        waiting.offset, NOW + 6_000, awaiting_offer=frozenset({"tm-new"}), requirements=raised
    )
    assert {type(e) for e in other.events} >= {TaskManagerRegistered, RequirementsUpdated}


def test_inputs_stay_in_time_order_around_a_task_manager_waiting_for_its_offer() -> None:
    # the near-deadline scenario on Flink (2026-12-05): tm-3 was sent at its offer while
    # tm-4 waited, and a checkpoint that ended before tm-3's offer was kept for a later poll
    history = answer("checkpoints.json")["history"]
    stamps = sorted(c["latest_ack_timestamp"] for c in history)
    seen = first_poll()
    offset = replace(seen.offset, checkpoint_floor=stamps[0] - 1, advanced_to=stamps[0] - 1)
    listed = answers().task_managers or ()
    three, four = tr.TaskManagerView("tm-30", 1, None), tr.TaskManagerView("tm-40", 1, None)
    polled = step.observe(
        offset,
        answers(
            details={},
            task_managers=(*listed, three, four),
            checkpoints={"history": history},
            appeared={
                "tm-30": Window(stamps[-1] - 10, stamps[-1]),
                "tm-40": Window(stamps[-1] + 3_600, stamps[-1] + 3_609),
            },
            offers={"tm-30": Window(stamps[-1] + 20, stamps[-1] + 30)},
            awaiting_offer=frozenset({"tm-40"}),
            refresh_ms=3_000,
        ),
        stamps[-1] + 4_000,
    )
    sent = [e for e in polled.events if not isinstance(e, TimerFired)]
    assert [getattr(e, "checkpoint_id", None) or e.task_manager_id for e in sent] == [  # type: ignore[attr-defined]
        1238,
        1239,
        1240,
        "tm-30",
    ]
    assert "tm-40" not in polled.offset.task_managers


def test_a_task_manager_its_log_never_showed_offered_is_the_jobs_once_it_failed_there() -> None:
    # the demo beside two hogs (2026-12-06): the new TaskManager took the job's tasks and was
    # killed before the bridge read its log, which then answered nothing; held back for its
    # offer until the listing dropped it, it never joined the prediction, nor did its failover
    seen = first_poll()
    listed = answers().task_managers or ()
    new = tr.TaskManagerView("tm-new", 1, None)
    appeared = {"tm-new": Window(NOW + 4_000, NOW + 4_500)}
    named = {
        "exceptionName": "org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException",
        "timestamp": NOW + 7_000,
        "stacktrace": "RemoteTransportException: Connection unexpectedly closed by remote task "
        "manager '127.0.0.1/127.0.0.1:35451 [ tm-new ] '.",
    }

    def poll(offset: JobOffset, now: int, *entries: dict[str, Any]) -> step.Observed:
        got = answers(
            details={},
            task_managers=(*listed, new),
            appeared=appeared,
            awaiting_offer=frozenset({"tm-new"}),
            exceptions={"exceptionHistory": {"entries": list(entries)}},
            refresh_ms=3_000,
        )
        return step.observe(offset, got, now)

    waiting = poll(seen.offset, NOW + 5_000)
    assert "tm-new" not in waiting.offset.task_managers
    failed = poll(waiting.offset, NOW + 9_000, named)
    inputs = [e for e in failed.events if not isinstance(e, TimerFired)]
    assert [(type(e), e.timestamp, getattr(e, "window", None)) for e in inputs] == [
        (TaskManagerRegistered, NOW + 4_500, Window(NOW + 4_000, NOW + 7_000)),
        (TaskManagerLost, NOW + 7_000, None),  # Flink's instant: its loss, not a failure
    ]
    assert inputs[1].hosted_tasks  # type: ignore[attr-defined]
    # a task of the job failed on it: the same proof, and the failure is the job's
    on_it = poll(waiting.offset, NOW + 9_000, failure(NOW + 7_000, "tm-new"))
    kinds = [type(e) for e in on_it.events if not isinstance(e, TimerFired)]
    assert kinds == [TaskManagerRegistered, JobLifecycle]
    _, effects = replay([*seen.events, *waiting.events, *failed.events])
    assert not [e for e in effects if isinstance(e, Rejected)]
    # Flink's heartbeat drops it from the listing as its JobMaster fails the job over: held
    # on for the cache's refresh interval after that, then registered and lost
    dropped = {
        "task_managers": listed,
        "appeared": {},
        "departed": {"tm-new": Window(NOW + 6_900, NOW + 7_100)},
        "left": {"tm-new": step.Left(new, appeared["tm-new"])},
        "refresh_ms": 3_000,
    }
    quiet = {"exceptionHistory": {"entries": []}}
    gone = step.observe(
        waiting.offset, answers(details={}, exceptions=quiet, **dropped), NOW + 8_000
    )
    assert not [e for e in gone.events if not isinstance(e, TimerFired)]
    assert gone.offset.advanced_to <= NOW + 4_000  # still before its appearance
    shown = answers(details={}, exceptions={"exceptionHistory": {"entries": [named]}}, **dropped)
    late = step.observe(gone.offset, shown, NOW + 9_000)
    inputs = [e for e in late.events if not isinstance(e, TimerFired)]
    assert [(type(e), e.timestamp) for e in inputs] == [
        (TaskManagerRegistered, NOW + 4_500),
        (TaskManagerLost, NOW + 7_000),
    ]
    assert "tm-new" not in late.offset.task_managers
    # one the job's offsets named before (lost, and named again by a later entry): not again
    again = step.observe(gone.offset, replace(shown, held=frozenset({"tm-new"})), NOW + 9_000)
    assert not [e for e in again.events if not isinstance(e, TimerFired)]


def test_task_managers_at_the_submission_are_the_jobs_when_their_slots_were_offered() -> None:
    start = answer("job.json")["start-time"]
    listed = answers().task_managers or ()
    offer = Window(start + 600, start + 640)
    polled = step.observe(
        JobOffset("local", JID), answers(offers={listed[0].id: offer}), start + 30_000
    )
    registered = {
        e.task_manager_id: e for e in polled.events if isinstance(e, TaskManagerRegistered)
    }
    assert (registered[listed[0].id].timestamp, registered[listed[0].id].window) == (
        start + 601,
        offer,
    )
    assert registered[listed[1].id].timestamp == start  # no offer read: from the start
