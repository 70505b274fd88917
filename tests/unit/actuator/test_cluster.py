"""The embedded cluster without Kafka: commands applied once, requests answered, faults."""

from __future__ import annotations

from services.actuator.cluster import EmbeddedCluster, Emit, Outcome, Timing
from services.contracts.events import (
    ConfigurationUpdated,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    TaskManagerLost,
    TaskManagerRegistered,
    VertexSpec,
)

JOB = "j"
TIMING = Timing(provisioning=3000, creation=300, cancellation=1500, slots_per_taskmanager=2)


def cluster(seed: int | None = None) -> EmbeddedCluster:
    world = EmbeddedCluster(TIMING, seed)
    world.observe(JobSubmitted(JOB, 0, "j", (VertexSpec("v", "V", "g", "g", 4, None),), 10_000, ()))
    return world


def command(action: str, amount: int, command_id: str = "cmd-1") -> dict[str, object]:
    return {"commandId": command_id, "jobId": JOB, "action": action, "amount": amount}


def emitted(actions: list[object]) -> list[object]:
    return [a.event for a in actions if isinstance(a, Emit)]


def outcome(actions: list[object]) -> Outcome:
    (result,) = [a for a in actions if isinstance(a, Outcome)]
    return result


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
    events = emitted(first.apply(command("PROVISION_TASK_MANAGERS", 2), now=0))
    restarted = cluster()  # a new process rebuilding from the log
    for event in events:
        restarted.observe(event)
    again = restarted.apply(command("PROVISION_TASK_MANAGERS", 2), now=9000)
    assert emitted(again) == []
    assert outcome(again).message == "already applied before a restart"


def test_release_takes_only_idle_taskmanagers_and_is_recognised_after_a_restart() -> None:
    world = cluster()
    for tm in ("a", "b", "c"):
        world.observe(TaskManagerRegistered(JOB, 0, tm, 2, None))
    world.observe_request(
        JOB, "CREATE_EXECUTION_GRAPH", "eg-1", {"runtime": "external", "slots": "a#0 a#1"}
    )
    actions = world.apply(command("RELEASE_TASK_MANAGERS", 4, "rel-1"), now=5)
    lost = emitted(actions)
    assert [e.task_manager_id for e in lost] == ["b", "c"]
    assert all(
        isinstance(e, TaskManagerLost) and "released by command rel-1" in e.reason for e in lost
    )
    restarted = cluster()
    for event in lost:
        restarted.observe(event)
    assert "rel-1" in restarted.applied


def test_nothing_idle_to_release_is_a_rejection_with_a_reason() -> None:
    world = cluster()
    world.observe(TaskManagerRegistered(JOB, 0, "a", 2, None))
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
    world.observe(JobLifecycle(JOB, 1, JobEventKind.FINISHED))
    assert outcome(world.apply(command("PROVISION_TASK_MANAGERS", 1), now=2)).status == "REJECTED"
    other = {"commandId": "x", "jobId": "ghost", "action": "PROVISION_TASK_MANAGERS", "amount": 1}
    assert outcome(cluster().apply(other, now=2)).status == "REJECTED"


def test_the_runtime_answers_only_external_jobs_and_only_once() -> None:
    world = cluster()
    world.observe_request(JOB, "CREATE_EXECUTION_GRAPH", "eg-1", {"runtime": "simulated"})
    assert world.answer(JOB, "CREATE_EXECUTION_GRAPH", "eg-1", now=0) == []
    world.observe_request(
        JOB, "CREATE_EXECUTION_GRAPH", "eg-1", {"runtime": "external", "slots": ""}
    )
    (created,) = emitted(world.answer(JOB, "CREATE_EXECUTION_GRAPH", "eg-1", now=100))
    assert created.kind is JobEventKind.EXECUTION_GRAPH_CREATED and created.timestamp == 400
    world.observe(created)
    assert world.answer(JOB, "CREATE_EXECUTION_GRAPH", "eg-1", now=500) == []


def test_checkpoints_run_at_the_jobs_interval_and_can_be_made_to_fail() -> None:
    world = cluster()
    world.observe_request(JOB, "DEPLOY", "eg-1", {"runtime": "external"})
    world.answer(JOB, "DEPLOY", "eg-1", now=0)
    assert world.checkpoints(now=9_999) == []
    (first,) = emitted(world.checkpoints(now=10_000))
    assert first.kind is JobEventKind.CHECKPOINT_COMPLETED and first.checkpoint_id == 1
    world.fail_checkpoints(JOB, 1)
    (second,) = emitted(world.checkpoints(now=20_000))
    assert second.kind is JobEventKind.CHECKPOINT_FAILED
    world.observe_request(JOB, "CANCEL_EXECUTION_GRAPH", "eg-1", {"runtime": "external"})
    assert world.checkpoints(now=40_000) == []


def test_fault_targets_are_reproducible_with_a_seed() -> None:
    def victim(seed: int) -> str:
        world = cluster(seed)
        for tm in ("a", "b", "c", "d"):
            world.observe(TaskManagerRegistered(JOB, 0, tm, 1, None))
        world.observe_request(
            JOB, "CREATE_EXECUTION_GRAPH", "eg-1", {"runtime": "external", "slots": "a#0 b#0 c#0"}
        )
        (lost,) = emitted(world.kill_task_manager(JOB, now=1))
        return str(lost.task_manager_id)

    assert victim(3) == victim(3)
    assert {victim(seed) for seed in range(20)} <= {
        "a",
        "b",
        "c",
    }  # only TaskManagers running tasks


def test_added_taskmanagers_get_fresh_ids() -> None:
    world = cluster()
    events = emitted(world.add_task_managers(JOB, 2, 1, now=0))
    for event in events:
        world.observe(event)
    more = emitted(world.add_task_managers(JOB, 1, 1, now=1))
    assert [e.task_manager_id for e in events + more] == ["j-tm-1", "j-tm-2", "j-tm-3"]
