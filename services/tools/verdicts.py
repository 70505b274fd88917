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
