"""Which predicted rescales depend on where in its observation window an input fell
(services/scheduler/observation.py): the core's own folds say."""

from __future__ import annotations

import argparse
import io
import json

import pytest

from services.contracts import Codec, Settings, kafka
from services.contracts.events import (
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    TimerFired,
    VertexSpec,
    Window,
)
from services.contracts.jobconfig import (
    COOLDOWN,
    FIXED_ATTEMPTS,
    FIXED_DELAY,
    RESTART_STRATEGY,
    SUBMISSION_STABILIZATION,
)
from services.scheduler import whatif
from services.scheduler.observation import (
    Latency,
    ambiguities,
    describe,
    fold,
    latency_ms,
    moved,
    resolution_ms,
)
from services.scheduler.observationcli import run_command
from services.scheduler.whatif import Recorded

JOB = "local.0123"
VERTICES = (VertexSpec("sum", "Sum", "g", "g", 2, 4),)


def submitted(**config: str) -> JobSubmitted:
    settings = {SUBMISSION_STABILIZATION: "2s", **config}
    return JobSubmitted(JOB, 0, "job", VERTICES, None, tuple(sorted(settings.items())))


def registered(tm: str, at: int, window: Window | None = None) -> TaskManagerRegistered:
    return TaskManagerRegistered(JOB, at, tm, 1, None, window)


def lost(tm: str, at: int, window: Window | None = None) -> TaskManagerLost:
    return TaskManagerLost(JOB, at, tm, "killed", window)


def start(second: Event) -> list[Event]:
    """tm-1 at +0.5 s starts the 2 s submission stabilization (deadline +2.5 s); the job
    wants 2 slots, so a second TaskManager before the deadline starts it at 2, after at 1."""
    return [submitted(), registered("tm-1", 500), second]


def cooled(*after: Event) -> list[Event]:
    """tm-1 at +0 starts the job at 1 by +2 s; tm-2 at +3 s is taken when the 5 s cooldown
    ends at +7 s; then `after`."""
    return [submitted(**{COOLDOWN: "5s"}), registered("tm-1", 0), registered("tm-2", 3000), *after]


def test_a_registration_straddling_the_submission_stabilization_makes_the_first_pair_ambiguous() -> (
    None
):
    found = ambiguities(start(registered("tm-2", 3000, Window(1000, 3000))), ())

    first = [a for a in found if a.pair_index == 1]
    assert len(first) == 1, found
    assert first[0].input == "TaskManagerRegistered tm-2"
    assert first[0].window == Window(1000, 3000)
    assert "post_parallelism" in first[0].fields and "slots" in first[0].fields
    assert "trigger_cause" not in first[0].fields  # INITIAL_SCHEDULE either way
    assert first[0].deadline == "submission resource stabilization timeout at +2.500 s"
    # at 1, the job rescales to 2 later: a second pair exists in one case only
    assert [(a.pair_index, a.fields) for a in found if a.pair_index == 2] == [(2, ("paired",))]
    line = describe(first[0])
    assert line.startswith("TaskManagerRegistered tm-2, observed in (+1.000 s, +3.000 s]")
    assert "submission resource stabilization timeout at +2.500 s" in line
    assert "post_parallelism, slots would differ" in line


def test_the_deadline_is_found_where_the_recorded_instant_cancels_its_timer() -> None:
    # recorded at +1.5 s, before the deadline: the baseline never meets it, a variant does
    found = ambiguities(start(registered("tm-2", 1500, Window(1000, 3000))), ())

    assert {a.pair_index for a in found} == {1, 2}
    assert all(a.deadline == "submission resource stabilization timeout at +2.500 s" for a in found)


def test_a_window_that_does_not_straddle_a_deadline_is_not_ambiguous() -> None:
    assert ambiguities(start(registered("tm-2", 4000, Window(3000, 4000))), ()) == []
    assert ambiguities(start(registered("tm-2", 2000, Window(1000, 2000))), ()) == []


def test_an_exact_input_is_never_ambiguous() -> None:
    assert ambiguities(start(registered("tm-2", 3000)), ()) == []


def test_recorded_timer_ticks_are_dropped_a_fold_fires_its_own() -> None:
    events = start(registered("tm-2", 3000, Window(1000, 3000)))
    ticked = [*events[:2], TimerFired(JOB, 2600), events[2]]

    assert ambiguities(ticked, ()) == ambiguities(events, ())


def test_a_loss_straddling_the_cooldown_end_makes_the_rescale_after_it_ambiguous() -> None:
    # at 1 from +2 s; tm-2 at +3 s is used when the 5 s cooldown ends at +7 s, unless it
    # was lost before: lost in (+6 s, +8 s] cannot tell
    events = cooled(lost("tm-2", 8000, Window(6000, 8000)))

    found = ambiguities(events, ())

    assert [a.pair_index for a in found] == [2]
    assert found[0].input == "TaskManagerLost tm-2"
    assert found[0].deadline == "cooldown end at +7.000 s"
    assert "post_parallelism" in found[0].fields
    assert ambiguities(cooled(lost("tm-2", 9000, Window(8000, 9000))), ()) == []


def flink_record(trigger: str, start: int, executing: int, decided: int) -> dict[str, object]:
    """A Flink rescale record as the bridge forwards it, cut to what latency_ms reads: it
    decided (entered CreatingExecutionGraph) at `decided` and entered Executing at
    `executing`."""
    states = [("WaitingForResources", start), ("CreatingExecutionGraph", decided)]
    spans = [{"state": name, "enterTimestampInMillis": at} for name, at in states]
    return {
        "triggerCause": trigger,
        "startTimestampInMillis": start,
        "rescaleAttemptId": 1,
        "schedulerStates": [*spans, {"state": "Executing", "enterTimestampInMillis": executing}],
    }


def test_flinks_own_latency_makes_a_loss_near_its_later_cooldown_end_ambiguous() -> None:
    # as above, tm-2 lost in (+8 s, +9 s]: after the prediction's cooldown end (+7 s), but
    # Flink entered Executing 2.5 s after the prediction did: its cooldown ended at +9.5 s
    events = cooled(lost("tm-2", 9000, Window(8000, 9000)))
    assert ambiguities(events, ()) == []  # the windows alone decide it

    found = ambiguities(events, (), [flink_record("INITIAL_SCHEDULE", 0, 4500, 2000)])

    assert [a.pair_index for a in found] == [2]
    assert (found[0].input, found[0].latency_ms) == ("Flink's latency", 2500)
    assert describe(found[0]).startswith("Flink entered Executing up to 2.500 s after the")
    assert "post_parallelism" in found[0].fields
    # a record of another trigger, or one that entered Executing earlier, is no latency
    assert ambiguities(events, (), [flink_record("UPDATE_REQUIREMENT", 0, 4500, 2000)]) == []
    assert ambiguities(events, (), [flink_record("INITIAL_SCHEDULE", 0, 1500, 1400)]) == []


def test_a_window_straddling_a_deadline_flinks_latency_moved_is_ambiguous() -> None:
    # Flink entered Executing 2.5 s after the prediction: its cooldown ended at +9.5 s.
    # tm-2 lost in (+9 s, +10 s], recorded at +10 s: after both cooldown ends as recorded,
    # so the latency alone changes nothing, but the window holds Flink's end
    events = cooled(lost("tm-2", 10_000, Window(9000, 10_000)))
    flink = [flink_record("INITIAL_SCHEDULE", 0, 4500, 2000)]
    assert ambiguities(events, ()) == []  # the prediction's own cooldown ended at +7 s

    found = ambiguities(events, (), flink)

    assert [(a.pair_index, a.input) for a in found] == [(2, "TaskManagerLost tm-2")]
    assert found[0].deadline == "cooldown end at +9.500 s"
    assert "post_parallelism" in found[0].fields


def test_inputs_between_the_predictions_decision_and_flinks_later_one_make_it_ambiguous() -> None:
    """Flink's slots offered seconds after the TaskManager registered (a busy machine):
    its record left WaitingForResources at +4.4 s, the prediction's at +2 s (tm-1 at +0,
    a 2 s stabilization). tm-2, observed exactly at +3 s, may have counted for Flink."""
    events = cooled()
    assert ambiguities(events, ()) == []
    late = [flink_record("INITIAL_SCHEDULE", 0, 4500, 4400)]

    found = ambiguities(events, (), late)

    first = [a for a in found if a.input == "TaskManagerRegistered tm-2"]
    assert [a.pair_index for a in first] == [1, 2], found
    assert "post_parallelism" in first[0].fields and first[0].latency_ms == 2400
    assert first[0].deadline == "decision Flink took 2.400 s after the prediction's (at +4.400 s)"
    assert "may have come before or after the decision Flink took 2.400 s" in describe(first[0])
    # Flink deciding when the prediction did leaves tm-2 decided
    on_time = [flink_record("INITIAL_SCHEDULE", 0, 4500, 2000)]
    assert [a for a in ambiguities(events, (), on_time) if a.input.endswith("tm-2")] == []


def test_a_loss_straddling_a_restart_delay_makes_the_restart_ambiguous() -> None:
    # at 2 on tm-1 and tm-2 from +1 s; a failure at +5 s restarts after 2 s (+7 s), on 2
    # slots if tm-2 is still there then, on 1 if it was lost before
    restart = {RESTART_STRATEGY: "fixed-delay", FIXED_DELAY: "2s", FIXED_ATTEMPTS: "10"}
    failure = JobLifecycle(JOB, 5000, JobEventKind.TASK_FAILURE, exception="boom")
    events: list[Event] = [
        submitted(**restart),
        registered("tm-1", 0),
        registered("tm-2", 1000),
        failure,
        lost("tm-2", 8000, Window(6000, 8000)),
    ]

    found = ambiguities(events, ())

    assert found, "the restart at +7 s depends on the loss"
    assert {a.deadline for a in found} == {"restart delay at +7.000 s"}
    assert min(a.pair_index for a in found) == 2  # the initial schedule is not in doubt


def test_requirements_are_named_by_their_bounds() -> None:
    update = RequirementsUpdated(JOB, 3000, (Requirement("sum", 1, 1),), Window(1000, 3000))

    found = ambiguities(start(update), ())

    assert found and found[0].input == "RequirementsUpdated sum=1..1"


def test_a_moved_input_goes_to_the_edge_of_its_new_instant() -> None:
    events: list[Event] = [
        submitted(),
        registered("tm-1", 1000),
        registered("tm-2", 2000),
        registered("tm-3", 3000, Window(1000, 3000)),
        registered("tm-4", 3000),
    ]

    earlier = moved(events, 3, 1001)
    later = moved(events, 3, 3000)
    before_submission = moved(events, 1, -5)

    assert [e.timestamp for e in earlier] == [0, 1000, 1001, 2000, 3000]
    assert [getattr(e, "task_manager_id", "") for e in later][-2:] == ["tm-4", "tm-3"]
    assert isinstance(before_submission[0], JobSubmitted)  # never before the submission
    assert moved(events, 3, 2000)[2:4] == [
        registered("tm-3", 2000, Window(1000, 3000)),
        registered("tm-2", 2000),
    ]


def test_the_fold_numbers_rescales_by_start() -> None:
    folded = fold(start(registered("tm-2", 3000)), ())

    assert [r["trigger_cause"] for r in folded.rescales] == [
        "INITIAL_SCHEDULE",
        "NEW_RESOURCE_AVAILABLE",
    ]
    assert folded.rescales[0]["post_parallelism"] == [("sum", 1)]


def test_the_command_prints_each_ambiguous_pair_as_json(
    monkeypatch: pytest.MonkeyPatch, codec: Codec
) -> None:
    events = start(registered("tm-2", 3000, Window(1000, 3000)))
    recorded = Recorded({JOB: events}, {}, frozenset({JOB, "other"}))
    monkeypatch.setattr(kafka, "connect", lambda settings, timeout: None)
    monkeypatch.setattr(whatif, "read_recorded", lambda settings, codec, wanted: recorded)
    args = argparse.Namespace(job="0123", format="json", default=None)
    out = io.StringIO()

    status = run_command(args, Settings.from_env({}), codec, out)

    assert status == 0
    rows = json.loads(out.getvalue())
    assert [row["pair_index"] for row in rows] == [1, 2]
    assert rows[0]["window"] == {"after": 1000, "by": 3000}
    assert rows[0]["described"].startswith("TaskManagerRegistered tm-2, observed in")


def test_the_command_says_so_when_nothing_is_ambiguous(
    monkeypatch: pytest.MonkeyPatch, codec: Codec
) -> None:
    recorded = Recorded({JOB: start(registered("tm-2", 3000))}, {}, frozenset({JOB}))
    monkeypatch.setattr(kafka, "connect", lambda settings, timeout: None)
    monkeypatch.setattr(whatif, "read_recorded", lambda settings, codec, wanted: recorded)
    out = io.StringIO()

    status = run_command(
        argparse.Namespace(job=JOB, format="text", default=None), Settings.from_env({}), codec, out
    )

    assert (status, out.getvalue().splitlines()[0]) == (0, f"job {JOB}: no pair is ambiguous")
    assert "instants within 0.000 s of Flink's" in out.getvalue()  # no window, no record


def test_the_resolution_is_the_widest_window_and_flinks_latency() -> None:
    """How far the prediction's instants may lie from Flink's by the observation alone
    (issue 47, item 6): tm-2 seen within 2 s; Flink entered Executing 2.5 s late."""
    events = [*cooled(), registered("tm-3", 9000, Window(8000, 9000))]
    events[2] = registered("tm-2", 3000, Window(1000, 3000))

    assert resolution_ms(events, ()) == 2000
    flink = [flink_record("INITIAL_SCHEDULE", 0, 4500, 2000)]
    assert resolution_ms(events, (), flink) == 2000 + 2500


def test_a_later_rescale_adds_only_its_own_latency_to_what_it_inherited() -> None:
    # the prediction enters Executing at +2 s and, onto tm-2, at +7 s (the cooldown's end);
    # Flink 2.5 s later, then 2.6 s: its second rescale added 0.1 s to the first one's lag
    baseline = fold(cooled(), ())
    assert baseline.executing == (2000, 7000), baseline.executing
    trigger = baseline.rescales[1]["trigger_cause"]

    flink = [
        flink_record("INITIAL_SCHEDULE", 0, 4500, 2000),
        flink_record(trigger, 3000, 9600, 7000),
    ]

    assert latency_ms(flink, baseline) == Latency(first=2500, later=100)
    assert latency_ms(flink[1:], baseline) == Latency()  # paired by start: another trigger
