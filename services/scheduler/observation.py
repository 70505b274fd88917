"""Which predicted rescales depend on where in its observation window an input fell. Pure.

The Flink bridge sees a TaskManager come or go, or a job's requirements change, only as
presence in a REST answer: such an input carries a `Window(after, by)`, it happened in
(after, by]. When that window straddles one of the core's deadlines (the submission or
executing resource stabilization timeout, the cooldown's end, a restart delay, the
resource wait timeout), whether Flink saw the input before or after the deadline cannot
be known, and a prediction that depends on it cannot be told right or wrong.

The core itself says which (STYLE.md 8): the job's recorded inputs are folded as
recorded (the baseline), then, for each input with a window, twice more with that input
at the window's earliest instant (`after + 1`) and at its latest (`by`). A variant moves
the input within the log and no further than it must: moved earlier, it goes before
every input of its new instant (after the job's submission, which it never passes);
moved later, after every input of its new instant. Each fold's rescales are numbered by
start as `flink compare` numbers them (services/history/pairing.py), and compared with
the baseline's in the fields `flink compare` compares; a pair whose rescale differs in a
variant, or exists in one fold and not the other, is ambiguous.

The deadline named is the first timer-driven decision inside the window (the first
decision of a timer step, not of an input), of the baseline, else of a variant: an input
at the window's end may cancel in the baseline the very timer that the input at its start
lets fire.

Flink's own latency moves its deadlines too. The core enters Executing the instant it
decides to; Flink waits for its slots to be offered and builds the execution graph first
(0.3-1 s on our machines, more when busy), and its cooldown is anchored at that later
entry. Where Flink's records of the job are at hand, the latency is read from them (how
much later than the prediction's pair each rescale entered Executing, beyond the lag the
pair before carried: the first schedule's, when the job's slots are first offered, and
the most of any later one's, whose slots are in the pool already) and the inputs folded
once more with the core's graph creation taking that long
(`scalefold.runtime.simulated.first-creation-time`, `.creation-time`); a pair that
differs then is ambiguous too, its cause Flink's latency, not a window. Each windowed
input is then moved within its window on that slower timeline as well, and compared
with its fold as recorded: a window that holds a deadline only Flink's latency moved
there (the cooldown's end 0.9 s after the prediction's, a loss observed across it)
cannot be decided either.

Flink may also decide later (or earlier) than the prediction: a TaskManager's
registration, which REST shows, is not its slots' offer to the job, which the adaptive
scheduler waits for, and on a busy machine the offer has come seconds later. Where
Flink's record of a pair left its waiting state (entered CreatingExecutionGraph) at
another instant than the prediction's, each input between the two instants is folded
once more on the other side of the prediction's decision; a pair that differs then
cannot be decided either, its deadline Flink's own decision.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from itertools import pairwise
from typing import Any

from services.contracts.ambiguity import EXISTENCE
from services.contracts.events import (
    Event,
    JobSubmitted,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    TimerFired,
    Window,
)
from services.contracts.jobconfig import SIMULATED_CREATE_TIME, SIMULATED_FIRST_CREATE_TIME, P
from services.scheduler.core.driver import Replay
from services.scheduler.core.effects import Decision, Effect, RescaleUpdated
from services.scheduler.core.enums import DecisionKind, Phase, StateName
from services.scheduler.core.fold import Defaults
from services.scheduler.whatif import pinned

FIELDS = (
    "trigger_cause",
    "terminal_state",
    "terminated_reason",
    "pre_parallelism",
    "post_parallelism",
    "slots",
    "scheduler_states",
)
"""The compared fields, named as services/history/conformance.py FIELDS names them (the
scheduler and the history share only the contracts, so the names are repeated here)."""
LATENCY = "Flink's latency"
"""The `input` of an ambiguity Flink's own latency makes, not an observation window."""
PAIRED = EXISTENCE
"""The 'field' of a pair whose rescale exists in one fold and not the other (pairing's
column of the same name)."""
ORDER = (PAIRED, *FIELDS)


@dataclass(frozen=True)
class Ambiguity:
    """Pair `pair_index` (1-based, by start) depends on where in `window` the input fell.

    `fields`: the compared fields that changed (`paired` when the rescale exists in one
    fold only); `deadline`: the decision inside the window, as text, if one was found;
    `origin`: the job's submission time, from which `describe` shows times. An ambiguity
    Flink's latency makes has `input` LATENCY, `latency_ms` and an empty window."""

    pair_index: int
    fields: tuple[str, ...]
    input: str
    window: Window
    deadline: str | None
    origin: int
    latency_ms: int = 0


@dataclass(frozen=True)
class Folded:
    """One fold of the inputs: its rescales' compared values, by start, and the decisions
    that opened each timer step (the deadlines it met), in order."""

    rescales: tuple[Mapping[str, Any], ...]
    deadlines: tuple[Decision, ...]
    executing: tuple[int | None, ...] = ()
    """Per rescale, when it entered Executing from CreatingExecutionGraph, if it did."""
    decided: tuple[int | None, ...] = ()
    """Per rescale, when it first entered CreatingExecutionGraph (its parallelism decided)."""


def ambiguities(
    events: Sequence[Event], defaults: Defaults, flink: Sequence[Mapping[str, Any]] = ()
) -> list[Ambiguity]:
    """The ambiguous pairs of ONE job's recorded inputs (log order), per windowed input,
    and (given Flink's records of the job, `flink`) those Flink's latency makes."""
    inputs = [e for e in events if not isinstance(e, TimerFired)]  # a fold fires its own
    origin = next((e.timestamp for e in inputs if isinstance(e, JobSubmitted)), 0)
    baseline = fold(inputs, defaults)
    found: list[Ambiguity] = []
    latency = latency_ms(flink, baseline)
    timelines = [(_as_recorded, baseline)]  # and Flink's, slower to enter Executing
    if latency != Latency():
        slowed = fold(created_after(inputs, latency), defaults)
        found += [
            Ambiguity(pair, tuple(names), LATENCY, Window(0, 0), None, origin, latency.worst)
            for pair, names in sorted(differences(baseline, [slowed]).items())
        ]
        timelines.append((partial(created_after, latency=latency), slowed))
    found += decided_apart(inputs, defaults, flink, baseline, origin)
    for index, event in enumerate(inputs):
        window = window_of(event)
        if window is None:
            continue
        changed: dict[int, list[str]] = {}
        folds: list[Folded] = []
        for timed, reference in timelines:
            variants = [
                fold(timed(moved(inputs, index, at)), defaults)
                for at in (window.after + 1, window.by)
                if at != event.timestamp
            ]
            for pair, names in differences(reference, variants).items():
                changed[pair] = sorted({*changed.get(pair, ()), *names}, key=ORDER.index)
            folds += [reference, *variants]
        deadline = first_deadline(folds, window, origin)
        found += [
            Ambiguity(pair, tuple(names), label(event), window, deadline, origin)
            for pair, names in sorted(changed.items())
        ]
    return found


def _as_recorded(events: Sequence[Event]) -> list[Event]:
    return list(events)


def decided_apart(
    inputs: Sequence[Event],
    defaults: Defaults,
    flink: Sequence[Mapping[str, Any]],
    baseline: Folded,
    origin: int,
) -> list[Ambiguity]:
    """The pairs an input between the prediction's decision and Flink's could change
    (the module doc's last paragraph): the input moved to the other side of the
    prediction's decision, the inputs folded again."""
    found: list[Ambiguity] = []
    ordered = sorted(flink, key=lambda r: (r["startTimestampInMillis"], r["rescaleAttemptId"] or 0))
    ours = zip(baseline.rescales, baseline.decided, strict=True)
    for record, (rescale, decided) in zip(ordered, ours, strict=False):
        if record["triggerCause"] != rescale["trigger_cause"]:
            break  # the pairs from here on are of different rescales (one side has more)
        theirs = decided_at(record)
        if None in (theirs, decided):
            continue
        assert theirs is not None and decided is not None
        low, high = sorted((decided, theirs))
        for index, event in enumerate(inputs):
            if not (_observed(event) and low < event.timestamp <= high):
                continue
            other_side = decided - 1 if event.timestamp > decided else decided
            variant = fold(moved(inputs, index, other_side), defaults)
            window = window_of(event) or Window(event.timestamp - 1, event.timestamp)
            lag = theirs - decided
            words = (
                f"decision Flink took {abs(lag) / 1000:.3f} s {'after' if lag > 0 else 'before'} "
                f"the prediction's (at {_offset(theirs, origin)})"
            )
            found += [
                Ambiguity(pair, tuple(names), label(event), window, words, origin, abs(lag))
                for pair, names in sorted(differences(baseline, [variant]).items())
            ]
    return found


def _observed(event: Event) -> bool:
    return isinstance(event, TaskManagerRegistered | TaskManagerLost | RequirementsUpdated)


def resolution_ms(
    events: Sequence[Event], defaults: Defaults, flink: Sequence[Mapping[str, Any]] = ()
) -> int:
    """How far the prediction's instants may lie from Flink's by the observation alone:
    the widest window any input of the job was observed in (the prediction places it at
    one instant of it), plus the latency Flink's records show (its spans start later)."""
    inputs = [e for e in events if not isinstance(e, TimerFired)]
    windows = [w for w in map(window_of, inputs) if w is not None]
    widest = max((w.by - w.after for w in windows), default=0)
    return widest + latency_ms(flink, fold(inputs, defaults)).worst


def describe(ambiguity: Ambiguity) -> str:
    """One line a person reads: which input, its window, the deadline, what changes."""
    a = ambiguity
    fields = ", ".join(name for name in a.fields if name != PAIRED)
    changes = [f"{fields} would differ"] if fields else []
    if PAIRED in a.fields:
        changes.insert(0, "this rescale happens in one case only")
    change = "; ".join(changes)
    if a.input == LATENCY:
        return (
            f"Flink entered Executing up to {a.latency_ms / 1000:.3f} s after the prediction "
            f"did (its slots offered, its graph built) and its deadlines moved with it: "
            f"with that latency {change}"
        )
    window = f"({_offset(a.window.after, a.origin)}, {_offset(a.window.by, a.origin)}]"
    deadline = f"the {a.deadline}" if a.deadline else "one of the scheduler's deadlines"
    return f"{a.input}, observed in {window}, may have come before or after {deadline}: {change}"


@dataclass(frozen=True)
class Latency:
    """How much later than the prediction Flink entered Executing: at the job's first
    schedule (its slots first offered to the job, then the graph built), and at most at a
    later rescale (its slots already in the pool), each beyond the lag it inherited."""

    first: int = 0
    later: int = 0

    @property
    def worst(self) -> int:
        return max(self.first, self.later)


def latency_ms(flink: Sequence[Mapping[str, Any]], baseline: Folded) -> Latency:
    """The latency Flink's rescales (`flink`: its records, any order) added: how much
    later than the prediction's rescale paired with it (by start, as `flink compare` pairs
    them, and of the same trigger) each entered Executing from CreatingExecutionGraph,
    less what the pair before it had already lost (a later pair inherits the earlier
    one's lag: its cooldown started late); never below 0."""
    ordered = sorted(flink, key=lambda r: (r["startTimestampInMillis"], r["rescaleAttemptId"] or 0))
    ours = zip(baseline.rescales, baseline.executing, strict=True)
    added: list[int] = []
    inherited = 0
    for record, (rescale, entered) in zip(ordered, ours, strict=False):
        theirs = executing_entered(record)
        if record["triggerCause"] != rescale["trigger_cause"] or None in (theirs, entered):
            continue
        assert theirs is not None and entered is not None
        added.append(max(0, theirs - entered - inherited))
        inherited = theirs - entered
    return Latency(added[0], max(added[1:], default=0)) if added else Latency()


def executing_entered(record: Mapping[str, Any]) -> int | None:
    """When a rescale record entered Executing from CreatingExecutionGraph, if it did."""
    spans = record["schedulerStates"] or []
    for before, span in pairwise(spans):
        if before["state"] == StateName.CREATING_EXECUTION_GRAPH and span["state"] == (
            StateName.EXECUTING
        ):
            return int(span["enterTimestampInMillis"]) if span["enterTimestampInMillis"] else None
    return None


def decided_at(record: Mapping[str, Any]) -> int | None:
    """When a rescale record first entered CreatingExecutionGraph (its parallelism
    decided), if it did."""
    for span in record["schedulerStates"] or []:
        if span["state"] == StateName.CREATING_EXECUTION_GRAPH:
            at = span["enterTimestampInMillis"]
            return int(at) if at else None
    return None


def created_after(events: Sequence[Event], latency: Latency) -> list[Event]:
    """The inputs with the job's first execution graph taking `latency.first` ms to
    build, and every later one `latency.later`."""
    pins = {
        SIMULATED_FIRST_CREATE_TIME: f"{latency.first} ms",
        SIMULATED_CREATE_TIME: f"{latency.later} ms",
    }
    return pinned(events, pins)


def window_of(event: Event) -> Window | None:
    if isinstance(event, TaskManagerRegistered | TaskManagerLost | RequirementsUpdated):
        return event.window
    return None


def label(event: Event) -> str:
    """An input as a person names it: `TaskManagerRegistered tm-3`."""
    kind = type(event).__name__
    if isinstance(event, TaskManagerRegistered | TaskManagerLost):
        return f"{kind} {event.task_manager_id}"
    if isinstance(event, RequirementsUpdated):
        bounds = ", ".join(f"{q.vertex_id}={q.lower}..{q.upper}" for q in event.requirements)
        return f"{kind} {bounds}"
    return kind


def moved(events: Sequence[Event], index: int, at: int) -> list[Event]:
    """The inputs with `events[index]` at time `at`, re-placed as the module doc says."""
    event = events[index]
    others = [e for i, e in enumerate(events) if i != index]
    place = index
    if at < event.timestamp:
        while (
            place > 0
            and others[place - 1].timestamp >= at
            and not isinstance(others[place - 1], JobSubmitted)
        ):
            place -= 1
    else:
        while place < len(others) and others[place].timestamp <= at:
            place += 1
    others.insert(place, replace(event, timestamp=at))
    return others


def fold(events: Iterable[Event], defaults: Defaults) -> Folded:
    """Fold the inputs as `driver.replay` does, keeping apart what timers decided."""
    run = Replay(defaults)
    effects: list[Effect] = []
    timed: list[Effect] = []
    for event in events:
        due = list(run.run_timers(event.timestamp))
        timed += due
        effects += due
        effects += run.feed(event)
    rest = list(run.drain())
    timed += rest
    effects += rest
    latest: dict[str, Mapping[str, Any]] = {}
    for effect in effects:
        if isinstance(effect, RescaleUpdated):
            latest[effect.rescale_uuid] = effect.record
    ordered = sorted(
        latest.values(),
        key=lambda r: (r["startTimestampInMillis"], r["rescaleAttemptId"], r["rescaleUuid"]),
    )
    return Folded(
        tuple(compared(r) for r in ordered),
        _step_openers(timed),
        tuple(executing_entered(r) for r in ordered),
        tuple(decided_at(r) for r in ordered),
    )


def _step_openers(timed: Iterable[Effect]) -> tuple[Decision, ...]:
    """The first decision at each instant a timer step ran: the deadline that was met
    (what follows at the same instant is its consequence)."""
    openers: dict[int, Decision] = {}
    for effect in timed:
        if isinstance(effect, Decision) and effect.at not in openers:
            openers[effect.at] = effect
    return tuple(openers[at] for at in sorted(openers))


def compared(record: Mapping[str, Any]) -> dict[str, Any]:
    """A rescale record's compared values, as pairing.py shapes them (sorted entries)."""
    vertices = record["vertices"] or []
    return {
        "trigger_cause": record["triggerCause"],
        "terminal_state": record["terminalState"],
        "terminated_reason": record["terminatedReason"],
        "pre_parallelism": sorted((v["jobVertexId"], v["preRescaleParallelism"]) for v in vertices),
        "post_parallelism": sorted(
            (v["jobVertexId"], v["postRescaleParallelism"]) for v in vertices
        ),
        "slots": sorted(
            (s["slotSharingGroupName"] or s["slotSharingGroupId"], s["postRescaleSlots"])
            for s in record["slots"] or []
        ),
        "scheduler_states": [s["state"] for s in record["schedulerStates"] or []],
    }


def differences(baseline: Folded, variants: Iterable[Folded]) -> dict[int, list[str]]:
    """Per pair index (from 1), the fields in which some variant's rescale differs from
    the baseline's, in FIELDS order (`paired` first when one fold lacks the rescale)."""
    changed: dict[int, set[str]] = {}
    for variant in variants:
        count = max(len(baseline.rescales), len(variant.rescales))
        for number in range(1, count + 1):
            names = _differing(
                baseline.rescales[number - 1] if number <= len(baseline.rescales) else None,
                variant.rescales[number - 1] if number <= len(variant.rescales) else None,
            )
            if names:
                changed.setdefault(number, set()).update(names)
    return {n: sorted(names, key=ORDER.index) for n, names in changed.items()}


def _differing(left: Mapping[str, Any] | None, right: Mapping[str, Any] | None) -> list[str]:
    if left is None or right is None:
        return [PAIRED]
    return [name for name in FIELDS if left[name] != right[name]]


def first_deadline(folds: Iterable[Folded], window: Window, origin: int) -> str | None:
    """The first timer step inside (after, by] of the first fold that has one, as text."""
    for folded in folds:
        inside = [d for d in folded.deadlines if window.after < d.at <= window.by]
        if inside:
            return f"{deadline_words(inside[0])} at {_offset(inside[0].at, origin)}"
    return None


DEADLINES = (
    ("Cooldown -> ", "cooldown end"),
    (f"{StateName.RESTARTING} -> ", "restart delay"),
    ("resource wait timeout", "resource wait timeout"),
    ("max-trigger-delay evaluation", "max trigger delay"),
)
"""What a timer step's first decision says (in its message) -> the deadline, in words."""


def deadline_words(decision: Decision) -> str:
    """Which of the core's timers a timer step's first decision shows, in words."""
    message = decision.message
    if decision.kind is DecisionKind.TIMEOUT:  # `<key> passed without ...`
        key = message.split(" passed", 1)[0].removeprefix(P)
        return key.replace(".", " ").replace("-", " ")
    if message.startswith(f"{Phase.STABILIZING} -> {Phase.STABILIZED}"):
        where = "submission" if decision.state == StateName.WAITING_FOR_RESOURCES else "executing"
        return f"{where} resource stabilization timeout"
    named = (words for shown, words in DEADLINES if shown in message)
    return next(named, f"timer in {decision.state} ({message})")


def _offset(ms: int, origin: int) -> str:
    return f"+{(ms - origin) / 1000:.3f} s"


def as_json(ambiguity: Ambiguity) -> dict[str, Any]:
    """An ambiguity as `scalefold ambiguities --format json` prints it (with its line)."""
    a = ambiguity
    return {
        "pair_index": a.pair_index,
        "fields": list(a.fields),
        "input": a.input,
        "window": None if a.input == LATENCY else {"after": a.window.after, "by": a.window.by},
        "latency_ms": a.latency_ms or None,
        "deadline": a.deadline,
        "origin": a.origin,
        "described": describe(a),
    }
