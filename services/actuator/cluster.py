"""The embedded cluster: TaskManagers and a job runtime, simulated, event-sourced.

The cluster's state is a function of two topics it observes: `job-events`
(jobs, TaskManagers, its own reports) and `decisions` (the scheduler's runtime
requests). It answers the requests of jobs whose scheduler runs with an
external runtime, after configurable delays, and it applies scaling commands.
Everything it does comes back as `Action`s (events to produce at a time,
outcomes to publish); the actuator service executes them. Every action is
recognisable in the log afterwards, so a restarted cluster that re-reads the
topics knows what it already did:

- a provisioned TaskManager's id embeds the command id,
- a released TaskManager's loss reason names the command,
- a cooldown update carries the command id,
- a runtime request is answered once its report (or a later request) is in the log.

Time is wall-clock milliseconds, passed in; randomness (fault targets, jitter)
comes from a seeded generator when asked.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field
from typing import Any

from services.contracts import jobconfig as c
from services.contracts.events import (
    ConfigurationUpdated,
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    TaskManagerLost,
    TaskManagerRegistered,
)
from services.contracts.ordering import natural_key

RELEASED = re.compile(r"released by command (\S+)")


@dataclass(frozen=True)
class Timing:
    """How long the simulated runtime takes, in milliseconds."""

    provisioning: int = 3_000
    creation: int = 300
    cancellation: int = 1_500
    triggered_checkpoint: int = 200
    savepoint: int = 500
    slots_per_taskmanager: int = 1


@dataclass(frozen=True)
class Emit:
    """Produce `event` to job-events at `due` (wall clock ms)."""

    due: int
    event: Event


@dataclass(frozen=True)
class Outcome:
    """Publish a command's outcome at `due`, after the events it waits for."""

    due: int
    command_id: str
    job_id: str
    action: str
    status: str  # APPLIED, REJECTED, FAILED
    message: str
    details: tuple[tuple[str, str], ...] = ()


Action = Emit | Outcome


@dataclass
class JobRuntime:
    """What the cluster knows of one job."""

    job_id: str
    checkpoint_interval: int | None = None
    task_managers: dict[str, int] = field(default_factory=dict)
    external: bool = False
    graph: str | None = None
    graph_slots: frozenset[str] = frozenset()
    status: str = "none"  # creating, running, cancelling, stopping, cancelled, finished
    answered: str | None = None  # the last request answered, "<graph>/<kind>"
    next_checkpoint: int | None = None
    checkpoint_id: int = 0
    failing_checkpoints: int = 0
    finished: bool = False

    def idle_task_managers(self) -> list[str]:
        used = {slot.split("#", 1)[0] for slot in self.graph_slots}
        return sorted((tm for tm in self.task_managers if tm not in used), key=natural_key)

    def busy_task_managers(self) -> list[str]:
        used = {slot.split("#", 1)[0] for slot in self.graph_slots}
        return sorted((tm for tm in self.task_managers if tm in used), key=natural_key)


@dataclass
class EmbeddedCluster:
    timing: Timing = Timing()
    seed: int | None = None
    jobs: dict[str, JobRuntime] = field(default_factory=dict)
    applied: set[str] = field(default_factory=set)  # command ids seen done in the log
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def job(self, job_id: str) -> JobRuntime:
        return self.jobs.setdefault(job_id, JobRuntime(job_id))

    # -- observing the log ---------------------------------------------------

    def observe(self, event: Event) -> None:
        """Fold one job event into what the cluster knows."""
        job = self.job(event.job_id)
        if isinstance(event, JobSubmitted):
            job.checkpoint_interval = event.checkpoint_interval_ms or None
        elif isinstance(event, TaskManagerRegistered):
            job.task_managers[event.task_manager_id] = event.slots
            if "-cmd-" in event.task_manager_id:
                self.applied.add(event.task_manager_id.split("-cmd-", 1)[1].rsplit("-", 1)[0])
        elif isinstance(event, TaskManagerLost):
            job.task_managers.pop(event.task_manager_id, None)
            if match := RELEASED.search(event.reason):
                self.applied.add(match.group(1))
        elif isinstance(event, ConfigurationUpdated) and event.command_id:
            self.applied.add(event.command_id)
        elif isinstance(event, JobLifecycle):
            self._observe_lifecycle(job, event)

    def _observe_lifecycle(self, job: JobRuntime, event: JobLifecycle) -> None:
        kind = event.kind
        if kind is JobEventKind.EXECUTION_GRAPH_CREATED:
            job.answered = f"{event.execution_graph_id}/CREATE_EXECUTION_GRAPH"
        elif kind is JobEventKind.EXECUTION_GRAPH_CANCELLED:
            job.answered = f"{event.execution_graph_id}/CANCEL_EXECUTION_GRAPH"
            job.status = "cancelled"
        elif kind is JobEventKind.CHECKPOINT_COMPLETED and event.checkpoint_id is not None:
            job.checkpoint_id = max(job.checkpoint_id, event.checkpoint_id)
        elif kind in (JobEventKind.FINISHED, JobEventKind.CANCEL, JobEventKind.SUSPEND):
            job.finished = kind is JobEventKind.FINISHED or job.finished

    def observe_request(
        self, job_id: str, kind: str, graph: str | None, details: dict[str, str]
    ) -> None:
        """Fold one runtime request (from the decisions topic) into what the cluster knows."""
        job = self.job(job_id)
        if details.get("runtime") != c.RuntimeMode.EXTERNAL:
            return
        job.external = True
        if kind == "CREATE_EXECUTION_GRAPH":
            job.graph, job.status = graph, "creating"
            job.graph_slots = frozenset(details.get("slots", "").split())
        elif kind == "DEPLOY":
            job.status = "running"
        elif kind == "CANCEL_EXECUTION_GRAPH":
            job.status = "cancelling"
            job.next_checkpoint = None
        elif kind == "STOP_WITH_SAVEPOINT":
            job.status = "stopping"
            job.next_checkpoint = None

    # -- answering the scheduler -------------------------------------------------

    def answer(self, job_id: str, kind: str, graph: str | None, now: int) -> list[Action]:
        """What the runtime does about the request it just observed (external jobs only)."""
        job = self.jobs.get(job_id)
        if job is None or not job.external or job.answered == f"{graph}/{kind}":
            return []
        answer = {
            "CREATE_EXECUTION_GRAPH": self._created,
            "DEPLOY": self._deployed,
            "CANCEL_EXECUTION_GRAPH": self._cancelled,
            "TRIGGER_CHECKPOINT": self._triggered,
            "STOP_WITH_SAVEPOINT": self._stopped,
        }.get(kind)
        return answer(job, now) if answer else []

    def _created(self, job: JobRuntime, now: int) -> list[Action]:
        due = now + self._jitter(self.timing.creation)
        kind = JobEventKind.EXECUTION_GRAPH_CREATED
        return [Emit(due, JobLifecycle(job.job_id, due, kind, execution_graph_id=job.graph))]

    def _deployed(self, job: JobRuntime, now: int) -> list[Action]:
        job.next_checkpoint = now + job.checkpoint_interval if job.checkpoint_interval else None
        return []

    def _cancelled(self, job: JobRuntime, now: int) -> list[Action]:
        due = now + self._jitter(self.timing.cancellation)
        kind = JobEventKind.EXECUTION_GRAPH_CANCELLED
        return [Emit(due, JobLifecycle(job.job_id, due, kind, execution_graph_id=job.graph))]

    def _triggered(self, job: JobRuntime, now: int) -> list[Action]:
        due = now + self.timing.triggered_checkpoint
        return [Emit(due, self._checkpoint(job, due))]

    def _stopped(self, job: JobRuntime, now: int) -> list[Action]:
        due = now + self.timing.savepoint
        path = f"embedded://{job.job_id}/{job.graph}"
        return [
            Emit(
                due,
                JobLifecycle(
                    job.job_id, due, JobEventKind.SAVEPOINT_COMPLETED, savepoint_path=path
                ),
            ),
            Emit(due, JobLifecycle(job.job_id, due, JobEventKind.FINISHED)),
        ]

    def checkpoints(self, now: int) -> list[Action]:
        """Periodic checkpoints of running external jobs that are due."""
        actions: list[Action] = []
        for job in self.jobs.values():
            if (
                job.status == "running"
                and job.next_checkpoint is not None
                and job.next_checkpoint <= now
            ):
                actions.append(
                    Emit(job.next_checkpoint, self._checkpoint(job, job.next_checkpoint))
                )
                job.next_checkpoint += job.checkpoint_interval or 0
        return actions

    def _checkpoint(self, job: JobRuntime, at: int) -> JobLifecycle:
        job.checkpoint_id += 1
        if job.failing_checkpoints > 0:
            job.failing_checkpoints -= 1
            return JobLifecycle(
                job.job_id,
                at,
                JobEventKind.CHECKPOINT_FAILED,
                checkpoint_id=job.checkpoint_id,
                exception="embedded cluster: checkpoint failure injected",
            )
        return JobLifecycle(
            job.job_id, at, JobEventKind.CHECKPOINT_COMPLETED, checkpoint_id=job.checkpoint_id
        )

    def _jitter(self, delay: int) -> int:
        return delay if self.seed is None else int(delay * self.rng.uniform(0.8, 1.2))

    # -- scaling commands ----------------------------------------------------------

    def apply(self, command: dict[str, Any], now: int) -> list[Action]:
        """Apply a scaling command once; actions include exactly one outcome."""
        command_id, job_id, action = command["commandId"], command["jobId"], command["action"]

        def outcome(due: int, status: str, message: str, **details: str) -> Outcome:
            return Outcome(
                due, command_id, job_id, action, status, message, tuple(sorted(details.items()))
            )

        if command_id in self.applied:
            return [outcome(now, "APPLIED", "already applied before a restart")]
        job = self.jobs.get(job_id)
        if job is None or job.finished:
            return [
                outcome(now, "REJECTED", f"job {job_id} is not running on the embedded cluster")
            ]
        if action == "PROVISION_TASK_MANAGERS":
            return self._provision(job, command, now, outcome)
        if action == "RELEASE_TASK_MANAGERS":
            return self._release(job, command, now, outcome)
        if action == "RAISE_COOLDOWN":
            self.applied.add(command_id)
            entries = ((c.COOLDOWN, f"{int(command['amount'])} ms"),)
            update = ConfigurationUpdated(job_id, now, entries, command_id)
            return [
                Emit(now, update),
                outcome(now, "APPLIED", f"cooldown raised to {int(command['amount']) / 1000:g} s"),
            ]
        return [outcome(now, "REJECTED", f"the embedded cluster cannot {action}")]

    def _provision(
        self, job: JobRuntime, command: dict[str, Any], now: int, outcome: Any
    ) -> list[Action]:
        per = self.timing.slots_per_taskmanager
        count = max(1, math.ceil(int(command["amount"]) / per))
        ids = [f"{job.job_id}-cmd-{command['commandId']}-{i}" for i in range(count)]
        due = now + self._jitter(self.timing.provisioning)
        self.applied.add(command["commandId"])
        events: list[Action] = [
            Emit(due, TaskManagerRegistered(job.job_id, due, tm, per, None)) for tm in ids
        ]
        message = f"{count} TaskManager(s) with {per} slot(s) each"
        return [*events, outcome(due, "APPLIED", message, taskManagers=",".join(ids))]

    def _release(
        self, job: JobRuntime, command: dict[str, Any], now: int, outcome: Any
    ) -> list[Action]:
        wanted, freed, chosen = int(command["amount"]), 0, []
        for tm in job.idle_task_managers():
            if freed + job.task_managers[tm] <= wanted:
                chosen.append(tm)
                freed += job.task_managers[tm]
        if not chosen:
            return [
                outcome(
                    now, "REJECTED", f"no idle TaskManager of {job.job_id} fits {wanted} slot(s)"
                )
            ]
        self.applied.add(command["commandId"])
        reason = f"released by command {command['commandId']}"
        lost: list[Action] = [
            Emit(now, TaskManagerLost(job.job_id, now, tm, reason)) for tm in chosen
        ]
        return [
            *lost,
            outcome(
                now,
                "APPLIED",
                f"released {len(chosen)} idle TaskManager(s), {freed} slot(s)",
                taskManagers=",".join(chosen),
            ),
        ]

    # -- faults and manual resources ---------------------------------------------------

    def add_task_managers(
        self, job_id: str, count: int, slots: int, now: int, prefix: str = "tm"
    ) -> list[Action]:
        job = self.job(job_id)
        taken = set(job.task_managers)
        ids: list[str] = []
        n = 0
        while len(ids) < count:
            n += 1
            candidate = f"{job_id}-{prefix}-{n}"
            if candidate not in taken:
                ids.append(candidate)
                taken.add(candidate)
        return [Emit(now, TaskManagerRegistered(job_id, now, tm, slots, None)) for tm in ids]

    def kill_task_manager(self, job_id: str, now: int, tm: str | None = None) -> list[Action]:
        job = self.jobs.get(job_id)
        candidates = (
            ([tm] if tm else job.busy_task_managers() or job.idle_task_managers()) if job else []
        )
        candidates = [t for t in candidates if job and t in job.task_managers]
        if not candidates:
            return []
        victim = self.rng.choice(candidates)
        return [Emit(now, TaskManagerLost(job_id, now, victim, "killed (fault injection)"))]

    def fail_task(self, job_id: str, now: int) -> list[Action]:
        return [
            Emit(
                now,
                JobLifecycle(
                    job_id,
                    now,
                    JobEventKind.TASK_FAILURE,
                    exception="embedded cluster: task failure injected",
                ),
            )
        ]

    def fail_checkpoints(self, job_id: str, count: int) -> list[Action]:
        self.job(job_id).failing_checkpoints += count
        return []

    def snapshot(self) -> dict[str, Any]:
        """The cluster as JSON, for /state and the CLI."""
        return {
            job.job_id: {
                "taskManagers": {
                    tm: job.task_managers[tm] for tm in sorted(job.task_managers, key=natural_key)
                },
                "external": job.external,
                "graph": job.graph,
                "status": job.status,
                "checkpoints": job.checkpoint_id,
                "failingCheckpoints": job.failing_checkpoints,
            }
            for job in sorted(self.jobs.values(), key=lambda j: j.job_id)
        }
