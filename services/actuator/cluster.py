"""The embedded cluster: TaskManagers and a job runtime, simulated, event-sourced.

What the cluster knows of a job comes from what the scheduler *accepted*,
never from raw input it may have refused: the `decisions` topic says which
jobs were submitted (and their checkpoint interval), which TaskManagers
registered or were lost, which runtime requests the scheduler made, and when a
job finished. A second submission, a TaskManager with no slots, or events of a
job nobody submitted are dead-lettered by the scheduler and leave no trace
here. Only the cluster's *own* past actions are read back from `job-events`,
so that a restarted cluster knows what it already did:

- a provisioned TaskManager's id embeds the command id,
- a released TaskManager's loss reason names the command,
- a cooldown update carries the command id,
- a runtime request is answered once its report (or a later request) is in the log,
- its own checkpoints carry ids from `EMBEDDED_CHECKPOINT_IDS` up, a range no
  producer's ids reach, so the two never collide.

It answers the requests of jobs whose scheduler runs with an external runtime,
after configurable delays, and it applies scaling commands. A command that carries
its basis (the planner's) is checked first against what the cluster knows of the job
now (`facts`: the slots of its registered TaskManagers, those it provisioned that have
not registered yet, its requirements' need from the scheduler's DECLARE_RESOURCES
request, the cooldown it last set) and answered SUPERSEDED when the basis no longer
holds (evidence.py). Everything it does comes back as `Action`s (events to produce at
a time, outcomes to publish); the actuator service executes them. Its simulated work
is paced per job (`pace`): no input can make it flood the broker.

Time is wall-clock milliseconds, passed in; randomness (fault targets, jitter)
comes from a seeded generator when asked.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass, field, replace
from typing import Any

import msgspec

from services.actuator.evidence import Apply, JobFacts, Superseded, check
from services.contracts import jobconfig as c
from services.contracts import topics
from services.contracts.commands import OutcomeStatus, ScalingAction, ScalingCommand
from services.contracts.events import (
    RUNTIME_CHECKPOINT_IDS,
    ConfigurationUpdated,
    Event,
    JobEventKind,
    JobLifecycle,
    TaskManagerLost,
    TaskManagerRegistered,
)
from services.contracts.ordering import natural_key

MEMORY_MS = topics.COMMAND_OUTCOMES.retention_ms
"""How long the cluster keeps a command's and an ended job's entries, by default: as
long as `command-outcomes` keeps the command's outcome (15 days)."""
SWEEPS_PER_MEMORY = 360
RELEASED = re.compile(r"released by command (\S+)(?: of (\S+))?")
"""A release's loss reason: the command, and every TaskManager it chose (so a restart
can finish a release a crash cut short)."""


def provisioned_id(job_id: str, command_id: str, n: int) -> str:
    """The id of the n-th TaskManager a provisioning command starts for a job."""
    return f"{job_id}-cmd-{command_id}-{n}"


def provisioning_command(job_id: str, task_manager_id: str) -> str | None:
    """The command that started a TaskManager of the job, if `provisioned_id` named it
    (the job id is known, so a job id holding "-cmd-" cannot mislead the parse)."""
    prefix = f"{job_id}-cmd-"
    if not task_manager_id.startswith(prefix):
        return None
    command_id, dash, n = task_manager_id[len(prefix) :].rpartition("-")
    return command_id if dash and command_id and n.isdigit() else None


EMBEDDED_CHECKPOINT_IDS = RUNTIME_CHECKPOINT_IDS
"""The embedded runtime's checkpoint ids are this + 1, + 2, ...: a range of its own."""
_OWN_CHECKPOINT_SPAN = 10**17
MIN_CHECKPOINT_INTERVAL_MS = 1_000
"""The embedded runtime checkpoints a job at most once a second, whatever its interval."""
MAX_SLOTS_PER_COMMAND = 256
MAX_COOLDOWN_MS = 24 * 3600 * 1000
STARTING_GRACE_MS = 30_000
"""A provisioned TaskManager counts as starting until the scheduler's decisions name it, or
this long after its due time: one the scheduler refused (or never saw) stops counting."""
OWN_COOLDOWN = re.compile(r"^(\d+) ms$")


@dataclass(frozen=True)
class Timing:
    """How long the simulated runtime takes, in milliseconds."""

    provisioning: int = 3_000
    creation: int = 300
    cancellation: int = 1_500
    triggered_checkpoint: int = 200
    savepoint: int = 500
    slots_per_taskmanager: int = 1
    event_gap: int = 50
    """At least this long between two simulated events of one job (<= 20 per second)."""
    max_backlog: int = 1_000
    """A checkpoint is skipped while the job's paced events lag this far behind."""


REQUEST_HEADER = "scalefold-request"
"""The Kafka header naming the `scalefold cluster` request an event answers, so the
command can find that very event (and the scheduler's verdict on it) by its offset."""


@dataclass(frozen=True)
class Emit:
    """Produce `event` to job-events at `due` (wall clock ms)."""

    due: int
    event: Event
    request: str | None = None  # the control request it answers: REQUEST_HEADER


@dataclass(frozen=True)
class Outcome:
    """Publish a command's outcome at `due`, after the events it waits for."""

    due: int
    command_id: str
    job_id: str
    action: str  # the command's ScalingAction, as the outcome record's text
    status: OutcomeStatus
    message: str
    details: tuple[tuple[str, str], ...] = ()
    backend: str = "embedded"  # or flink:<cluster> (flinkbackend.py)


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
    checkpoint_id: int = 0  # the last of this runtime's own, counted from EMBEDDED_CHECKPOINT_IDS
    failing_checkpoints: int = 0
    finished: bool = False
    needed_slots: int | None = None  # its requirements' desired slots (DECLARE_RESOURCES)
    events_read: int = -1  # the offset of its last record read back from job-events
    lost_unread: dict[str, int] = field(default_factory=dict)
    """TaskManagers it provisioned that the decisions named lost before their registration
    may have been read back from job-events -> the lost decision's source offset. Read
    back later, such a registration is not one on its way; once job-events is read past
    that offset it has been, and the entry goes (`EmbeddedCluster.observe_own`)."""
    decided_through: int = -1  # the source offset of the last decisions record folded

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
    jobs: dict[str, JobRuntime] = field(default_factory=dict)  # jobs the scheduler accepted
    # command ids seen done in the log -> the TaskManagers each started or released
    applied: dict[str, tuple[str, ...]] = field(default_factory=dict)
    chosen: dict[str, tuple[str, ...]] = field(default_factory=dict)  # release -> its choice
    rng: random.Random = field(init=False)
    # Read back from the cluster's own events, before or after the job is known:
    answered: dict[str, str] = field(default_factory=dict)  # job -> "<graph>/<kind>"
    own_checkpoints: dict[str, int] = field(default_factory=dict)  # job -> last own id
    manual: dict[str, set[str]] = field(default_factory=dict)  # job -> TaskManagers added here
    paced_until: dict[str, int] = field(default_factory=dict)  # job -> its next free event slot
    # job -> provisioned TaskManager -> (due, slots), until the decisions name it
    provisioned: dict[str, dict[str, tuple[int, int]]] = field(default_factory=dict)
    cooldowns: dict[str, int] = field(default_factory=dict)  # job -> the cooldown it last set
    spare_slots: int = 0
    """Slots a job may hold beyond its requirements' need (`--spare-slots`)."""
    released: dict[str, int] = field(default_factory=dict)
    """Jobs the scheduler released (JOB_RELEASED) -> that record's source offset. Their
    runtime is forgotten, so the cluster holds what live jobs need (one entry here per
    ended job, until `sweep`); what the log holds of them up to that offset is theirs no
    longer."""
    memory_ms: int = MEMORY_MS
    """How long, on the log's clock, a command's and an ended job's entries are kept."""
    log_ms: int = 0  # the log's clock: the newest timestamp of the cluster's own events
    # When a sweep first saw each command id (applied, chosen) and each released job
    learned: dict[str, int] = field(default_factory=dict)
    released_at: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)

    def empty(self) -> EmbeddedCluster:
        """A cluster configured as this one, holding nothing yet."""
        return EmbeddedCluster(
            self.timing, self.seed, spare_slots=self.spare_slots, memory_ms=self.memory_ms
        )

    def job(self, job_id: str) -> JobRuntime:
        job = self.jobs.get(job_id)
        if job is None:
            job = self.jobs[job_id] = JobRuntime(job_id)
            job.answered = self.answered.get(job_id)
            job.checkpoint_id = self.own_checkpoints.get(job_id, 0)
        return job

    # -- what the scheduler accepted (the decisions topic) ---------------------

    def fresh(self, job_id: str, source_offset: int) -> bool:
        """Whether a SchedulerDecisions record is new, and if so note it as seen. A job's
        records come in the order of its inputs' offsets (one job-events partition,
        folded in order), and a restarted scheduler re-sends what it folds again in the
        same order, so a record at or below the last one seen of its job is a re-send; a
        released job's are old, unless past its release (a new job under that id)."""
        if source_offset <= self.released.get(job_id, -1):
            return False
        self.released.pop(job_id, None)
        self.released_at.pop(job_id, None)  # released again later: stamped anew
        job = self.job(job_id)
        if source_offset <= job.decided_through:
            return False
        job.decided_through = source_offset
        return True

    def fold_decisions(
        self, job_id: str, source_offset: int, items: list[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Fold one SchedulerDecisions record; return its runtime requests, which a live
        cluster answers (a rebuild folds them only: their answers are in the log)."""
        if not self.fresh(job_id, source_offset):
            return []  # re-sent by a restarted scheduler, or of a job released since
        requests = []
        for item in items:
            if item["kind"] == "JOB_RELEASED":  # nothing after it is the job's
                self.forget(job_id, source_offset)
                return []
            self.observe_decision(job_id, item, source_offset)
            if item["category"] == "RUNTIME_REQUEST":
                requests.append(item)
        return requests

    def forget(self, job_id: str, source_offset: int) -> None:
        """The scheduler released the job (JOB_RELEASED at `source_offset`): drop all the
        cluster holds of it but that fact."""
        self.jobs.pop(job_id, None)
        for held in (
            self.answered,
            self.own_checkpoints,
            self.manual,
            self.paced_until,
            self.provisioned,
            self.cooldowns,
        ):
            held.pop(job_id, None)
        self.released[job_id] = source_offset

    def observe_decision(self, job_id: str, item: dict[str, Any], source_offset: int) -> None:
        """Fold one item of a SchedulerDecisions record (of the job-events record at
        `source_offset`). The scheduler decides only for jobs it accepted, so any decision
        makes the job known here."""
        job = self.job(job_id)
        details = item.get("details") or {}
        kind = item["kind"]
        if item["category"] == "RUNTIME_REQUEST":
            if kind == "DECLARE_RESOURCES":  # any runtime: the job's need
                job.needed_slots = _int(details.get("desired_slots"))
            self.observe_request(job_id, kind, item.get("executionGraphId"), details)
        elif kind == "STATE_TRANSITION" and details.get("target") == "Created":
            interval = _int(details.get("checkpointIntervalMs"))
            job.checkpoint_interval = interval if interval and interval > 0 else None
        elif kind == "STATE_TRANSITION" and details.get("target") == "Finished":
            job.finished = True
        elif kind == "RESOURCES_CHANGED" and "taskManager" in details:
            tm = details["taskManager"]
            self.provisioned.get(job_id, {}).pop(tm, None)
            if details.get("change") == "lost":
                job.task_managers.pop(tm, None)
                if job.events_read < source_offset and provisioning_command(job_id, tm):
                    job.lost_unread[tm] = source_offset
            else:
                job.task_managers[tm] = _int(details.get("taskManagerSlots")) or 1

    # -- the cluster's own actions, read back from job-events -------------------

    def observe_own(self, event: Event, offset: int) -> None:
        """Recognise what the cluster itself did before a restart in one job event, at
        `offset` on its job-events partition (a released job's are not looked at)."""
        self._tick(event.timestamp)
        if offset <= self.released.get(event.job_id, -1):
            return
        job = self.jobs.get(event.job_id)
        if job is not None:
            job.events_read = offset
        if isinstance(event, TaskManagerRegistered):
            tm = event.task_manager_id
            if command_id := provisioning_command(event.job_id, tm):
                self._applied(command_id, tm)
                if job is None or tm not in job.lost_unread:
                    self._on_its_way(event.job_id, tm, event.timestamp, event.slots)
        elif isinstance(event, TaskManagerLost):
            if match := RELEASED.search(event.reason):
                self._applied(match.group(1), event.task_manager_id)
                if match.group(2):
                    self.chosen[match.group(1)] = tuple(match.group(2).split(","))
        elif isinstance(event, ConfigurationUpdated) and event.command_id:
            self._applied(event.command_id)
            if match := OWN_COOLDOWN.match(dict(event.entries).get(c.COOLDOWN, "")):
                self.cooldowns[event.job_id] = int(match.group(1))
        elif isinstance(event, JobLifecycle):
            self._observe_report(event)
        if job is not None and job.lost_unread:  # read past: each registration was read
            job.lost_unread = {tm: at for tm, at in job.lost_unread.items() if at > offset}

    def _on_its_way(self, job_id: str, tm: str, due: int, slots: int) -> None:
        """Count a TaskManager it provisioned as starting until the decisions name it."""
        job = self.jobs.get(job_id)
        if job is None or tm not in job.task_managers:  # its registration not decided on yet
            self.provisioned.setdefault(job_id, {})[tm] = (due, slots)

    def facts(self, job: JobRuntime, now: int) -> JobFacts:
        """What the cluster knows of the job now, for a command's check (evidence.py)."""
        starting = self.provisioned.get(job.job_id, {}).values()
        return JobFacts(
            held_slots=sum(job.task_managers.values()),
            starting_slots=sum(s for due, s in starting if now <= due + STARTING_GRACE_MS),
            needed_slots=job.needed_slots,
            running=not job.finished,
            cooldown_millis=self.cooldowns.get(job.job_id),
            holder=f"job {job.job_id}",
        )

    def _tick(self, timestamp: int) -> None:
        """Advance the log's clock; sweep each time it enters a new sweep interval."""
        if timestamp > self.log_ms:
            due = self.log_ms // self.sweep_ms() < timestamp // self.sweep_ms()
            self.log_ms = timestamp
            if due:
                self.sweep()

    def sweep_ms(self) -> int:
        return max(1, self.memory_ms // SWEEPS_PER_MEMORY)

    def sweep(self) -> None:
        """Forget the commands and the released jobs a sweep first saw `memory_ms` ago on
        the log's clock. A command is gone from `commands` and its outcome from
        `command-outcomes` by then (MEMORY_MS, the default), so it cannot come again, and a
        restarted actuator would not know it either; a released job's decisions are
        re-sent only from the scheduler's last commit, seconds old, never a fortnight.
        Stamping at the sweep, not where each is learned, keeps every path that learns
        one (a command applied, read back, restored from an older snapshot) as it was; a
        fact is kept up to a sweep's interval (1/360 of the memory) longer than asked."""
        now = self.log_ms
        for held, seen in ((self.applied, self.learned), (self.released, self.released_at)):
            for key in held.keys() - seen.keys():
                seen[key] = now
            for key in [key for key, at in seen.items() if now - at >= self.memory_ms]:
                held.pop(key, None)
                seen.pop(key)
                if held is self.applied:
                    self.chosen.pop(key, None)

    def _applied(self, command_id: str, *task_managers: str) -> None:
        seen = self.applied.get(command_id, ())
        self.applied[command_id] = (*seen, *(tm for tm in task_managers if tm not in seen))

    def _observe_report(self, event: JobLifecycle) -> None:
        kind, job = event.kind, self.jobs.get(event.job_id)
        if kind in (JobEventKind.EXECUTION_GRAPH_CREATED, JobEventKind.EXECUTION_GRAPH_CANCELLED):
            request = (
                "CREATE_EXECUTION_GRAPH"
                if kind is JobEventKind.EXECUTION_GRAPH_CREATED
                else "CANCEL_EXECUTION_GRAPH"
            )
            self.answered[event.job_id] = f"{event.execution_graph_id}/{request}"
            if job is not None:
                job.answered = self.answered[event.job_id]
        elif (
            kind in (JobEventKind.CHECKPOINT_COMPLETED, JobEventKind.CHECKPOINT_FAILED)
            and event.checkpoint_id is not None
        ):
            own = event.checkpoint_id - EMBEDDED_CHECKPOINT_IDS
            if 0 < own < _OWN_CHECKPOINT_SPAN:
                last = max(self.own_checkpoints.get(event.job_id, 0), own)
                self.own_checkpoints[event.job_id] = last
                if job is not None:
                    job.checkpoint_id = max(job.checkpoint_id, last)

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
        interval = self.interval_of(job)
        job.next_checkpoint = now + interval if interval else None
        return []

    @staticmethod
    def interval_of(job: JobRuntime) -> int | None:
        """The job's checkpoint interval on this runtime: at least once a second."""
        if not job.checkpoint_interval:
            return None
        return max(job.checkpoint_interval, MIN_CHECKPOINT_INTERVAL_MS)

    def _cancelled(self, job: JobRuntime, now: int) -> list[Action]:
        due = now + self._jitter(self.timing.cancellation)
        kind = JobEventKind.EXECUTION_GRAPH_CANCELLED
        return [Emit(due, JobLifecycle(job.job_id, due, kind, execution_graph_id=job.graph))]

    def _triggered(self, job: JobRuntime, now: int) -> list[Action]:
        if self._lagging(job.job_id, now):
            return []  # declined: the job's events lag; a periodic checkpoint follows
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
        """Periodic checkpoints of running external jobs that are due; missed ones are
        skipped, not caught up (a runtime that was away does not checkpoint the past)."""
        actions: list[Action] = []
        for job in self.jobs.values():
            interval = self.interval_of(job)
            if (
                job.status != "running"
                or interval is None
                or job.next_checkpoint is None
                or job.next_checkpoint > now
            ):
                continue
            if not self._lagging(job.job_id, now):
                actions.append(Emit(now, self._checkpoint(job, now)))
            job.next_checkpoint = max(job.next_checkpoint + interval, now + interval)
        return actions

    def _checkpoint(self, job: JobRuntime, at: int) -> JobLifecycle:
        job.checkpoint_id += 1
        self.own_checkpoints[job.job_id] = job.checkpoint_id
        checkpoint_id = EMBEDDED_CHECKPOINT_IDS + job.checkpoint_id
        if job.failing_checkpoints > 0:
            job.failing_checkpoints -= 1
            return JobLifecycle(
                job.job_id,
                at,
                JobEventKind.CHECKPOINT_FAILED,
                checkpoint_id=checkpoint_id,
                exception="embedded cluster: checkpoint failure injected",
            )
        return JobLifecycle(
            job.job_id, at, JobEventKind.CHECKPOINT_COMPLETED, checkpoint_id=checkpoint_id
        )

    # -- pacing -----------------------------------------------------------------------

    def pace(self, actions: list[Action], now: int) -> list[Action]:
        """`actions` with each job's events at least `event_gap` apart, in order; an
        outcome is due no earlier than the events it reports on."""
        paced: list[Action] = []
        latest: dict[str, int] = {}
        gap = self.timing.event_gap
        for action in actions:
            if isinstance(action, Emit):
                job_id = action.event.job_id
                due = max(action.due, self.paced_until.get(job_id, 0))
                self.paced_until[job_id] = due + gap
                latest[job_id] = max(latest.get(job_id, 0), due)
                moved: Action = (
                    action
                    if due == action.due
                    else replace(action, due=due, event=_at(action.event, due))
                )
            else:
                moved = replace(action, due=max(action.due, latest.get(action.job_id, 0)))
            paced.append(moved)
        for job_id in [j for j, until in self.paced_until.items() if until < now]:
            del self.paced_until[job_id]  # idle jobs: keep the map small
        return paced

    def _lagging(self, job_id: str, now: int) -> bool:
        return self.paced_until.get(job_id, 0) > now + self.timing.max_backlog

    def _jitter(self, delay: int) -> int:
        return delay if self.seed is None else int(delay * self.rng.uniform(0.8, 1.2))

    # -- scaling commands ----------------------------------------------------------

    def apply(self, command: ScalingCommand, now: int) -> list[Action]:
        """Apply a scaling command once; actions include exactly one outcome."""
        command_id, job_id, action = command.command_id, command.job_id, command.action

        def outcome(due: int, status: OutcomeStatus, message: str, **details: str) -> Outcome:
            return Outcome(
                due, command_id, job_id, action, status, message, tuple(sorted(details.items()))
            )

        job = self.jobs.get(job_id)
        if job is None and job_id in self.released:  # answered as a finished job is
            job = JobRuntime(job_id, finished=True)
        if command_id in self.applied:
            return self._applied_before(job, command, now, outcome)
        refusal = (
            f"job {job_id} is not running on the embedded cluster"
            if job is None or (job.finished and command.basis is None)
            else _invalid_amount(action, command.amount)
        )
        if refusal is not None or job is None:
            return [outcome(now, OutcomeStatus.REJECTED, refusal or "")]
        verdict = check(command, self.facts(job, now), self.spare_slots)
        if isinstance(verdict, Superseded):
            details = dict(verdict.details)
            return [outcome(now, OutcomeStatus.SUPERSEDED, verdict.message, **details)]
        return self._act(job, command, verdict, now, outcome)

    def _act(
        self, job: JobRuntime, command: ScalingCommand, verdict: Apply, now: int, outcome: Any
    ) -> list[Action]:
        """Apply a command that passed its check, with the verdict's amount."""
        action = command.action
        if action is ScalingAction.PROVISION_TASK_MANAGERS:
            capped = msgspec.structs.replace(command, amount=verdict.amount)
            return self._provision(job, capped, now, outcome, verdict.note)
        if action is ScalingAction.RELEASE_TASK_MANAGERS:
            return self._release(job, command, now, outcome)
        if action is ScalingAction.RAISE_COOLDOWN:
            self._applied(command.command_id)
            self.cooldowns[job.job_id] = command.amount
            entries = ((c.COOLDOWN, f"{command.amount} ms"),)
            update = ConfigurationUpdated(job.job_id, now, entries, command.command_id)
            raised = f"cooldown raised to {command.amount / 1000:g} s"
            return [Emit(now, update), outcome(now, OutcomeStatus.APPLIED, raised)]
        return [outcome(now, OutcomeStatus.REJECTED, f"the embedded cluster cannot {action}")]

    def _applied_before(
        self, job: JobRuntime | None, command: ScalingCommand, now: int, outcome: Any
    ) -> list[Action]:
        """The outcome of a command applied before a restart, with the TaskManagers it
        started or released as read back from job-events. A command's TaskManagers go out
        `event_gap` apart, so a crash can cut it short: the rest go out now (a release
        stops only those of its choice that are still idle)."""
        command_id, action = command.command_id, command.action
        done = self.applied[command_id]
        events: list[Action] = []
        if job is not None and not job.finished and action is ScalingAction.PROVISION_TASK_MANAGERS:
            per = self.timing.slots_per_taskmanager
            started = [tm for tm in self._provision_ids(job, command) if tm not in done]
            started = started[: self._room(job, command, now)]
            events = [
                Emit(now, TaskManagerRegistered(job.job_id, now, tm, per, None)) for tm in started
            ]
            for tm in started:
                self._on_its_way(job.job_id, tm, now, per)
            self._applied(command_id, *started)
        elif job is not None and action is ScalingAction.RELEASE_TASK_MANAGERS:
            chosen, idle = self.chosen.get(command_id, ()), set(job.idle_task_managers())
            stopped = [tm for tm in chosen if tm not in done and tm in idle]
            reason = self._released_reason(command_id, chosen)
            events = [Emit(now, TaskManagerLost(job.job_id, now, tm, reason)) for tm in stopped]
            self._applied(command_id, *stopped)
        message = "already applied before a restart"
        if events:
            message += f"; the {len(events)} TaskManager(s) the restart cut off followed"
        done = self.applied[command_id]
        details = {"taskManagers": ",".join(done)} if done else {}
        return [*events, outcome(now, OutcomeStatus.APPLIED, message, **details)]

    @staticmethod
    def _released_reason(command_id: str, chosen: tuple[str, ...] | list[str]) -> str:
        return f"released by command {command_id} of {','.join(chosen)}"

    def _provision_ids(self, job: JobRuntime, command: ScalingCommand) -> list[str]:
        count = max(1, math.ceil(command.amount / self.timing.slots_per_taskmanager))
        return [provisioned_id(job.job_id, command.command_id, i) for i in range(count)]

    def _room(self, job: JobRuntime, command: ScalingCommand, now: int) -> int | None:
        """How many more TaskManagers a provision with a basis may start now, redone after
        a restart (its capped amount is not in the log): what fits under need + spare."""
        facts = self.facts(job, now)
        basis = command.basis
        need = facts.needed_slots
        need = basis.desired_slots if need is None and basis is not None else need
        if basis is None or need is None:
            return None
        room = need + self.spare_slots - facts.held_slots - facts.starting_slots
        return max(0, math.ceil(room / self.timing.slots_per_taskmanager))

    def _provision(
        self, job: JobRuntime, command: ScalingCommand, now: int, outcome: Any, note: str = ""
    ) -> list[Action]:
        per = self.timing.slots_per_taskmanager
        ids = self._provision_ids(job, command)
        count = len(ids)
        due = now + self._jitter(self.timing.provisioning)
        self._applied(command.command_id, *ids)
        for tm in ids:
            self._on_its_way(job.job_id, tm, due, per)
        events: list[Action] = [
            Emit(due, TaskManagerRegistered(job.job_id, due, tm, per, None)) for tm in ids
        ]
        message = f"{count} TaskManager(s) with {per} slot(s) each" + (f"; {note}" if note else "")
        return [*events, outcome(due, OutcomeStatus.APPLIED, message, taskManagers=",".join(ids))]

    def _release(
        self, job: JobRuntime, command: ScalingCommand, now: int, outcome: Any
    ) -> list[Action]:
        wanted, freed, chosen = command.amount, 0, []
        for tm in job.idle_task_managers():
            if freed + job.task_managers[tm] <= wanted:
                chosen.append(tm)
                freed += job.task_managers[tm]
        if not chosen:
            return [
                outcome(
                    now,
                    OutcomeStatus.REJECTED,
                    f"no idle TaskManager of {job.job_id} fits {wanted} slot(s)",
                )
            ]
        self._applied(command.command_id, *chosen)
        self.chosen[command.command_id] = tuple(chosen)
        reason = self._released_reason(command.command_id, chosen)
        lost: list[Action] = [
            Emit(now, TaskManagerLost(job.job_id, now, tm, reason)) for tm in chosen
        ]
        return [
            *lost,
            outcome(
                now,
                OutcomeStatus.APPLIED,
                f"released {len(chosen)} idle TaskManager(s), {freed} slot(s)",
                taskManagers=",".join(chosen),
            ),
        ]

    # -- faults and manual resources ---------------------------------------------------

    def add_task_managers(
        self, job_id: str, count: int, slots: int, now: int, prefix: str = "tm"
    ) -> list[Action]:
        """Start TaskManagers for a job (the scheduler decides whether they count)."""
        known = self.jobs.get(job_id)
        mine = self.manual.setdefault(job_id, set())
        taken = mine | set(known.task_managers if known else ())
        ids: list[str] = []
        n = 0
        while len(ids) < max(0, count):
            n += 1
            candidate = f"{job_id}-{prefix}-{n}"
            if candidate not in taken:
                ids.append(candidate)
                taken.add(candidate)
        mine.update(ids)
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
        job = self.jobs.get(job_id)
        if job is not None:
            job.failing_checkpoints += max(0, count)
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
                "neededSlots": job.needed_slots,
            }
            for job in sorted(self.jobs.values(), key=lambda j: j.job_id)
        }


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def _at(event: Event, due: int) -> Event:
    """The event, moved to `due` (its timestamp is when it happens)."""
    return replace(event, timestamp=due)


def _invalid_amount(action: ScalingAction, amount: int) -> str | None:
    """Why a command's amount cannot be applied, or None."""
    if action is ScalingAction.RAISE_COOLDOWN:
        if not 0 < amount <= MAX_COOLDOWN_MS:
            return f"a cooldown of {amount} ms is not between 1 ms and {MAX_COOLDOWN_MS} ms"
    elif not 0 < amount <= MAX_SLOTS_PER_COMMAND:
        return f"{amount} slots is not between 1 and {MAX_SLOTS_PER_COMMAND} per command"
    return None
