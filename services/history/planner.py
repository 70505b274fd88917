"""The scaling planner: the latest rescale records in, `ScalingCommand`s out. Pure.

`plan(rows, now_ms, config)` reads no clock and no broker: the wall clock comes
in as data, the rows are the collected `aggregates.planner_input` (the latest
revision of each job's in-progress rescales, latest terminated rescale and
COMPLETED rescales of the flapping window). The shell (`job.py`) sends what it
returns, once per `commandId`.

Rules (thresholds are `PlannerConfig` fields, `scalefold history run` flags):

- PROVISION_TASK_MANAGERS, waiting: a rescale in progress whose open span is
  `WaitingForResources`, with fewer available slots than Σ minimalRequiredSlots,
  for at least `provision_grace_ms` since that span's enter time.
  Amount = Σ desiredSlots - availableSlots.
- PROVISION_TASK_MANAGERS, below desired: the latest terminated rescale is
  COMPLETED with Σ postRescaleSlots < Σ desiredSlots, the job is not reactive
  (a reactive job's desired is its max parallelism; unless `provision_reactive`),
  no newer rescale is in progress and it ended `provision_grace_ms` ago.
  Amount = Σ desiredSlots - availableSlots.
  Both provision amounts are capped so the pool stays <= `max_slots_per_job`.
- RELEASE_TASK_MANAGERS: the latest terminated rescale is COMPLETED, more slots
  are available than Σ postRescaleSlots, no rescale is in progress and it ended
  `release_grace_ms` ago. Amount = the idle slots. Deviation: no release while
  a job that is not reactive runs below its desired slots (Σ post < Σ desired):
  its next rescale will take those slots, releasing them would undo it.
- RAISE_COOLDOWN: the flapping score (`aggregates.py`) of the completed rescales
  recorded with the job's current cooldown >= `flap_threshold`; new cooldown =
  min(max(2 x current, 60 s), `max_cooldown_ms`), skipped when the current one
  is already at the maximum. Counting only rescales under the current cooldown
  means a raise needs new flapping evidence: the failovers that follow a raise
  (no cooldown prevents those) do not raise it again at once.

No command is planned for a job that runs on a real Flink cluster and is only
observed (the Flink bridge submits it with `scalefold.observed-cluster`, which
the rescale records' `schedulerSettings` then hold): scalefold predicts such a
job in shadow mode and decides nothing for it, unless its cluster is one of
`commanded_clusters` (`history run --command-flink NAME`), whose actuator has a
Flink backend for it (docs/actuator.md, "A real Flink"): then the same rules
plan its commands from the predicted rescales.

A command's id hashes the job, the action and the evidence, so the same
evidence always yields the same id: a provisioning decided while a rescale
waited is not repeated when that rescale then completes below desired.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

PROVISION = "PROVISION_TASK_MANAGERS"
RELEASE = "RELEASE_TASK_MANAGERS"
RAISE_COOLDOWN = "RAISE_COOLDOWN"
PREFIXES = {PROVISION: "provision", RELEASE: "release", RAISE_COOLDOWN: "cooldown"}

WAITING_FOR_RESOURCES = "WaitingForResources"
COMPLETED = "COMPLETED"
DEFAULT_COOLDOWN_MS = 30_000
"""Flink's default `executing.cooldown-after-rescaling`, when the settings do not say."""
MIN_RAISED_COOLDOWN_MS = 60_000
OBSERVED_CLUSTER = "scalefold.observed-cluster"
"""The job configuration key of a job observed on a real Flink (jobconfig.OBSERVED_CLUSTER)."""

Command = dict[str, Any]


@dataclass(frozen=True)
class PlannerConfig:
    provision_grace_ms: int = 30_000
    release_grace_ms: int = 120_000
    max_slots_per_job: int = 32
    provision_reactive: bool = False
    flap_threshold: int = 3
    max_cooldown_ms: int = 600_000
    flap_window_ms: int = 3_600_000
    commanded_clusters: frozenset[str] = frozenset()
    """Real Flink clusters whose observed jobs get commands (their actuator applies them)."""


@dataclass(frozen=True)
class Rescale:
    """The latest revision of one rescale: the `rescales` view's columns the planner reads."""

    job_id: str
    rescale_uuid: str
    updated_at_ms: int
    start_timestamp_ms: int
    end_timestamp_ms: int | None
    terminal_state: str | None
    available_slots: int | None
    reactive_mode: bool
    cooldown_ms: int | None
    total_desired_slots: int | None
    total_minimal_required_slots: int | None
    total_post_rescale_slots: int | None
    current_state: str | None
    current_state_enter_ms: int | None
    current_state_open: bool
    scheduler_settings: Mapping[str, str] | None = None

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Rescale:
        """From a collected row (`Row.asDict()`); extra columns are ignored."""
        values: dict[str, Any] = {name: row.get(name) for name in cls.__dataclass_fields__}
        return cls(**values)

    @property
    def in_progress(self) -> bool:
        return self.terminal_state is None

    @property
    def observed(self) -> bool:
        """Whether the job runs on a real Flink (predicted from what the bridge observed)."""
        return OBSERVED_CLUSTER in (self.scheduler_settings or {})

    @property
    def cluster(self) -> str | None:
        """The real Flink cluster the job runs on, or None."""
        return (self.scheduler_settings or {}).get(OBSERVED_CLUSTER)


def command_id(job_id: str, action: str, evidence: Iterable[str]) -> str:
    """`<prefix>-<hash>`: the same job, action and evidence always give the same id."""
    digest = hashlib.sha256("\n".join([job_id, action, *evidence]).encode()).hexdigest()
    return f"{PREFIXES[action]}-{digest[:32]}"


def _command(action: str, amount: int, reason: str, evidence: list[Rescale]) -> Command:
    uuids = [r.rescale_uuid for r in evidence]
    job_id = evidence[0].job_id
    return {
        "commandId": command_id(job_id, action, uuids),
        "jobId": job_id,
        "action": action,
        "amount": amount,
        "reason": reason,
        "evidence": uuids,
        "issuedAtMillis": max(r.updated_at_ms for r in evidence),
    }


def plan(
    rows: Iterable[Mapping[str, Any] | Rescale], now_ms: int, config: PlannerConfig
) -> list[Command]:
    """Every command the rows justify at `now_ms`, ordered by job; may repeat earlier ones."""
    by_job: dict[str, list[Rescale]] = {}
    for row in rows:
        rescale = row if isinstance(row, Rescale) else Rescale.from_row(row)
        by_job.setdefault(rescale.job_id, []).append(rescale)
    commands: list[Command] = []
    for job_id in sorted(by_job):
        commands.extend(plan_job(by_job[job_id], now_ms, config))
    return commands


def plan_job(rescales: list[Rescale], now_ms: int, config: PlannerConfig) -> list[Command]:
    """The commands for one job's rescales; none for a job observed on a real Flink
    that is not one of the commanded clusters."""
    if any(r.observed and r.cluster not in config.commanded_clusters for r in rescales):
        return []
    job = JobView.of(rescales)
    candidates = [
        provision_waiting(job, now_ms, config),
        provision_below_desired(job, now_ms, config),
        release_idle(job, now_ms, config),
        raise_cooldown(job, config),
    ]
    return [c for c in candidates if c is not None]


@dataclass(frozen=True)
class JobView:
    """One job's rescales as the rules see them."""

    in_progress: list[Rescale]
    latest_terminated: Rescale | None
    completed: list[Rescale]
    newest: Rescale

    @classmethod
    def of(cls, rescales: list[Rescale]) -> JobView:
        ordered = sorted(rescales, key=lambda r: (r.start_timestamp_ms, r.rescale_uuid))
        terminated = [r for r in ordered if not r.in_progress]
        latest = max(
            terminated,
            key=lambda r: (r.end_timestamp_ms or 0, r.start_timestamp_ms, r.rescale_uuid),
            default=None,
        )
        completed = sorted(
            (
                r
                for r in terminated
                if r.terminal_state == COMPLETED and r.end_timestamp_ms is not None
            ),
            key=lambda r: (r.end_timestamp_ms or 0, r.start_timestamp_ms, r.rescale_uuid),
        )
        newest = max(ordered, key=lambda r: (r.updated_at_ms, r.start_timestamp_ms))
        return cls([r for r in ordered if r.in_progress], latest, completed, newest)


def provision_waiting(job: JobView, now_ms: int, config: PlannerConfig) -> Command | None:
    """A rescale stuck in WaitingForResources below its minimum, for the grace period."""
    for rescale in reversed(job.in_progress):
        available, minimal = rescale.available_slots, rescale.total_minimal_required_slots
        desired, entered = rescale.total_desired_slots, rescale.current_state_enter_ms
        if (
            rescale.current_state != WAITING_FOR_RESOURCES
            or not rescale.current_state_open
            or None in (available, minimal, desired, entered)
        ):
            continue
        assert available is not None and minimal is not None and desired is not None
        assert entered is not None
        waited = now_ms - entered
        if available >= minimal or waited < config.provision_grace_ms:
            continue
        amount = min(desired - available, config.max_slots_per_job - available)
        if amount <= 0:
            continue
        reason = (
            f"Rescale {rescale.rescale_uuid} has waited for resources for {_for_people(waited)} "
            f"with {available} of the {minimal} slots it needs at least; provision {amount} "
            f"slots toward the {desired} desired."
        )
        return _command(PROVISION, amount, reason, [rescale])
    return None


def _for_people(ms: int) -> str:
    """A waiting time in the unit a person would use."""
    for unit, size in (("days", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if ms >= 2 * size:
            return f"{ms // size} {unit}"
    return f"{ms // 1000} s"


def _newer_in_progress(job: JobView, than: Rescale) -> bool:
    return any(r.start_timestamp_ms >= than.start_timestamp_ms for r in job.in_progress)


def provision_below_desired(job: JobView, now_ms: int, config: PlannerConfig) -> Command | None:
    """The job settled on fewer slots than it wants, and nothing is under way to fix it."""
    latest = job.latest_terminated
    if latest is None or latest.terminal_state != COMPLETED or latest.end_timestamp_ms is None:
        return None
    post, desired = latest.total_post_rescale_slots, latest.total_desired_slots
    available = latest.available_slots
    if post is None or desired is None or available is None or post >= desired:
        return None
    if (latest.reactive_mode and not config.provision_reactive) or _newer_in_progress(job, latest):
        return None
    if now_ms - latest.end_timestamp_ms < config.provision_grace_ms:
        return None
    amount = min(desired - available, config.max_slots_per_job - available)
    if amount <= 0:
        return None
    reason = (
        f"Rescale {latest.rescale_uuid} completed with {post} of {desired} desired slots "
        f"({available} available); provision {amount} slots."
    )
    return _command(PROVISION, amount, reason, [latest])


def release_idle(job: JobView, now_ms: int, config: PlannerConfig) -> Command | None:
    """Slots the job has held unused since its last completed rescale, for the grace period."""
    latest = job.latest_terminated
    if latest is None or latest.terminal_state != COMPLETED or latest.end_timestamp_ms is None:
        return None
    post, available = latest.total_post_rescale_slots, latest.available_slots
    if post is None or available is None or available <= post or job.in_progress:
        return None
    desired = latest.total_desired_slots
    if desired is not None and post < desired and not latest.reactive_mode:
        return None
    if now_ms - latest.end_timestamp_ms < config.release_grace_ms:
        return None
    idle = available - post
    reason = (
        f"Rescale {latest.rescale_uuid} completed using {post} of {available} available "
        f"slots; release the {idle} idle slots."
    )
    return _command(RELEASE, idle, reason, [latest])


def flapping(job: JobView, window_ms: int) -> tuple[int, list[Rescale]]:
    """The flapping score and the COMPLETED rescales of the window (see `aggregates.py`)."""
    if not job.completed:
        return 0, []
    anchor = max(r.end_timestamp_ms or 0 for r in job.completed)
    window = [r for r in job.completed if (r.end_timestamp_ms or 0) >= anchor - window_ms]
    return reversals(window), window


def reversals(rescales: list[Rescale]) -> int:
    """How often the total post-rescale slots changed direction (up <-> down)."""
    slots = [r.total_post_rescale_slots for r in rescales if r.total_post_rescale_slots is not None]
    directions = [(b > a) - (b < a) for a, b in pairwise(slots)]
    moves = [d for d in directions if d != 0]
    return sum(1 for a, b in pairwise(moves) if a != b)


def raise_cooldown(job: JobView, config: PlannerConfig) -> Command | None:
    """The job keeps rescaling up and down: ask for a longer cooldown after rescaling.

    Only the rescales recorded with the job's current cooldown count, so every
    raise needs new flapping under the cooldown it replaces: failovers right
    after a raise (which no cooldown prevents) do not raise it again at once.
    """
    current = job.newest.cooldown_ms
    current = DEFAULT_COOLDOWN_MS if current is None else current
    _, window = flapping(job, config.flap_window_ms)
    window = [r for r in window if (r.cooldown_ms or DEFAULT_COOLDOWN_MS) == current]
    score = reversals(window)
    if score < config.flap_threshold or current >= config.max_cooldown_ms:
        return None
    new = min(max(2 * current, MIN_RAISED_COOLDOWN_MS), config.max_cooldown_ms)
    reason = (
        f"Job {job.newest.job_id} reversed its scaling direction {score} times within an "
        f"hour of completed rescales under its cooldown of {current} ms; raise it to {new} ms."
    )
    return _command(RAISE_COOLDOWN, new, reason, window)
