"""A command's evidence, checked against the cluster just before the actuator acts. Pure.

The planner decides from rescale records that may be seconds (on a busy machine, a minute)
old; the command carries what it saw (`CommandBasis`). Before a backend provisions,
releases or raises a cooldown it gathers what it knows of the job *now* (`JobFacts`) and
asks `check`: apply the command (its amount perhaps capped), or answer SUPERSEDED with
the one fact that contradicts its basis. The invariant it keeps: a job never holds more
slots than its latest requirements need plus the configured spare (issue 46: a job that
wanted 4 slots and held 4 got 4 more from a command decided on 0).

The rules, with a basis (a command without one, an operator's, is applied as it stands):

- any action: the job no longer runs -> SUPERSEDED.
- PROVISION_TASK_MANAGERS: held + starting > the slots the basis saw (the job got slots
  since) and at least its minimal required slots (it can run: the planner decides again
  on what it has) -> SUPERSEDED; held + starting >= need + spare (it already has what it
  needs) -> SUPERSEDED; held + starting + amount > need + spare -> the amount capped to
  fit. A job that got slots since but still fewer than its minimum cannot run on them:
  the command stands, capped (the Flink demo's job, a TaskManager of 1 slot already
  there for a minimum of 2, waited for nothing else).
  `need` is the job's latest requirements' desired slots, else the basis's.
- RELEASE_TASK_MANAGERS: the need rose above the slots the job ran on after the rescale
  the command rests on -> SUPERSEDED; fewer slots held than the basis saw (released or
  lost since) -> SUPERSEDED.
- RAISE_COOLDOWN: the job's cooldown, when known, is no longer the one the basis saw (raised
  or lowered since) -> SUPERSEDED.

Slots are counted as whole slots; a backend that starts whole TaskManagers of several
slots rounds the amount up, so a job may end up to a TaskManager's slots minus one above
need + spare.
"""

from __future__ import annotations

from dataclasses import dataclass

from services.contracts.commands import CommandBasis, ScalingAction, ScalingCommand

Details = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class JobFacts:
    """What a backend knows of one job now."""

    held_slots: int
    """Slots of the TaskManagers registered for the job."""
    starting_slots: int = 0
    """Slots of TaskManagers provisioned for it and not registered yet."""
    needed_slots: int | None = None
    """What its latest requirements need (Σ over slot-sharing groups of the max upper
    bound), None if the backend does not know."""
    running: bool = True
    """False once it finished, failed or was cancelled."""
    cooldown_millis: int | None = None
    """Its cooldown after rescaling now, None if the backend does not know."""
    holder: str = "the job"
    """Who holds the slots, as a message names it: "job clicks", "Flink cluster t"."""


@dataclass(frozen=True)
class Apply:
    """Act on the command, with `amount` (the command's, or capped)."""

    amount: int
    note: str = ""
    """Why the amount is not the command's (empty when it is)."""


@dataclass(frozen=True)
class Superseded:
    """Do not act: `message` names the fact that contradicts the basis, `details` holds it."""

    message: str
    details: Details


Verdict = Apply | Superseded


def check(command: ScalingCommand, facts: JobFacts, spare: int = 0) -> Verdict:
    """The verdict on `command` given the job's `facts` and the `spare` slots a job may
    hold beyond its need."""
    basis = command.basis
    if basis is None:
        return Apply(command.amount)
    if not facts.running:
        return Superseded(
            f"{facts.holder} no longer runs; the command was {basis.seen()}",
            (("running", "false"),),
        )
    if command.action is ScalingAction.PROVISION_TASK_MANAGERS:
        return _provision(command.amount, basis, facts, spare)
    if command.action is ScalingAction.RELEASE_TASK_MANAGERS:
        return _release(command.amount, basis, facts)
    if command.action is ScalingAction.RAISE_COOLDOWN:
        return _cooldown(command.amount, basis, facts)
    return Apply(command.amount)


def _slots(facts: JobFacts, basis: CommandBasis, need: int | None) -> Details:
    values = {
        "heldSlots": facts.held_slots,
        "startingSlots": facts.starting_slots,
        "seenSlots": basis.available_slots,
        "neededSlots": need,
    }
    return tuple((key, str(value)) for key, value in values.items() if value is not None)


def _provision(amount: int, basis: CommandBasis, facts: JobFacts, spare: int) -> Verdict:
    have = facts.held_slots + facts.starting_slots
    need = facts.needed_slots if facts.needed_slots is not None else basis.desired_slots
    details = _slots(facts, basis, need)
    holds = (
        f"{facts.holder} holds {facts.held_slots} slot(s) of registered TaskManagers and "
        f"{facts.starting_slots} more are starting"
    )
    short = basis.minimal_required_slots is not None and have < basis.minimal_required_slots
    if basis.available_slots is not None and have > basis.available_slots and not short:
        return Superseded(f"{holds}; the command was {basis.seen()}", details)
    if need is None:
        return Apply(amount)
    limit = need + spare
    if have >= limit:
        return Superseded(
            f"{holds}: already what its requirements need ({need} slot(s) + {spare} spare); "
            f"the command was {basis.seen()}",
            (*details, ("spareSlots", str(spare))),
        )
    if have + amount > limit:
        return Apply(
            limit - have,
            f"capped from {amount} to {limit - have} slot(s): {have} held or starting, "
            f"{need} needed + {spare} spare",
        )
    return Apply(amount)


def _release(amount: int, basis: CommandBasis, facts: JobFacts) -> Verdict:
    need, post = facts.needed_slots, basis.post_rescale_slots
    details = _slots(facts, basis, need)
    if need is not None and post is not None and need > post:
        return Superseded(
            f"the requirements of {facts.holder} need {need} slot(s) now, more than the {post} "
            f"it ran on; the command was {basis.seen()}",
            (*details, ("postRescaleSlots", str(post))),
        )
    if basis.available_slots is not None and facts.held_slots < basis.available_slots:
        return Superseded(
            f"{facts.holder} holds {facts.held_slots} slot(s) of registered TaskManagers, "
            f"fewer than when the command was {basis.seen()}: released or lost since",
            details,
        )
    return Apply(amount)


def _cooldown(amount: int, basis: CommandBasis, facts: JobFacts) -> Verdict:
    now, seen = facts.cooldown_millis, basis.cooldown_millis
    if now is None or seen is None or now == seen:
        return Apply(amount)
    return Superseded(
        f"the cooldown of {facts.holder} is {now} ms now, not the {seen} ms the command "
        f"was decided on (rescale {basis.rescale_uuid[:8]} revision {basis.revision})",
        (("cooldownMillis", str(now)), ("seenCooldownMillis", str(seen))),
    )
