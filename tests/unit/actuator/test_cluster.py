"""The embedded cluster without Kafka: it follows only what the scheduler accepted, applies
commands once, answers requests, paces its work, and keeps its checkpoint ids to itself."""

from __future__ import annotations

import itertools

import msgspec

from services.actuator.cluster import (
    EMBEDDED_CHECKPOINT_IDS,
    EmbeddedCluster,
    Emit,
    Outcome,
    Timing,
    provisioned_id,
    provisioning_command,
)
from services.contracts.commands import CommandBasis, ScalingAction, ScalingCommand
from services.contracts.events import (
    ConfigurationUpdated,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    TaskManagerLost,
    TaskManagerRegistered,
    VertexSpec,
)
from services.contracts.jobconfig import COOLDOWN as COOLDOWN_KEY

JOB = "j"
TIMING = Timing(provisioning=3000, creation=300, cancellation=1500, slots_per_taskmanager=2)


def decision(kind: str, **details: object) -> dict[str, object]:
    """One item of a SchedulerDecisions record, as the scheduler writes it."""
    return {
        "category": "DECISION",
        "kind": kind,
        "executionGraphId": None,
        "details": {k: str(v) for k, v in details.items()},
    }


def submitted(interval: int = 10_000) -> dict[str, object]:
    return decision("STATE_TRANSITION", target="Created", checkpointIntervalMs=interval)


def registered(tm: str, slots: int) -> dict[str, object]:
    return decision(
        "RESOURCES_CHANGED", change="registered", taskManager=tm, taskManagerSlots=slots
    )


def lost(tm: str, slots: int) -> dict[str, object]:
    return decision("RESOURCES_CHANGED", change="lost", taskManager=tm, taskManagerSlots=slots)


def cluster(seed: int | None = None, timing: Timing = TIMING) -> EmbeddedCluster:
    world = EmbeddedCluster(timing, seed)
    world.observe_decision(JOB, submitted(), 0)
    return world


def with_taskmanagers(world: EmbeddedCluster, slots: int, *tms: str) -> EmbeddedCluster:
    for tm in tms:
        world.observe_decision(JOB, registered(tm, slots), 0)
    return world


def command(action: str, amount: int, command_id: str = "cmd-1", job: str = JOB) -> ScalingCommand:
    return ScalingCommand(
        command_id=command_id,
        job_id=job,
        action=ScalingAction(action),
        amount=amount,
        reason="test",
        issued_at_millis=0,
    )


def emitted(actions: list[object]) -> list[object]:
    return [a.event for a in actions if isinstance(a, Emit)]


def outcome(actions: list[object]) -> Outcome:
    (result,) = [a for a in actions if isinstance(a, Outcome)]
    return result


def running(world: EmbeddedCluster, now: int = 0) -> EmbeddedCluster:
    world.observe_request(JOB, "DEPLOY", "eg-1", {"runtime": "external"})
    world.answer(JOB, "DEPLOY", "eg-1", now=now)
    return world


def test_raw_input_the_scheduler_may_have_refused_leaves_no_trace() -> None:
    """A second submission, a TaskManager with no slots, a job nobody submitted: the
    scheduler dead-letters them; read from job-events, they change nothing here."""
    world = cluster()
    vertices = (VertexSpec("v", "V", "g", "g", 4, None),)
    for event in (
        JobSubmitted(JOB, 5, "again", vertices, 60, ()),
        JobSubmitted("ghost", 5, "ghost", vertices, 60, ()),
        TaskManagerRegistered(JOB, 5, "bad", -3, None),
        TaskManagerRegistered("ghost", 5, "tm", 4, None),
        JobLifecycle(JOB, 6, JobEventKind.FINISHED),
    ):
        world.observe_own(event, 0)
    assert set(world.jobs) == {JOB}
    job = world.jobs[JOB]
    assert (job.checkpoint_interval, job.task_managers, job.finished) == (10_000, {}, False)


def test_the_model_follows_the_schedulers_decisions() -> None:
    world = with_taskmanagers(cluster(), 2, "a", "b")
    world.observe_decision(JOB, lost("a", 2), 0)
    world.observe_decision(JOB, registered("c", 4), 0)
    assert world.jobs[JOB].task_managers == {"b": 2, "c": 4}
    world.observe_decision(
        JOB, decision("STATE_TRANSITION", source="Executing", target="Finished"), 0
    )
    assert world.jobs[JOB].finished


def test_provisioning_registers_taskmanagers_after_the_delay_and_reports_applied() -> None:
    world = cluster()
    actions = world.apply(command("PROVISION_TASK_MANAGERS", 3), now=1000)
    events = emitted(actions)
    assert [type(e) for e in events] == [
        TaskManagerRegistered,
        TaskManagerRegistered,
    ]  # 3 slots / 2 per TM
    assert all(a.due == 4000 for a in actions)
    result = outcome(actions)
    assert (result.status, result.due) == ("APPLIED", 4000)
    assert dict(result.details)["taskManagers"] == "j-cmd-cmd-1-0,j-cmd-cmd-1-1"


def test_a_command_seen_applied_in_the_log_is_not_applied_again() -> None:
    first = cluster()
    events = emitted(first.apply(command("PROVISION_TASK_MANAGERS", 4), now=0))
    restarted = cluster()  # a new process rebuilding from the log
    for event in events:
        restarted.observe_own(event, 0)
    again = restarted.apply(command("PROVISION_TASK_MANAGERS", 4), now=9000)
    assert emitted(again) == []
    assert outcome(again).message == "already applied before a restart"
    assert dict(outcome(again).details)["taskManagers"] == "j-cmd-cmd-1-0,j-cmd-cmd-1-1"


def test_a_provision_a_crash_cut_short_starts_the_rest_after_the_restart() -> None:
    first = emitted(cluster().apply(command("PROVISION_TASK_MANAGERS", 6), now=0))
    restarted = cluster()
    restarted.observe_own(first[0], 0)  # the crash came after the first of three went out
    again = restarted.apply(command("PROVISION_TASK_MANAGERS", 6), now=9000)
    assert [e.task_manager_id for e in emitted(again)] == ["j-cmd-cmd-1-1", "j-cmd-cmd-1-2"]
    result = outcome(again)
    assert (
        result.status == "APPLIED" and "the 2 TaskManager(s) the restart cut off" in result.message
    )
    assert dict(result.details)["taskManagers"] == "j-cmd-cmd-1-0,j-cmd-cmd-1-1,j-cmd-cmd-1-2"


def test_a_provisioned_taskmanager_id_names_its_command_whatever_the_job_id_holds() -> None:
    for job, command_id in [("j", "cmd-1"), ("a-cmd-b", "c-7"), ("x-cmd-", "-cmd-2")]:
        assert provisioning_command(job, provisioned_id(job, command_id, 12)) == command_id
    assert provisioning_command("j", "j-tm-1") is None
    assert provisioning_command("j", "j-cmd-c-x") is None  # no TaskManager number
    assert provisioning_command("a-cmd-b", provisioned_id("a", "b", 0)) is None  # another job


def test_release_takes_only_idle_taskmanagers_and_is_recognised_after_a_restart() -> None:
    world = with_taskmanagers(cluster(), 2, "a", "b", "c")
    world.observe_request(
        JOB, "CREATE_EXECUTION_GRAPH", "eg-1", {"runtime": "external", "slots": "a#0 a#1"}
    )
    actions = world.apply(command("RELEASE_TASK_MANAGERS", 4, "rel-1"), now=5)
    released = emitted(actions)
    assert [e.task_manager_id for e in released] == ["b", "c"]
    assert all(
        isinstance(e, TaskManagerLost) and "released by command rel-1" in e.reason for e in released
    )
    restarted = cluster()
    for event in released:
        restarted.observe_own(event, 0)
    assert restarted.applied["rel-1"] == ("b", "c")
    again = restarted.apply(command("RELEASE_TASK_MANAGERS", 4, "rel-1"), now=9000)
    assert emitted(again) == [] and dict(outcome(again).details) == {"taskManagers": "b,c"}


def test_a_release_a_crash_cut_short_stops_the_rest_of_its_choice_if_still_idle() -> None:
    def world() -> EmbeddedCluster:
        return with_taskmanagers(cluster(), 2, "a", "b", "c", "d")

    first = emitted(world().apply(command("RELEASE_TASK_MANAGERS", 6, "rel-1"), now=5))
    assert [e.task_manager_id for e in first] == ["a", "b", "c"]
    restarted = world()
    restarted.observe_own(first[0], 0)  # the crash came after the first loss went out
    restarted.observe_request(  # meanwhile c took tasks: it is not idle any more
        JOB, "CREATE_EXECUTION_GRAPH", "eg-2", {"runtime": "external", "slots": "c#0 d#0"}
    )
    again = restarted.apply(command("RELEASE_TASK_MANAGERS", 6, "rel-1"), now=9000)
    assert [e.task_manager_id for e in emitted(again)] == ["b"]
    assert dict(outcome(again).details) == {"taskManagers": "a,b"}


def test_nothing_idle_to_release_is_a_rejection_with_a_reason() -> None:
    world = with_taskmanagers(cluster(), 2, "a")
    world.observe_request(
        JOB, "CREATE_EXECUTION_GRAPH", "eg-1", {"runtime": "external", "slots": "a#0 a#1"}
    )
    result = outcome(world.apply(command("RELEASE_TASK_MANAGERS", 2), now=5))
    assert result.status == "REJECTED" and "no idle TaskManager" in result.message


def test_raising_the_cooldown_updates_the_jobs_configuration() -> None:
    actions = cluster().apply(command("RAISE_COOLDOWN", 120_000, "cool-1"), now=7)
    (update,) = emitted(actions)
    assert isinstance(update, ConfigurationUpdated) and update.command_id == "cool-1"
    assert dict(update.entries) == {
        "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling": "120000 ms"
    }


def test_commands_for_unknown_or_finished_jobs_are_rejected() -> None:
    world = cluster()
    world.observe_decision(JOB, decision("STATE_TRANSITION", target="Finished"), 0)
    assert outcome(world.apply(command("PROVISION_TASK_MANAGERS", 1), now=2)).status == "REJECTED"
    other = command("PROVISION_TASK_MANAGERS", 1, "x", job="ghost")
    assert outcome(cluster().apply(other, now=2)).status == "REJECTED"


def test_amounts_the_cluster_cannot_apply_are_rejected_with_the_reason() -> None:
    for action, amount in (
        ("PROVISION_TASK_MANAGERS", 10**12),
        ("PROVISION_TASK_MANAGERS", 0),
        ("RELEASE_TASK_MANAGERS", -1),
        ("RAISE_COOLDOWN", -5),
        ("RAISE_COOLDOWN", 10**15),
    ):
        actions = cluster().apply(command(action, amount), now=2)
        assert emitted(actions) == []
        result = outcome(actions)
        assert result.status == "REJECTED" and str(amount) in result.message


def test_the_runtime_answers_only_external_jobs_and_only_once() -> None:
    world = cluster()
    world.observe_request(JOB, "CREATE_EXECUTION_GRAPH", "eg-1", {"runtime": "simulated"})
    assert world.answer(JOB, "CREATE_EXECUTION_GRAPH", "eg-1", now=0) == []
    world.observe_request(
        JOB, "CREATE_EXECUTION_GRAPH", "eg-1", {"runtime": "external", "slots": ""}
    )
    (created,) = emitted(world.answer(JOB, "CREATE_EXECUTION_GRAPH", "eg-1", now=100))
    assert created.kind is JobEventKind.EXECUTION_GRAPH_CREATED and created.timestamp == 400
    world.observe_own(created, 0)
    assert world.answer(JOB, "CREATE_EXECUTION_GRAPH", "eg-1", now=500) == []


def test_checkpoints_run_at_the_jobs_interval_and_can_be_made_to_fail() -> None:
    world = running(cluster())
    assert world.checkpoints(now=9_999) == []
    (first,) = emitted(world.checkpoints(now=10_000))
    assert first.kind is JobEventKind.CHECKPOINT_COMPLETED
    assert first.checkpoint_id == EMBEDDED_CHECKPOINT_IDS + 1
    world.fail_checkpoints(JOB, 1)
    (second,) = emitted(world.checkpoints(now=20_000))
    assert second.kind is JobEventKind.CHECKPOINT_FAILED
    world.observe_request(JOB, "CANCEL_EXECUTION_GRAPH", "eg-1", {"runtime": "external"})
    assert world.checkpoints(now=40_000) == []


def test_checkpoint_ids_never_collide_with_a_producers() -> None:
    world = running(cluster())
    for producer_id in (1, 2, 7, 10**15):  # a user's own CHECKPOINT_COMPLETED events
        world.observe_own(
            JobLifecycle(JOB, 1, JobEventKind.CHECKPOINT_COMPLETED, checkpoint_id=producer_id), 0
        )
    ids = [e.checkpoint_id for e in emitted(world.checkpoints(now=10_000))]
    assert ids == [EMBEDDED_CHECKPOINT_IDS + 1]
    restarted = running(cluster())  # reads its own ids back and continues after them
    restarted.observe_own(emitted(world.checkpoints(now=20_000))[0], 0)
    (next_one,) = emitted(restarted.checkpoints(now=10_000))
    assert next_one.checkpoint_id == EMBEDDED_CHECKPOINT_IDS + 3


def test_a_tiny_checkpoint_interval_cannot_flood_and_missed_checkpoints_are_not_caught_up() -> None:
    world = EmbeddedCluster(TIMING)
    world.observe_decision(JOB, submitted(interval=1), 0)  # accepted by the scheduler: 1 ms
    running(world)
    emitted_at = [
        e.timestamp for now in range(0, 10_000, 10) for e in emitted(world.checkpoints(now))
    ]
    assert 9 <= len(emitted_at) <= 10  # once a second
    assert emitted(world.checkpoints(now=3_600_000)) != []  # an hour later: one, not 3,600
    assert len(emitted(world.checkpoints(now=3_600_010))) == 0


def test_simulated_work_is_paced_per_job_and_outcomes_follow_their_events() -> None:
    world = cluster()
    actions = world.pace(world.apply(command("PROVISION_TASK_MANAGERS", 64), now=0), now=0)
    dues = [a.due for a in actions if isinstance(a, Emit)]
    assert len(dues) == 32
    assert all(b - a >= TIMING.event_gap for a, b in itertools.pairwise(dues))
    assert all(e.timestamp == a.due for a in actions if isinstance(a, Emit) for e in [a.event])
    assert outcome(actions).due >= dues[-1]
    other = world.pace([Emit(0, JobLifecycle("other", 0, JobEventKind.TASK_FAILURE))], now=0)
    assert other[0].due == 0  # another job is not held up


def test_a_job_whose_events_lag_declines_requested_checkpoints() -> None:
    world = running(cluster())
    world.pace(world.apply(command("PROVISION_TASK_MANAGERS", 128), now=0), now=0)
    world.observe_request(JOB, "TRIGGER_CHECKPOINT", "eg-1", {"runtime": "external"})
    assert world.answer(JOB, "TRIGGER_CHECKPOINT", "eg-1", now=0) == []


def test_fault_targets_are_reproducible_with_a_seed() -> None:
    def victim(seed: int) -> str:
        world = with_taskmanagers(cluster(seed), 1, "a", "b", "c", "d")
        world.observe_request(
            JOB, "CREATE_EXECUTION_GRAPH", "eg-1", {"runtime": "external", "slots": "a#0 b#0 c#0"}
        )
        (victim_lost,) = emitted(world.kill_task_manager(JOB, now=1))
        return str(victim_lost.task_manager_id)

    assert victim(3) == victim(3)
    assert {victim(seed) for seed in range(20)} <= {
        "a",
        "b",
        "c",
    }  # only TaskManagers running tasks


def test_added_taskmanagers_get_fresh_ids_before_the_scheduler_confirms_them() -> None:
    world = cluster()
    events = emitted(world.add_task_managers(JOB, 2, 1, now=0))
    more = emitted(world.add_task_managers(JOB, 1, 1, now=1))
    assert [e.task_manager_id for e in events + more] == ["j-tm-1", "j-tm-2", "j-tm-3"]
    assert world.jobs[JOB].task_managers == {}  # until the scheduler's decisions say so
    assert "nobody" not in world.jobs and emitted(world.add_task_managers("nobody", 1, 1, 0))
    assert "nobody" not in world.jobs


# -- commands checked against the cluster before they act (evidence.py) ------------------------

ONE_SLOT = Timing(provisioning=3000, slots_per_taskmanager=1)


def declared(slots: int) -> dict[str, object]:
    """The scheduler's DECLARE_RESOURCES request, as the decisions topic carries it."""
    return {
        "category": "RUNTIME_REQUEST",
        "kind": "DECLARE_RESOURCES",
        "executionGraphId": None,
        "details": {"desired_slots": str(slots), "runtime": "simulated"},
    }


def planned(action: str, amount: int, command_id: str = "cmd-1", **seen: object) -> ScalingCommand:
    """A planner's command: what it saw of the job is its basis."""
    basis = CommandBasis(
        rescale_uuid="7d0e5b2a-91c4-5f63-8a1e-2c4b6d8f0a17",
        revision=3,
        state="WaitingForResources",
        observed_at_millis=0,
        decided_at_millis=0,
        fresh_as_of_millis=0,
        **seen,
    )
    return msgspec.structs.replace(command(action, amount, command_id), basis=basis)


def wanting(slots: int, spare: int = 0) -> EmbeddedCluster:
    world = cluster(timing=ONE_SLOT)
    world.spare_slots = spare
    world.observe_decision(JOB, declared(slots), 0)
    return world


def test_the_issue_a_provision_decided_on_0_slots_for_a_job_holding_4_is_superseded() -> None:
    """clicks wants 4 and brought its own 4 TaskManagers; a planner a minute behind saw it
    waiting with none and asked for 4 more: it would have ended with 8."""
    world = with_taskmanagers(wanting(4), 1, "tm-1", "tm-2", "tm-3", "tm-4")
    actions = world.apply(planned("PROVISION_TASK_MANAGERS", 4, available_slots=0), now=10)
    assert emitted(actions) == []
    result = outcome(actions)
    assert result.status == "SUPERSEDED"
    assert result.message.startswith("job j holds 4 slot(s) of registered TaskManagers and 0")
    assert dict(result.details) == {
        "heldSlots": "4",
        "startingSlots": "0",
        "seenSlots": "0",
        "neededSlots": "4",
    }


def test_a_second_provision_on_the_same_view_sees_the_first_ones_taskmanagers_starting() -> None:
    world = with_taskmanagers(wanting(4), 1, "tm-1")
    first = world.apply(planned("PROVISION_TASK_MANAGERS", 3, "p-1", available_slots=1), now=0)
    assert outcome(first).status == "APPLIED" and len(emitted(first)) == 3
    second = world.apply(planned("PROVISION_TASK_MANAGERS", 3, "p-2", available_slots=1), now=500)
    assert outcome(second).status == "SUPERSEDED" and emitted(second) == []
    assert dict(outcome(second).details)["startingSlots"] == "3"
    for event in emitted(first):  # the scheduler accepts them: held now, no longer starting
        world.observe_decision(JOB, registered(event.task_manager_id, 1), 0)
    assert world.facts(world.jobs[JOB], now=4_000).held_slots == 4
    assert world.facts(world.jobs[JOB], now=4_000).starting_slots == 0


def test_a_provisioned_taskmanager_nobody_registers_stops_counting_after_the_grace() -> None:
    world = wanting(4)
    world.apply(planned("PROVISION_TASK_MANAGERS", 2, "p-1", available_slots=0), now=0)
    job = world.jobs[JOB]
    assert world.facts(job, now=3_000 + 30_000).starting_slots == 2  # due at 3 s
    assert world.facts(job, now=3_000 + 30_001).starting_slots == 0


def test_a_restarted_cluster_knows_the_taskmanagers_on_their_way_from_its_own_events() -> None:
    first = wanting(4)
    events = emitted(
        first.apply(planned("PROVISION_TASK_MANAGERS", 2, "p-1", available_slots=0), now=0)
    )
    restarted = wanting(4)
    restarted.observe_decision(JOB, registered(events[0].task_manager_id, 1), 0)  # read first
    for event in events:
        restarted.observe_own(event, 0)
    facts = restarted.facts(restarted.jobs[JOB], now=3_000)
    assert (facts.held_slots, facts.starting_slots) == (1, 1)


def test_a_taskmanager_lost_before_its_registration_is_read_back_is_not_on_its_way() -> None:
    """A rebuild may fold a TaskManager's registration and loss from decisions before it
    reads its registration from job-events; read then, it is no TaskManager starting,
    and once job-events is read past its loss the job keeps nothing of it."""
    world = wanting(4)
    tm = provisioned_id(JOB, "p-1", 0)
    world.observe_decision(JOB, registered(tm, 1), 5)
    world.observe_decision(JOB, lost(tm, 1), 7)
    job = world.jobs[JOB]
    assert job.lost_unread == {tm: 7}
    world.observe_own(TaskManagerRegistered(JOB, 1_000, tm, 1, None), 5)
    assert world.facts(job, now=1_000).starting_slots == 0
    assert job.lost_unread == {tm: 7}  # read up to 5 only
    world.observe_own(TaskManagerLost(JOB, 2_000, tm, "gone"), 7)
    assert (job.lost_unread, world.provisioned.get(JOB, {})) == ({}, {})


def test_taskmanager_churn_leaves_nothing_behind_in_either_reading_order() -> None:
    """A month's TaskManager churn (1,000 provisioned and lost a day) is held by no
    live job once each is read from both topics, whichever comes first."""
    world, offset = wanting(4), itertools.count()
    for n in range(2_000):
        tm = provisioned_id(JOB, f"p-{n}", 0)
        registration, loss = next(offset), next(offset)
        events = [
            (TaskManagerRegistered(JOB, n, tm, 1, None), registration),
            (TaskManagerLost(JOB, n, tm, "gone"), loss),
        ]
        decisions = [(registered(tm, 1), registration), (lost(tm, 1), loss)]
        if n % 2:  # decisions read first, as a rebuild may
            for item, at in decisions:
                world.observe_decision(JOB, item, at)
            for event, at in events:
                world.observe_own(event, at)
        else:
            for (event, at), (item, at_) in zip(events, decisions, strict=True):
                world.observe_own(event, at)
                world.observe_decision(JOB, item, at_)
    job = world.jobs[JOB]
    assert (job.task_managers, job.lost_unread, world.provisioned.get(JOB, {})) == ({}, {}, {})


def test_a_provision_beyond_need_plus_spare_is_capped() -> None:
    world = with_taskmanagers(wanting(4, spare=1), 1, "tm-1")
    actions = world.apply(planned("PROVISION_TASK_MANAGERS", 8, available_slots=1), now=0)
    result = outcome(actions)
    assert result.status == "APPLIED" and len(emitted(actions)) == 4
    assert result.message == (
        "4 TaskManager(s) with 1 slot(s) each; capped from 8 to 4 slot(s): 1 held or "
        "starting, 4 needed + 1 spare"
    )


def test_a_capped_provision_cut_short_by_a_crash_starts_no_more_than_fits_after_it() -> None:
    world = wanting(3)
    command_ = planned("PROVISION_TASK_MANAGERS", 8, "p-1", available_slots=0)
    first = emitted(world.apply(command_, now=0))
    assert len(first) == 3  # capped to the 3 needed
    restarted = wanting(3)
    restarted.observe_own(first[0], 0)  # the crash came after the first went out
    again = restarted.apply(command_, now=1_000)
    assert [e.task_manager_id for e in emitted(again)] == ["j-cmd-p-1-1", "j-cmd-p-1-2"]


def test_the_need_follows_the_schedulers_latest_declaration() -> None:
    world = with_taskmanagers(wanting(4), 1, "tm-1", "tm-2")
    world.observe_decision(JOB, declared(2), 0)  # requirements lowered since
    result = outcome(world.apply(planned("PROVISION_TASK_MANAGERS", 2, available_slots=2), 0))
    assert result.status == "SUPERSEDED" and "already what its requirements need" in result.message


def test_a_release_of_slots_lost_since_is_superseded_and_stops_nothing() -> None:
    world = with_taskmanagers(wanting(2), 1, "tm-1", "tm-2", "tm-3")
    world.observe_decision(JOB, lost("tm-3", 1), 0)
    release = planned("RELEASE_TASK_MANAGERS", 1, available_slots=3, post_rescale_slots=2)
    actions = world.apply(release, now=0)
    assert emitted(actions) == [] and outcome(actions).status == "SUPERSEDED"


def test_a_second_cooldown_raise_decided_before_the_first_is_superseded() -> None:
    world = wanting(2)
    first = planned("RAISE_COOLDOWN", 60_000, "cool-1", cooldown_millis=30_000)
    assert outcome(world.apply(first, now=0)).status == "APPLIED"
    again = planned("RAISE_COOLDOWN", 60_000, "cool-2", cooldown_millis=30_000)
    result = outcome(world.apply(again, now=1))
    assert result.status == "SUPERSEDED" and "is 60000 ms now" in result.message
    restarted = wanting(2)  # knows its cooldown from its own update in the log
    restarted.observe_own(ConfigurationUpdated(JOB, 0, ((COOLDOWN_KEY, "60000 ms"),), "cool-1"), 0)
    assert restarted.facts(restarted.jobs[JOB], now=1).cooldown_millis == 60_000


def test_a_finished_job_supersedes_a_planners_command_and_rejects_an_operators() -> None:
    world = wanting(2)
    world.observe_decision(JOB, decision("STATE_TRANSITION", target="Finished"), 0)
    planners = outcome(world.apply(planned("PROVISION_TASK_MANAGERS", 1, available_slots=0), 0))
    assert planners.status == "SUPERSEDED" and "no longer runs" in planners.message
    operators = outcome(world.apply(command("PROVISION_TASK_MANAGERS", 1), 0))
    assert operators.status == "REJECTED"


def test_a_decisions_record_is_folded_once_in_its_jobs_order() -> None:
    """A restarted scheduler re-sends what it folds again, in the same order: a record at
    or below the last one seen of its job is a re-send; other jobs keep their own count."""
    world = EmbeddedCluster(TIMING)
    assert [world.fresh(JOB, offset) for offset in (3, 7, 3, 7, 5, 8)] == [
        True,
        True,
        False,
        False,
        False,
        True,
    ]
    assert world.fresh("other", 4) and not world.fresh("other", 4)


def test_a_released_job_is_forgotten_and_stays_so_until_a_new_job_takes_its_id() -> None:
    world = running(with_taskmanagers(cluster(), 2, "tm-1"))
    assert world.fresh(JOB, 10)
    world.observe_own(
        JobLifecycle(
            JOB, 1, JobEventKind.CHECKPOINT_COMPLETED, checkpoint_id=EMBEDDED_CHECKPOINT_IDS + 4
        ),
        9,
    )
    world.forget(JOB, 20)  # JOB_RELEASED, folded from offset 20
    assert JOB not in world.jobs and JOB not in world.own_checkpoints
    assert world.snapshot() == {}
    # What the log holds of it up to its release changes nothing: re-sent decisions, the
    # cluster's own events read back at a restart.
    assert not world.fresh(JOB, 15) and not world.fresh(JOB, 20)
    world.observe_own(
        JobLifecycle(
            JOB, 1, JobEventKind.CHECKPOINT_COMPLETED, checkpoint_id=EMBEDDED_CHECKPOINT_IDS + 5
        ),
        18,
    )
    assert JOB not in world.jobs and JOB not in world.own_checkpoints
    # A command for it is answered as for a finished job.
    assert (
        outcome(world.apply(command("PROVISION_TASK_MANAGERS", 1), now=0)).status.value
        == "REJECTED"
    )
    assert (
        outcome(world.apply(planned("PROVISION_TASK_MANAGERS", 1, "cmd-2"), now=0)).status.value
        == "SUPERSEDED"
    )
    # A job submitted again under its id, after its release, is a new one.
    assert world.fresh(JOB, 21)
    world.observe_decision(JOB, submitted(), 0)
    assert world.jobs[JOB].task_managers == {} and JOB not in world.released
