"""The verdict on a job's pairs (services/history/verdict.py): a pair the observation
decides that disagrees fails `flink compare --strict` (the Flink demo); an ambiguous one
is said so, not failed."""

from __future__ import annotations

from typing import Any

from services.contracts.ambiguity import AmbiguousPair
from services.history.pairing import conformance
from services.history.verdict import INSTANT_SLACK_MS, verdict

JOB = "local.0123"
SUM = "9dd63673dd41ea021b896a9b3a3a8d1f"  # a Flink JobVertexID: shown by its name
NAMES = {SUM: "Sum"}


def rescale(
    number: int, trigger: str = "INITIAL_SCHEDULE", post: int = 2, **changed: Any
) -> dict[str, Any]:
    """One side's rescale in the compared columns (pairing.flink_side / predicted_side)."""
    return {
        "cluster": "local",
        "flink_job_id": "0123",
        "job_key": JOB,
        "start_timestamp_ms": 1000 * number,
        "rescale_attempt_id": 1,
        "rescale_uuid": f"uuid-{number}",
        "in_progress": False,
        "trigger_cause": trigger,
        "terminal_state": "COMPLETED",
        "terminated_reason": "SUCCEEDED",
        "pre_parallelism": [{"key": SUM, "value": None}],
        "post_parallelism": [{"key": SUM, "value": post}],
        "slots": [{"key": "default", "value": post}],
        "scheduler_states": ["Created", "WaitingForResources", "Executing"],
        **changed,
    }


def test_agreeing_pairs_pass() -> None:
    both = [rescale(1), rescale(2, "RECOVERABLE_FAILOVER")]

    judged = verdict(conformance(both, both), [], NAMES)

    assert judged.status == 0
    assert judged.lines == ("decidable pairs: 2 of 2 agree; all pairs: 2 of 2 (0 ambiguous)",)


def test_a_decidable_disagreement_fails_the_demo_and_names_each_field() -> None:
    flink = [rescale(1), rescale(2, "RECOVERABLE_FAILOVER")]
    ours = [rescale(1), rescale(2, "RECOVERABLE_FAILOVER", post=1)]

    judged = verdict(conformance(flink, ours), [], NAMES)

    assert judged.status == 1
    assert judged.decidable_disagreements == 1
    assert judged.lines == (
        "pair 2 disagrees: post_parallelism Flink Sum=2 / scalefold Sum=1",
        "pair 2 disagrees: slots Flink default=2 / scalefold default=1",
        "decidable pairs: 1 of 2 agree; all pairs: 1 of 2 (0 ambiguous)",
    )


def test_a_rescale_only_one_side_has_is_a_disagreement() -> None:
    flink = [rescale(1), rescale(2, "RECOVERABLE_FAILOVER")]

    judged = verdict(conformance(flink, flink[:1]), [], NAMES)

    assert judged.status == 1
    assert judged.lines[0] == (
        "pair 2 disagrees: rescale Flink RECOVERABLE_FAILOVER -> SUCCEEDED / scalefold (none)"
    )
    assert judged.lines[-1] == "decidable pairs: 1 of 2 agree; all pairs: 1 of 2 (0 ambiguous)"


def test_an_ambiguous_disagreement_is_said_so_and_does_not_fail_the_demo() -> None:
    flink = [rescale(1), rescale(2, "NEW_RESOURCE_AVAILABLE"), rescale(3)]
    ours = [rescale(1, post=1), rescale(2, "NEW_RESOURCE_AVAILABLE"), rescale(3)]
    why = "TaskManagerRegistered tm-2, observed in (+1.000 s, +3.000 s], ..."

    judged = verdict(
        conformance(flink, ours), [AmbiguousPair(JOB, 1, ("post_parallelism",), why)], NAMES
    )

    assert judged.status == 0
    assert judged.ambiguous == {1}
    assert judged.lines == (
        f"pair 1: ambiguous at this observation resolution: {why}",
        "decidable pairs: 2 of 2 agree; all pairs: 2 of 3 (1 ambiguous)",
    )


def test_an_ambiguity_elsewhere_does_not_excuse_a_decidable_disagreement() -> None:
    flink = [rescale(1), rescale(2, "RECOVERABLE_FAILOVER")]
    ours = [rescale(1, post=1), rescale(2, "UPDATE_REQUIREMENT")]

    judged = verdict(
        conformance(flink, ours), [AmbiguousPair(JOB, 1, ("slots",), "tm-2 ...")], NAMES
    )

    assert judged.status == 1
    assert (
        "pair 2 disagrees: trigger_cause Flink RECOVERABLE_FAILOVER / scalefold UPDATE_REQUIREMENT"
        in judged.lines
    )
    assert judged.lines[-1] == "decidable pairs: 0 of 1 agree; all pairs: 0 of 2 (1 ambiguous)"


def test_an_unsettled_disagreement_says_so_and_still_fails() -> None:
    flink = [rescale(1)]
    ours = [rescale(1, post_parallelism=[], slots=[], in_progress=True)]

    judged = verdict(conformance(flink, ours), [], NAMES)

    assert judged.status == 1
    assert judged.lines[0] == (
        "pair 1 disagrees: post_parallelism Flink Sum=2 / scalefold (none) (not settled yet)"
    )


def test_a_failover_flink_restarted_on_slots_not_yet_released_is_a_race_not_a_disagreement() -> (
    None
):
    """Flink's JobMaster released the killed TaskManager's slots after the restart delay
    ended: it created a graph on them, failed, and waited for resources; the prediction
    waited at once. That pair and the one after it (which follows from it) are ambiguous."""
    wait = ["Executing", "Restarting", "WaitingForResources", "CreatingExecutionGraph", "Executing"]
    straight = ["Executing", "Restarting", "CreatingExecutionGraph", "WaitingForResources"]
    straight += ["CreatingExecutionGraph", "Executing"]
    flink = [
        rescale(1),
        rescale(2, "RECOVERABLE_FAILOVER", post=1, scheduler_states=straight),
        rescale(3, "NEW_RESOURCE_AVAILABLE", pre_parallelism=[{"key": SUM, "value": 1}]),
    ]
    ours = [
        rescale(1),
        rescale(2, "RECOVERABLE_FAILOVER", post=2, scheduler_states=wait),
        rescale(3, "NEW_RESOURCE_AVAILABLE", pre_parallelism=[{"key": SUM, "value": 2}]),
    ]

    judged = verdict(conformance(flink, ours), [], NAMES)

    assert judged.status == 0 and judged.ambiguous == {2, 3}
    assert judged.lines[0].startswith("pair 2: ambiguous at this observation resolution: Flink")
    assert judged.lines[1].endswith("it follows pair 2's race")
    assert judged.lines[-1] == "decidable pairs: 1 of 1 agree; all pairs: 1 of 3 (2 ambiguous)"
    # the same failover restarted through WaitingForResources on both sides is decided
    ours[1] = rescale(2, "RECOVERABLE_FAILOVER", post=2, scheduler_states=wait)
    flink[1] = rescale(2, "RECOVERABLE_FAILOVER", post=1, scheduler_states=wait)
    assert verdict(conformance(flink, ours), [], NAMES).status == 1


def test_an_ambiguity_flinks_record_settles_judges_the_pairs_after_it() -> None:
    """The input's window straddled a deadline, but Flink's first pair it could change
    agrees with the prediction in those fields: Flink took the prediction's side."""
    flink = [rescale(1), rescale(2, "NEW_RESOURCE_AVAILABLE"), rescale(3)]
    ours = [rescale(1), rescale(2, "NEW_RESOURCE_AVAILABLE", post=1), rescale(3)]
    tm = "TaskManagerRegistered tm-2 Window(after=1000, by=3000)"
    found = [
        AmbiguousPair(JOB, 1, ("post_parallelism", "slots"), "tm-2 ... (pair 1)", tm),
        AmbiguousPair(JOB, 2, ("paired",), "tm-2 ... (pair 2)", tm),
    ]

    judged = verdict(conformance(flink, ours), found, NAMES)

    assert judged.ambiguous == frozenset() and judged.status == 1  # pair 2 is decided: wrong
    assert "pair 2 disagrees: post_parallelism Flink Sum=2 / scalefold Sum=1" in judged.lines
    # where Flink's first pair disagrees in those fields, the input's pairs stay ambiguous,
    # and pair 3 follows pair 2's (its rescale exists in one case only: the pairing shifts)
    wrong = [rescale(1, post=1), *ours[1:]]
    judged = verdict(conformance(flink, wrong), found, NAMES)
    assert judged.ambiguous == {1, 2, 3} and judged.status == 0


def test_pairs_after_one_that_exists_in_one_case_only_follow_it() -> None:
    # the demo of 2026-12-03 (run 7): a window at the first schedule could add a rescale;
    # Flink's fifth rescale, with no prediction to pair, followed from it
    flink = [rescale(n, "NEW_RESOURCE_AVAILABLE") for n in range(1, 6)]
    ours = flink[:3]
    why = "TaskManagerRegistered tm-2, observed in (+1.000 s, +3.000 s], ..."
    found = [AmbiguousPair(JOB, 4, ("paired",), why, why)]

    judged = verdict(conformance(flink, ours), found, NAMES)

    assert judged.status == 0, judged.lines
    assert judged.ambiguous == {4, 5}
    assert judged.lines[1] == (
        "pair 5: ambiguous at this observation resolution: it follows pair 4: a rescale "
        "that happens in one case only shifts the pairing from there"
    )


def _timed(number: int, durations: list[int | None], **changed: Any) -> dict[str, Any]:
    return rescale(number, state_durations=durations, **changed)


def test_span_durations_agree_within_the_observations_resolution() -> None:
    flink = [_timed(1, [150, 6_032, 1_384, 1])]
    ours = [_timed(1, [0, 5_000, 0, 0])]
    pairs = conformance(flink, ours)

    judged = verdict(pairs, [], NAMES, resolution_ms=1_100)  # and INSTANT_SLACK_MS

    assert judged.status == 0 and judged.durations == ((1, True),)
    assert judged.tolerance_ms == 1_100 + INSTANT_SLACK_MS
    assert verdict(pairs, [], NAMES).durations == ()  # an unknown resolution: not judged


def test_a_span_that_lasts_seconds_longer_than_predicted_disagrees() -> None:
    """A restart delay of 10 s where the prediction restarted after 1 s: every state
    agrees, the instants do not (issue 47, item 6)."""
    states = ["Executing", "Restarting", "CreatingExecutionGraph", "Executing"]
    flink = [_timed(1, [4_000, 10_230, 300, None], scheduler_states=states)]
    ours = [_timed(1, [4_100, 1_000, 0, 0], scheduler_states=states)]

    judged = verdict(conformance(flink, ours), [], NAMES, resolution_ms=500)

    assert judged.status == 1 and judged.durations == ((1, False),)
    assert judged.lines[0] == (
        "pair 1 spans apart: state_durations Flink Restarting 10.230 s / scalefold Restarting "
        "1.000 s (more than the 1.5 s the observation allows)"
    )
    assert judged.lines[-1].startswith("decidable pairs: 0 of 1 agree; all pairs: 0 of 1")


def test_durations_are_not_compared_where_the_states_differ_or_the_pair_is_ambiguous() -> None:
    flink = [_timed(1, [0, 9_000, 0]), _timed(2, [0, 9_000, 0])]
    ours = [
        _timed(1, [0, 1_000, 0], post_parallelism=[{"key": SUM, "value": 1}]),
        _timed(2, [0, 1_000], scheduler_states=["Created", "Executing"]),
    ]
    why = "TaskManagerRegistered tm-2, observed in (1.0 s, 3.0 s], ..."
    found = [AmbiguousPair(JOB, 1, ("post_parallelism",), why)]

    judged = verdict(conformance(flink, ours), found, NAMES, resolution_ms=0)

    assert judged.durations == () and judged.ambiguous == {1}
    assert [line.split(":")[1].strip() for line in judged.lines[1:-1]] == [
        "scheduler_states Flink Created > WaitingForResources > Executing / scalefold "
        "Created > Executing"
    ]
