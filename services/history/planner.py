"""The scaling planner: the latest rescale records in, `ScalingCommand`s out. Pure.

`plan(rows, now_ms, config, fresh_as_of_ms)` reads no clock and no broker: the wall
clock comes in as data, and so does how fresh the rows are (the last moment the
planner knew it had read every rescale record on Kafka: planning.py). The rows are
the latest revision of each job's in-progress rescales, latest terminated rescale and
COMPLETED rescales of the flapping window (`PlannerState`, planstate.py, folds them
from the rescale records as they arrive). The shell (planning.py) sends what it
returns, once per `commandId`.

**No decision from a stale view.** When the rows are older than
`max_staleness_ms` (the history paused, starved of CPU, or behind the topic), nothing
is decided: every rule below waits for a time to pass, and a rule that reads an old
view after that time would act on facts that may no longer hold (issue 46: a job that
had completed its rescale was provisioned again from the record of its wait).

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

**Flink's own records confirm.** For a job on a commanded Flink cluster, each rule
is checked against what Flink itself recorded (the `flink-rescales` topic), when the
bridge has shown any of the job's rescales: no provisioning while Flink's newest
rescale is past the states without slots, Created and WaitingForResources (or, below
desired, while Flink's latest COMPLETED rescale runs at its desired slots or one is in
progress), no release while Flink has a rescale in progress.

A command's id hashes the job, the action, the evidence and the facts the rule read
(the slots seen), so the same evidence always yields the same id: a provisioning is
not repeated while the facts stand, and a decision on new facts is a new command.
Each command carries its basis (the rescale revision it rests on, the slots seen,
when, how fresh: `CommandBasis`), which the actuator checks against the cluster
before it acts.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from services.contracts.commands import CommandBasis, ScalingAction, ScalingCommand
from services.history import rules
from services.history.jobview import (
    PREFIXES,
    PROVISION,
    RELEASE,
    WAITING_FOR_RESOURCES,
    Decision,
    JobView,
    PlannerConfig,
    Rescale,
)


def command_id(
    job_id: str, action: str, evidence: Iterable[str], facts: Iterable[object] = ()
) -> str:
    """`<prefix>-<hash>`: the same job, action, evidence and facts always give the same id."""
    text = "\n".join([job_id, action, *evidence, *(str(f) for f in facts)])
    return f"{PREFIXES[ScalingAction(action)]}-{hashlib.sha256(text.encode()).hexdigest()[:32]}"


def command(decision: Decision, now_ms: int, fresh_as_of_ms: int) -> ScalingCommand:
    """The command of a decision, with its basis (what the actuator checks)."""
    on, uuids = decision.on, tuple(r.rescale_uuid for r in decision.evidence)
    state = on.terminal_state or (on.current_state if on.current_state_open else None)
    basis = CommandBasis(
        rescale_uuid=on.rescale_uuid,
        revision=on.revision or 0,
        state=state,
        available_slots=on.available_slots,
        desired_slots=on.total_desired_slots,
        minimal_required_slots=on.total_minimal_required_slots,
        post_rescale_slots=on.total_post_rescale_slots,
        cooldown_millis=on.cooldown_ms,
        observed_at_millis=on.updated_at_ms,
        decided_at_millis=now_ms,
        fresh_as_of_millis=fresh_as_of_ms,
    )
    return ScalingCommand(
        command_id=command_id(on.job_id, decision.action, uuids, decision.facts),
        job_id=on.job_id,
        action=decision.action,
        amount=decision.amount,
        reason=decision.reason,
        evidence=uuids,
        issued_at_millis=max(r.updated_at_ms for r in decision.evidence),
        basis=basis,
    )


def plan(
    rows: Iterable[Mapping[str, Any] | Rescale],
    now_ms: int,
    config: PlannerConfig,
    fresh_as_of_ms: int | None = None,
    flink: Iterable[Rescale] = (),
) -> list[ScalingCommand]:
    """Every command the rows justify at `now_ms`, ordered by job; may repeat earlier ones.

    `fresh_as_of_ms`: how fresh the rows are (None: as of `now_ms`); `flink`: the latest
    revisions Flink itself recorded of the jobs observed on a real Flink."""
    fresh = now_ms if fresh_as_of_ms is None else fresh_as_of_ms
    if now_ms - fresh > config.max_staleness_ms:
        return []
    by_job: dict[str, list[Rescale]] = {}
    for row in rows:
        rescale = row if isinstance(row, Rescale) else Rescale.from_row(row)
        by_job.setdefault(rescale.job_id, []).append(rescale)
    flink_by_job: dict[str, list[Rescale]] = {}
    for rescale in flink:
        flink_by_job.setdefault(rescale.job_id, []).append(rescale)
    return [
        command(decision, now_ms, fresh)
        for job_id in sorted(by_job)
        for decision in plan_job(by_job[job_id], now_ms, config, flink_by_job.get(job_id, []))
    ]


def plan_job(
    rescales: list[Rescale],
    now_ms: int,
    config: PlannerConfig,
    flink: Sequence[Rescale] = (),
) -> list[Decision]:
    """The decisions for one job's rescales; none for a job observed on a real Flink that
    is not one of the commanded clusters, and none that Flink's own records contradict."""
    if any(r.observed and r.cluster not in config.commanded_clusters for r in rescales):
        return []
    job = JobView.of(rescales)
    candidates = [
        rules.provision_waiting(job, now_ms, config),
        rules.provision_below_desired(job, now_ms, config),
        rules.release_idle(job, now_ms, config),
        rules.raise_cooldown(job, config),
    ]
    decided = [c for c in candidates if c is not None]
    if not flink:
        return decided
    flink_job = JobView.of(list(flink))
    return [d for d in decided if not contradicted(d, flink_job)]


NOT_RESOURCED = ("Created", WAITING_FOR_RESOURCES)
"""The states of a rescale in progress that has no slots yet."""


def contradicted(decision: Decision, flink: JobView) -> bool:
    """Whether Flink's own records of the job contradict what `decision` rests on."""
    newest = max(flink.in_progress, key=lambda r: r.start_timestamp_ms, default=None)
    if decision.action is PROVISION and decision.on.in_progress:
        # Flink's in-progress record of an initial schedule can still show Created while
        # the job waits (seen on Flink 2.3.0 in the Flink demo): neither state has slots
        return newest is None or newest.current_state not in NOT_RESOURCED
    if decision.action is PROVISION:
        done = flink.latest_terminated
        at_desired = (
            done is not None
            and done.total_post_rescale_slots is not None
            and done.total_desired_slots is not None
            and done.total_post_rescale_slots >= done.total_desired_slots
        )
        return newest is not None or at_desired
    if decision.action is RELEASE:
        return newest is not None
    return False
