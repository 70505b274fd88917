"""The actuator's Flink backend: scaling commands applied to a real Flink 2.3 cluster.

A job observed on a real Flink is `<cluster>.<Flink job id>` in scalefold
(`topics.flink_job_key`); its commands come here when the actuator has a backend for
that cluster (`scalefold actuator --flink-rest NAME=URL` or `--flink-local NAME=DIR`).
The embedded cluster stays every other job's backend.

- PROVISION_TASK_MANAGERS starts TaskManagers through the launcher (launcher.py), named
  `tm-<commandId>-<n>`, and waits until Flink lists them; redone after a crash, it starts
  only those never started. A launcher's cap (quota.py) holds back what would make more
  TaskManagers run than it allows: REJECTED when none fits.
- RELEASE_TASK_MANAGERS stops TaskManagers the launcher runs that hold no slot:
  `/taskmanagers` picks the idle candidates, and each is checked again on
  `/taskmanagers/:id` (`allocatedSlots`) just before its stop, so a TaskManager a job
  (running, or waiting for resources) holds a slot of is never taken. The choice is
  remembered before the first stop: redone after a crash, it stops the same ones.
- SET_PARALLELISM goes through `PUT /jobs/:jobid/resource-requirements` (FLIP-291) as
  the Flink Kubernetes Operator's autoscaler does it: GET the requirements, set each
  target vertex's upperBound to the target and its lowerBound to min(target, current
  lower bound), PUT the whole map (Flink refuses a map that leaves a vertex out). A
  command that carries the requirements its decision saw (`expected_requirements`, the
  history's autoscaler's) is SUPERSEDED when Flink's differ: someone else changed them
  since, and their change is not overwritten.
- RAISE_COOLDOWN is REJECTED with the reason: Flink reads the cooldown once.

A PROVISION or RELEASE that carries its basis (the planner's) is checked first against
what Flink shows now (flinkfacts.py: the job's state and requirements' need, the
cluster's registered slots, the launcher's TaskManagers not listed yet) and answered
SUPERSEDED with the contradicting fact when its basis no longer holds, or a provision
capped at need + `spare_slots` (evidence.py); a job that ended since supersedes any
command with a basis.

Flink refusing (4xx, 5xx), not answering in time or unreachable gives one FAILED outcome
with Flink's answer; nothing here raises out of `apply`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from services.actuator import quota
from services.actuator.evidence import Apply, JobFacts, Superseded, Verdict, check
from services.actuator.flinkfacts import flink_facts
from services.actuator.launcher import Launcher
from services.contracts.commands import (
    ExpectedBounds,
    OutcomeStatus,
    ScalingAction,
    ScalingCommand,
)
from services.contracts.flinkrest import (
    ERROR_BODY_LIMIT,
    FlinkNotFoundError,
    FlinkRest,
    FlinkRestError,
    FlinkTlsError,
    FlinkUnreachableError,
    flink_errors,
)

log = logging.getLogger("scalefold.actuator.flink")

MAX_TASKMANAGERS_PER_COMMAND = 16
"""Real processes (700 MB each on the local stack): a command starts at most this many."""
TERMINAL_JOB_STATES = frozenset({"FINISHED", "FAILED", "CANCELED", "SUSPENDED"})
COOLDOWN_REASON = (
    "Flink cannot change a running job's cooldown: the adaptive scheduler reads "
    "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling once, when the job "
    "starts, and Flink 2.3's REST API has no call that changes it; resubmit the job "
    "with the new value"
)


@dataclass(frozen=True)
class Result:
    """What became of one command: APPLIED, REJECTED (with why), FAILED (Flink's answer) or
    SUPERSEDED (the fact that contradicts its basis)."""

    status: OutcomeStatus
    message: str
    details: tuple[tuple[str, str], ...] = ()


def flink_job_id(cluster: str, job_id: str) -> str | None:
    """The Flink job id of scalefold's `<cluster>.<jid>`, or None for another cluster's job."""
    prefix, dot, jid = job_id.partition(".")
    return jid if dot and prefix == cluster and jid else None


def autoscaler_bounds(
    current: Mapping[str, Any], targets: Mapping[str, int]
) -> dict[str, tuple[int, int]]:
    """Every vertex's (lower, upper) after the targets, the Kubernetes Operator's way:
    upper = target, lower = min(target, current lower); untargeted vertices keep theirs."""
    bounds = {}
    for vertex, wanted in current.items():
        lower, upper = wanted["parallelism"]["lowerBound"], wanted["parallelism"]["upperBound"]
        if vertex in targets:
            lower, upper = min(targets[vertex], lower), targets[vertex]
        bounds[vertex] = (int(lower), int(upper))
    return bounds


def changed_requirements(
    current: Mapping[str, Any], expected: Mapping[str, ExpectedBounds]
) -> list[tuple[str, str, str]]:
    """The vertices whose bounds differ from those a command expected: (vertex, expected
    `lower:upper`, Flink's now; `-` for a vertex one side lacks)."""
    now = {
        vertex: f"{wanted['parallelism']['lowerBound']}:{wanted['parallelism']['upperBound']}"
        for vertex, wanted in current.items()
    }
    was = {vertex: f"{b.lower_bound}:{b.upper_bound}" for vertex, b in expected.items()}
    return [
        (vertex, was.get(vertex, "-"), now.get(vertex, "-"))
        for vertex in sorted(now.keys() | was.keys())
        if was.get(vertex) != now.get(vertex)
    ]


def parallelism_targets(command: ScalingCommand, vertices: list[str]) -> dict[str, int]:
    """The command's target per vertex: its `parallelism` map, and `amount` (when >= 1)
    for every vertex the map does not name."""
    named = dict(command.parallelism)
    amount = command.amount
    rest = {vertex: amount for vertex in vertices if vertex not in named and amount >= 1}
    return {**named, **rest}


def idle_choice(listed: Sequence[Mapping[str, Any]], ours: set[str], slots: int) -> list[str]:
    """Idle TaskManagers the launcher runs, newest first, while their slots fit `slots`."""
    idle = [
        tm for tm in listed if tm.get("id") in ours and tm.get("freeSlots") == tm.get("slotsNumber")
    ]
    chosen, freed = [], 0
    for tm in sorted(idle, key=lambda tm: str(tm["id"]), reverse=True):
        if freed + int(tm["slotsNumber"]) <= slots:
            chosen.append(str(tm["id"]))
            freed += int(tm["slotsNumber"])
    return chosen


def holds_slots(details: Mapping[str, Any]) -> bool:
    """Whether `/taskmanagers/:id` shows a slot allocated to any job (free is all free)."""
    allocated = details.get("allocatedSlots")
    if isinstance(allocated, list):
        return bool(allocated)
    return details.get("freeSlots") != details.get("slotsNumber")


def flink_answer(error: FlinkRestError) -> str:
    """The outcome's words for a failed call: what Flink said (each error's first line,
    the server-side exception's too), or that it did not answer."""
    if isinstance(error, FlinkTlsError):
        return f"Flink's REST endpoint was not trusted: {error}"
    if isinstance(error, FlinkUnreachableError):
        return f"Flink did not answer: {error}"
    said = [
        line
        for entry in flink_errors(getattr(error, "body", b"") or b"")
        for line in entry.replace("<Exception on server side:", "").strip().splitlines()[:1]
    ]
    if not said:
        return f"Flink refused: {error}"
    return f"Flink refused ({error.url}): {'; '.join(said)}"[:ERROR_BODY_LIMIT]


class FlinkBackend:
    """One Flink cluster's REST endpoint and, if it has one, its TaskManager launcher."""

    def __init__(
        self,
        name: str,
        rest_url: Callable[[], str | None],
        launcher: Launcher | None,
        timeout: float = 10.0,
        register_timeout: float = 180.0,
        *,
        ca: Callable[[], Path | None] = lambda: None,
        spare_slots: int = 0,
    ) -> None:
        self.name, self.rest_url, self.launcher = name, rest_url, launcher
        self.timeout, self.register_timeout = timeout, register_timeout
        self.ca = ca  # the PEM CA an https endpoint must verify against (None: the system's)
        self.spare_slots = spare_slots  # slots a job may hold beyond its need (evidence.py)

    @property
    def label(self) -> str:
        """The outcome's `backend`: which Flink cluster handled the command."""
        return f"flink:{self.name}"

    def handles(self, job_id: str) -> bool:
        return flink_job_id(self.name, job_id) is not None

    def apply(self, command: ScalingCommand) -> Result:
        """Apply one command; every failure becomes a FAILED result, never an exception."""
        failed = OutcomeStatus.FAILED
        try:
            return self._apply(command)
        except FlinkRestError as error:
            return Result(failed, flink_answer(error), (("flink", self.name),))
        except Exception as error:  # a launcher's OSError, a bad answer's shape: said, not raised
            log.exception("command %s on Flink cluster %s", command.command_id, self.name)
            return Result(failed, f"{type(error).__name__}: {error}", (("flink", self.name),))

    def _rest(self) -> FlinkRest:
        url = self.rest_url()
        if url is None:
            raise FlinkRestError(f"flink:{self.name}", "no REST URL (is its JobManager started?)")
        return FlinkRest(url, self.timeout, self.ca())

    def _apply(self, command: ScalingCommand) -> Result:
        action, jid = command.action, flink_job_id(self.name, command.job_id)
        assert jid is not None, "routed here by handles()"
        if action is ScalingAction.RAISE_COOLDOWN:
            return Result(OutcomeStatus.REJECTED, COOLDOWN_REASON)
        rest = self._rest()
        job = rest.job(jid)
        state = job.get("state")
        if state in TERMINAL_JOB_STATES:
            if command.basis is None:
                return Result(OutcomeStatus.REJECTED, f"Flink's job {jid} is {state}")
            ended = JobFacts(0, running=False, holder=f"Flink's job {jid} ({state})")
            return self._superseded(check(command, ended))
        if action is ScalingAction.SET_PARALLELISM:
            return self._set_parallelism(rest, jid, command)
        if action in (ScalingAction.PROVISION_TASK_MANAGERS, ScalingAction.RELEASE_TASK_MANAGERS):
            return self._taskmanagers(rest, jid, job, command)
        return Result(OutcomeStatus.REJECTED, f"the Flink backend cannot {action}")

    def _taskmanagers(
        self, rest: FlinkRest, jid: str, job: Mapping[str, Any], command: ScalingCommand
    ) -> Result:
        launcher = self.launcher
        if launcher is None:
            return Result(
                OutcomeStatus.REJECTED,
                f"no TaskManager launcher for Flink cluster {self.name} (the actuator "
                "has only its REST URL: --flink-local NAME=DIR starts and stops TaskManagers)",
            )
        verdict = self._verdict(rest, launcher, jid, job, command)
        if not isinstance(verdict, Apply):
            return self._superseded(verdict)
        if command.action is ScalingAction.PROVISION_TASK_MANAGERS:
            capped = msgspec.structs.replace(command, amount=verdict.amount)
            return self._provision(rest, launcher, capped, verdict.note)
        return self._release(rest, launcher, command)

    def _verdict(
        self,
        rest: FlinkRest,
        launcher: Launcher,
        jid: str,
        job: Mapping[str, Any],
        command: ScalingCommand,
    ) -> Verdict:
        """The command's check against what Flink shows now (none without a basis)."""
        if command.basis is None:
            return Apply(command.amount)
        facts = flink_facts(
            self.name,
            jid,
            job,
            rest.requirements(jid),
            rest.taskmanagers(),
            running=launcher.running(),
            slots_per_taskmanager=launcher.slots_per_taskmanager,
            own_prefix=f"tm-{command.command_id}-",
        )
        return check(command, facts, self.spare_slots)

    def _superseded(self, verdict: Verdict) -> Result:
        assert isinstance(verdict, Superseded), "a job that ended supersedes a basis"
        details = (*verdict.details, ("flink", self.name))
        return Result(OutcomeStatus.SUPERSEDED, verdict.message, details)

    def _set_parallelism(self, rest: FlinkRest, jid: str, command: ScalingCommand) -> Result:
        current = rest.requirements(jid)
        if command.expected_requirements is not None:
            moved = changed_requirements(current, command.expected_requirements)
            if moved:
                return Result(
                    OutcomeStatus.SUPERSEDED,
                    "the job's requirements changed since the decision (someone else set "
                    "them): " + ", ".join(f"{v[:8]} {was} -> {now}" for v, was, now in moved),
                    tuple((v, now) for v, _, now in moved),
                )
        targets = parallelism_targets(command, list(current))
        unknown = sorted(set(targets) - set(current))
        if unknown or not targets:
            return Result(
                OutcomeStatus.REJECTED,
                f"job {jid} has no vertex {', '.join(unknown)}; it has {', '.join(sorted(current))}"
                if unknown
                else "no target parallelism (amount < 1 and no vertex named)",
            )
        if any(target < 1 for target in targets.values()):
            return Result(OutcomeStatus.REJECTED, f"a target parallelism below 1: {targets}")
        bounds = autoscaler_bounds(current, targets)
        rest.set_requirements(jid, bounds)
        shown = {vertex: f"{lower}:{upper}" for vertex, (lower, upper) in bounds.items()}
        changed = ", ".join(f"{v[:8]} {shown[v]}" for v in sorted(targets))
        changes = f"requirements set (lower:upper) {changed}"
        return Result(OutcomeStatus.APPLIED, changes, tuple(shown.items()))

    def _provision(
        self, rest: FlinkRest, launcher: Launcher, command: ScalingCommand, note: str = ""
    ) -> Result:
        per = launcher.slots_per_taskmanager
        count = math.ceil(command.amount / per)
        if not 1 <= count <= MAX_TASKMANAGERS_PER_COMMAND:
            return Result(
                OutcomeStatus.REJECTED,
                f"{command.amount} slots is {count} TaskManagers of {per} slot(s); "
                f"a command starts 1 to {MAX_TASKMANAGERS_PER_COMMAND}",
            )
        ids = [f"tm-{command.command_id}-{n}" for n in range(count)]
        before = [tm for tm in ids if launcher.started_before(tm)]
        up, cap = launcher.running(), launcher.max_taskmanagers
        running, others = len(up), len([tm for tm in up if tm not in ids])
        fresh = [tm for tm in ids if tm not in before]
        fresh = fresh[: quota.capped_count(len(fresh), running, cap)]
        if not before and not fresh:
            assert cap is not None, "only a cap leaves no room"
            return Result(OutcomeStatus.REJECTED, quota.no_room(self.name, count, running, cap))
        for tm in fresh:
            launcher.start(tm)
        ours = [tm for tm in ids if tm in before or tm in fresh]
        waited = self._await_registered(rest, launcher, ours)
        capped = (("maxTaskManagers", str(cap)),) if cap is not None else ()
        details = (("taskManagers", ",".join(ours)), ("flink", self.name), *capped)
        if waited is None:
            return Result(
                OutcomeStatus.FAILED,
                f"started {', '.join(ours)}, but Flink had not listed them all in "
                f"{self.register_timeout:.0f} s",
                details,
            )
        again = f"; {len(before)} started before a restart" if before else ""
        capped_by = f"; {note}" if note else ""
        message = quota.applied(count, len(ours), per=per, waited=waited, running=others, cap=cap)
        return Result(OutcomeStatus.APPLIED, message + again + capped_by, details)

    def _await_registered(
        self, rest: FlinkRest, launcher: Launcher, ids: list[str]
    ) -> float | None:
        """Seconds until every one of `ids` still running is listed by /taskmanagers."""
        begun = time.monotonic()
        while time.monotonic() - begun < self.register_timeout:
            running = set(launcher.running())
            listed = {tm["id"] for tm in rest.taskmanagers()}
            if {tm for tm in ids if tm in running} <= listed:
                return time.monotonic() - begun
            time.sleep(0.5)
        return None

    def _release(self, rest: FlinkRest, launcher: Launcher, command: ScalingCommand) -> Result:
        command_id, slots = command.command_id, command.amount
        chosen = launcher.remembered_release(command_id)
        if chosen is None:
            chosen = idle_choice(rest.taskmanagers(), set(launcher.running()), slots)
            launcher.remember_release(command_id, chosen)
        stopped, busy = self._stop_idle(rest, launcher, chosen)
        if not stopped:
            said = f" ({', '.join(busy)} took a slot since)" if busy else ""
            return Result(
                OutcomeStatus.REJECTED,
                f"no idle TaskManager of Flink cluster {self.name} fits {slots} slot(s){said}",
            )
        message = f"released {len(stopped)} idle TaskManager(s): {', '.join(stopped)}"
        if busy:
            message += f"; kept {', '.join(busy)}, which took a slot since"
        return Result(
            OutcomeStatus.APPLIED,
            message,
            (("taskManagers", ",".join(stopped)), ("flink", self.name)),
        )

    def _stop_idle(
        self, rest: FlinkRest, launcher: Launcher, chosen: list[str]
    ) -> tuple[list[str], list[str]]:
        """Stop each chosen TaskManager that holds no slot now, checked just before."""
        stopped, busy = [], []
        for tm in chosen:
            if tm not in launcher.running():
                stopped.append(tm)  # stopped before a restart, or gone on its own
                continue
            try:
                details = rest.get_json(f"/taskmanagers/{tm}")
            except FlinkNotFoundError:
                details = None  # not registered (any more): holds nothing
            if details is not None and holds_slots(details):
                busy.append(tm)
                continue
            launcher.stop(tm)
            stopped.append(tm)
        return stopped, busy
