"""What the scheduler made of the events `scalefold produce` sent: folded or rejected.

An event is identified by where Kafka put it: its job-events partition and offset.
The scheduler answers each input it folds that decided anything with one
SchedulerDecisions record carrying `jobId` and `sourceOffset` (a job's events all
share one partition, so the two name the input), and each input it cannot use
with a DeadLetter carrying `sourceTopic`, `sourcePartition` and `sourceOffset`.
Nothing here guesses from time: an event with neither answer has no verdict yet.

An input can get both (a decision, then a rejection later in the same fold): a dead
letter wins. The scheduler sends an input's dead letter before its decisions, from
one producer, so reading the dead letters to their end after the decisions is
enough to see it (`Watch.sweep` in producing.py does).

This module is pure: observations in, a judgement out.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SCHEDULER = "scheduler"
IGNORED = "EVENT_IGNORED"


@dataclass(frozen=True)
class Sent:
    """One event as Kafka stored it, and where it came from for the user."""

    origin: str  # "FILE:LINE", or "the command line"
    name: str  # the record's short name, e.g. JobSubmitted
    job_id: str
    partition: int
    offset: int


@dataclass(frozen=True)
class Rejection:
    sent: Sent
    error_class: str
    reason: str

    def line(self) -> str:
        return (
            f"  {self.sent.origin}: {self.sent.name} of job {self.sent.job_id} rejected "
            f"({self.error_class}): {self.reason}"
        )


@dataclass
class Observed:
    """The scheduler's answers seen so far, for the jobs of the events sent."""

    topic: str  # the job-events topic's full name
    jobs: frozenset[str]
    decided: set[tuple[str, int]] = field(default_factory=set)  # (job id, offset)
    ignored: dict[tuple[str, int], str] = field(default_factory=dict)  # why, if it was
    dead: dict[tuple[int, int], tuple[str, str]] = field(default_factory=dict)

    def decisions(self, record: dict[str, Any]) -> None:
        if record["jobId"] in self.jobs:
            key = (record["jobId"], record["sourceOffset"])
            self.decided.add(key)
            for item in record["items"]:
                if item["kind"] == IGNORED:  # folded, but it changed nothing: say why
                    self.ignored[key] = item["message"]

    def dead_letter(self, record: dict[str, Any]) -> None:
        if record["sourceTopic"] == self.topic and record["service"] == SCHEDULER:
            where = (record["sourcePartition"], record["sourceOffset"])
            self.dead[where] = (record["errorClass"], record["errorMessage"])


@dataclass(frozen=True)
class Judgement:
    folded: list[Sent]
    rejected: list[Rejection]
    open: list[Sent]  # no answer yet
    ignored: list[tuple[Sent, str]] = field(default_factory=list)  # folded, changing nothing


def judge(sent: list[Sent], seen: Observed) -> Judgement:
    folded, rejected, waiting, ignored = [], [], [], []
    for event in sent:
        dead = seen.dead.get((event.partition, event.offset))
        key = (event.job_id, event.offset)
        if dead is not None:
            rejected.append(Rejection(event, *dead))
        elif key in seen.decided:
            folded.append(event)
            if key in seen.ignored:
                ignored.append((event, seen.ignored[key]))
        else:
            waiting.append(event)
    return Judgement(folded, rejected, waiting, ignored)


def summary(judgement: Judgement, wait_s: float) -> list[str]:
    """The lines that tell the user the outcome (stderr)."""
    done = len(judgement.folded) + len(judgement.rejected)
    lines = []
    if done:
        lines.append(
            f"the scheduler folded {len(judgement.folded)} event(s)"
            + (f" and rejected {len(judgement.rejected)}:" if judgement.rejected else "")
        )
        lines.extend(rejection.line() for rejection in judgement.rejected)
    if judgement.ignored:
        lines.append(f"it ignored {len(judgement.ignored)} of the folded event(s):")
        lines.extend(
            f"  {event.origin}: {event.name} of job {event.job_id}: {why}"
            for event, why in judgement.ignored
        )
    if judgement.open:
        first = judgement.open[0]
        lines.append(
            f"no verdict on {len(judgement.open)} event(s) within {wait_s:g} s (the first: "
            f"{first.origin}, job {first.job_id}): is the scheduler running? `make status` "
            "shows it; `tail decisions` and `tail dead-letters` show its verdicts later"
        )
    return lines


def progress(sent: int, total: int, judgement: Judgement) -> str:
    """A progress line while a long file is sent."""
    return (
        f"sent {sent} of {total} event(s); so far {len(judgement.folded)} folded, "
        f"{len(judgement.rejected)} rejected"
    )


def event_lines(text: str) -> list[int]:
    """The line numbers of a JSON-lines log's events (blank and `#` lines hold none),
    as `services.contracts.eventlog.read_log` skips them."""
    return [
        number
        for number, line in enumerate(text.split("\n"), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]


# -- `scalefold cluster`: what the actuator did, and the scheduler's verdict on it -------


def did(verb: str, job: str, reply: dict[str, Any]) -> str | None:
    """What the actuator did for a `scalefold cluster VERB` request (its control
    endpoint's reply), in a few words; None if it found nothing to do."""
    events = reply.get("events") or []
    managers = [str(e.get("taskManager")) for e in events if e.get("taskManager")]
    if verb == "add-taskmanagers" and managers:
        return f"job {job}: {len(managers)} TaskManager(s) started ({', '.join(managers)})"
    if verb == "kill-taskmanager" and managers:
        return f"job {job}: TaskManager {managers[0]} killed"
    if verb == "fail-task" and events:
        return f"job {job}: a task failed"
    if verb == "fail-checkpoints" and "failingCheckpoints" in reply:
        return f"job {job}: the actuator fails its next {reply['failingCheckpoints']} checkpoint(s)"
    return None


def nothing_done(verb: str, job: str, tm: str | None) -> str:
    """The line for a request the actuator found nothing to do for."""
    if verb == "kill-taskmanager":
        which = f"no TaskManager {tm}" if tm else "no TaskManager"
        return (
            f"job {job} has {which} on the cluster to kill; `scalefold cluster state --job {job}`"
        )
    return f"the actuator did nothing for {verb} of job {job}"


def outcome(done: str, expected: int, judgement: Judgement, wait_s: float) -> tuple[str, int]:
    """One line and the exit status for a request whose `expected` events were judged
    (`judgement.open` also holds none the actuator has not produced yet: see
    `missing`): 1 if the scheduler rejected one."""
    if judgement.rejected:
        first = judgement.rejected[0]
        more = f" (and {len(judgement.rejected) - 1} more)" if len(judgement.rejected) > 1 else ""
        return (
            f"{done}, but the scheduler rejected its {first.sent.name} "
            f"({first.error_class}): {first.reason}{more}",
            1,
        )
    answered = len(judgement.folded)
    if answered < expected:
        return (
            f"{done}; no verdict from the scheduler on {expected - answered} of {expected} "
            f"event(s) within {wait_s:g} s: is the scheduler running? `make status` shows it",
            0,
        )
    line = f"{done}; the scheduler folded {answered} of {expected} event(s)"
    if judgement.ignored:
        event, why = judgement.ignored[0]
        line += f", ignoring its {event.name}: {why}"
    return line, 0
