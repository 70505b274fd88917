"""The check a command's basis meets before the actuator acts (actuator/evidence.py), one
scenario per rule: what the planner saw, what the cluster holds now, the verdict."""

from __future__ import annotations

from typing import Any

from services.actuator.evidence import Apply, JobFacts, Superseded, check
from services.contracts.commands import CommandBasis, ScalingAction, ScalingCommand

PROVISION = ScalingAction.PROVISION_TASK_MANAGERS
RELEASE = ScalingAction.RELEASE_TASK_MANAGERS
COOLDOWN = ScalingAction.RAISE_COOLDOWN


def basis(**seen: Any) -> CommandBasis:
    """What the planner saw: rescale 7d0e5b2a's revision 3, decided a second later."""
    facts: dict[str, Any] = {
        "rescale_uuid": "7d0e5b2a-91c4-5f63-8a1e-2c4b6d8f0a17",
        "revision": 3,
        "state": "WaitingForResources",
        "observed_at_millis": 1_000,
        "decided_at_millis": 2_000,
        "fresh_as_of_millis": 1_900,
        **seen,
    }
    return CommandBasis(**facts)


def command(action: ScalingAction, amount: int, seen: CommandBasis | None = None) -> ScalingCommand:
    return ScalingCommand(
        command_id="c-1",
        job_id="clicks",
        action=action,
        amount=amount,
        reason="test",
        issued_at_millis=1_000,
        basis=seen,
    )


def held(slots: int, **facts: Any) -> JobFacts:
    return JobFacts(held_slots=slots, holder="job clicks", **facts)


def superseded(verdict: Any) -> Superseded:
    assert isinstance(verdict, Superseded), verdict
    return verdict


# -- the story: a provision decided on a view that is no longer true -----------------


def test_a_provision_decided_on_0_slots_for_a_job_that_holds_4_is_superseded() -> None:
    """Issue 46: clicks wants 4, holds its own 4 TaskManagers; the planner, a minute behind,
    saw it waiting with 0 and asked for 4 more."""
    stale = command(PROVISION, 4, basis(available_slots=0, desired_slots=4))
    verdict = superseded(check(stale, held(4, needed_slots=4)))
    assert verdict.message == (
        "job clicks holds 4 slot(s) of registered TaskManagers and 0 more are starting; the "
        "command was decided on 0 slot(s) (WaitingForResources, rescale 7d0e5b2a revision 3)"
    )
    assert dict(verdict.details) == {
        "heldSlots": "4",
        "startingSlots": "0",
        "seenSlots": "0",
        "neededSlots": "4",
    }


def test_taskmanagers_still_starting_count_as_slots_the_job_got_since() -> None:
    """A first provision's TaskManagers are on their way; a second decided on the same view
    would double them."""
    second = command(PROVISION, 3, basis(available_slots=1, desired_slots=4))
    verdict = superseded(check(second, held(1, starting_slots=3, needed_slots=4)))
    assert "3 more are starting" in verdict.message
    assert dict(verdict.details)["startingSlots"] == "3"


def test_a_job_that_got_slots_since_but_fewer_than_its_minimum_still_gets_its_provision() -> None:
    """The Flink demo: a TaskManager of 1 slot was there for a job whose minimum is 2; the
    planner decided on 0 and asked for 4. The job cannot run on what it got: the command
    stands, capped at the need (a supersede would leave it waiting, its view unchanged)."""
    decided = command(
        PROVISION, 4, basis(available_slots=0, desired_slots=4, minimal_required_slots=2)
    )
    verdict = check(decided, held(1, needed_slots=4))
    assert isinstance(verdict, Apply) and verdict.amount == 3, verdict
    runnable = command(
        PROVISION, 4, basis(available_slots=0, desired_slots=4, minimal_required_slots=1)
    )
    superseded(check(runnable, held(1, needed_slots=4)))


def test_a_provision_whose_view_still_holds_is_applied_as_asked() -> None:
    fresh = command(PROVISION, 3, basis(available_slots=1, desired_slots=4))
    assert check(fresh, held(1, needed_slots=4)) == Apply(3)


def test_a_job_that_lost_slots_since_may_still_get_what_it_needs() -> None:
    """Fewer slots than the planner saw is no contradiction for a provision."""
    fresh = command(PROVISION, 3, basis(available_slots=1, desired_slots=4))
    assert check(fresh, held(0, needed_slots=4)) == Apply(3)


def test_a_job_with_what_it_needs_plus_the_spare_gets_nothing_more() -> None:
    """The requirements were lowered to 2 since: the 2 held are enough, spare 0."""
    asked = command(PROVISION, 3, basis(available_slots=2, desired_slots=5))
    verdict = superseded(check(asked, held(2, needed_slots=2)))
    assert "already what its requirements need (2 slot(s) + 0 spare)" in verdict.message
    assert dict(verdict.details)["spareSlots"] == "0"


def test_a_provision_is_capped_at_need_plus_spare() -> None:
    asked = command(PROVISION, 6, basis(available_slots=1, desired_slots=8))
    verdict = check(asked, held(1, needed_slots=4), spare=1)
    assert isinstance(verdict, Apply) and verdict.amount == 4
    assert verdict.note == "capped from 6 to 4 slot(s): 1 held or starting, 4 needed + 1 spare"


def test_the_spare_lets_a_job_hold_that_many_beyond_its_need() -> None:
    asked = command(PROVISION, 1, basis(available_slots=4, desired_slots=4))
    assert check(asked, held(4, needed_slots=4), spare=1) == Apply(1)
    assert isinstance(check(asked, held(4, needed_slots=4), spare=0), Superseded)


def test_without_the_clusters_need_the_bases_desired_slots_bound_the_provision() -> None:
    asked = command(PROVISION, 5, basis(available_slots=1, desired_slots=4))
    assert check(asked, held(1)) == Apply(
        3, "capped from 5 to 3 slot(s): 1 held or starting, 4 needed + 0 spare"
    )
    unknown = command(PROVISION, 5, basis(available_slots=1))
    assert check(unknown, held(1)) == Apply(5)  # no need known anywhere: as asked


# -- releases ----------------------------------------------------------------------------------


def test_a_release_whose_job_needs_more_than_it_ran_on_is_superseded() -> None:
    """Completed on 2 of 4 available, release 2; then the requirements rose to 4."""
    release = command(RELEASE, 2, basis(state="COMPLETED", available_slots=4, post_rescale_slots=2))
    verdict = superseded(check(release, held(4, needed_slots=4)))
    assert verdict.message.startswith(
        "the requirements of job clicks need 4 slot(s) now, more than the 2 it ran on; "
    )
    assert dict(verdict.details)["postRescaleSlots"] == "2"


def test_a_release_of_slots_already_gone_is_superseded() -> None:
    """Someone released (or lost) 2 of the 4 the planner saw: releasing 2 more would take
    the job below what it ran on."""
    release = command(RELEASE, 2, basis(state="COMPLETED", available_slots=4, post_rescale_slots=2))
    verdict = superseded(check(release, held(2, needed_slots=2)))
    assert "holds 2 slot(s) of registered TaskManagers, fewer than when" in verdict.message
    assert verdict.message.endswith("released or lost since")
    assert dict(verdict.details)["seenSlots"] == "4"


def test_a_release_whose_view_still_holds_is_applied() -> None:
    release = command(RELEASE, 2, basis(state="COMPLETED", available_slots=4, post_rescale_slots=2))
    assert check(release, held(4, needed_slots=2)) == Apply(2)
    assert check(release, held(5, needed_slots=2)) == Apply(2)  # more than seen: still idle ones


# -- cooldowns ---------------------------------------------------------------------------------


def test_a_cooldown_raised_since_the_decision_is_not_raised_again() -> None:
    raise_it = command(COOLDOWN, 60_000, basis(cooldown_millis=30_000))
    verdict = superseded(check(raise_it, held(2, cooldown_millis=60_000)))
    assert verdict.message == (
        "the cooldown of job clicks is 60000 ms now, not the 30000 ms the command was "
        "decided on (rescale 7d0e5b2a revision 3)"
    )
    assert dict(verdict.details) == {"cooldownMillis": "60000", "seenCooldownMillis": "30000"}


def test_a_cooldown_as_seen_or_unknown_is_raised() -> None:
    raise_it = command(COOLDOWN, 60_000, basis(cooldown_millis=30_000))
    assert check(raise_it, held(2, cooldown_millis=30_000)) == Apply(60_000)
    assert check(raise_it, held(2)) == Apply(60_000)


# -- every action ------------------------------------------------------------------------------


def test_a_job_that_stopped_running_since_supersedes_any_command() -> None:
    for action in (PROVISION, RELEASE, COOLDOWN):
        verdict = superseded(check(command(action, 2, basis()), held(0, running=False)))
        assert verdict.message.startswith("job clicks no longer runs; the command was decided")


def test_an_operators_command_without_a_basis_is_applied_as_it_stands() -> None:
    finished = held(8, needed_slots=2, running=False, cooldown_millis=1)
    for action in (PROVISION, RELEASE, COOLDOWN, ScalingAction.SET_PARALLELISM):
        assert check(command(action, 4), finished) == Apply(4)
