"""A job's state on job-snapshots, and folds that start from it once the job's first inputs
have left job-events: the scheduler writes one at the first input of each interval of the
job's clock, and a fold from it gives what the fold from the first input gives."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Topics
from services.contracts import records as r
from services.contracts.eventlog import read_log
from services.contracts.events import Event, JobSubmitted, RequirementsUpdated, to_record
from services.contracts.kafka import partition_for
from services.scheduler.adapters.processor import Incoming, Processor, snapshot_due
from services.scheduler.core.driver import Replay
from services.scheduler.core.effects import RescaleUpdated
from services.scheduler.core.serde import STATE_FORMAT, loads
from services.scheduler.foresight import foresee
from services.scheduler.whatif import Start, fold_start, pinned_state, tally

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
DAY = 86_400_000
TOPICS = Topics("p.")


def example(name: str, codec: Codec) -> list[Event]:
    return read_log(EXAMPLES / name, codec)


def state_after(events: list[Event]) -> Any:
    run = Replay()
    for event in events:
        list(run.feed(event))
    (job,) = [j for j in run.jobs.values() if j is not None]
    return job


def rescales_after(run: Replay, events: list[Event]) -> dict[str, dict[str, Any]]:
    """The latest record of every rescale the fold updates while folding `events`."""
    found: dict[str, dict[str, Any]] = {}
    effects = [e for event in events for e in run.feed(event)] + list(run.drain())
    for effect in effects:
        if isinstance(effect, RescaleUpdated):
            found[effect.rescale_uuid] = effect.record
    return found


@pytest.mark.parametrize(
    "log", ["reactive-mode.jsonl", "failover.jsonl", "requirements-update.jsonl"]
)
def test_a_fold_from_a_snapshot_goes_on_as_the_fold_from_the_first_input(
    log: str, codec: Codec
) -> None:
    events = example(log, codec)
    for cut in range(1, len(events)):
        whole = Replay()
        for event in events[:cut]:
            list(whole.feed(event))
        expected = rescales_after(whole, events[cut:])
        resumed = Replay()
        resumed.resume(state_after(events[:cut]))
        assert rescales_after(resumed, events[cut:]) == expected, f"cut at input {cut}"


def test_a_what_if_from_a_snapshot_counts_what_came_after_it(codec: Codec) -> None:
    events = example("reactive-mode.jsonl", codec)
    cut = len(events) // 2
    start = state_after(events[:cut])
    whole, tail = tally(events, ()), tally(events[cut:], (), start)
    assert tail.horizon == whole.horizon
    after = {rec["rescaleUuid"] for rec in tail.rescales}
    assert after and after <= {rec["rescaleUuid"] for rec in whole.rescales}
    assert {rec["rescaleUuid"] for rec in whole.rescales} - after  # the earlier ones are not


def test_a_what_ifs_keys_are_pinned_over_the_snapshots_configuration(codec: Codec) -> None:
    start = state_after(example("reactive-mode.jsonl", codec)[:5])
    key = "jobmanager.adaptive-scheduler.executing.cooldown-after-rescaling"
    changed = pinned_state(start, {key: "60s"})
    assert dict(changed.settings)[key] == "60s"
    assert dict(changed.settings)["scheduler-mode"] == "REACTIVE"
    assert pinned_state(start, {}) is start


def test_a_forecast_from_a_snapshot_is_the_forecast_from_the_first_input(codec: Codec) -> None:
    events = example("requirements-update.jsonl", codec)
    job = events[0].job_id
    vertex = events[0].vertices[0].id  # type: ignore[attr-defined]
    now = events[-1].timestamp + 60_000
    for cut in range(1, len(events)):
        start = state_after(events[:cut])
        for target in (1, 2, 4):
            whole = foresee(job, events, {vertex: target}, now)
            resumed = foresee(job, events[cut:], {vertex: target}, now, start=start)
            assert resumed == whole, f"cut at input {cut}, target {target}"


def submission(job: str = "j") -> JobSubmitted:
    return JobSubmitted(job, 0, "j", (), None, ())


def test_the_first_input_is_the_start_while_the_log_holds_the_submission() -> None:
    inputs: list[tuple[int, Event]] = [(3, submission()), (9, RequirementsUpdated("j", 1, ()))]
    assert fold_start(inputs, [], log_start=2) == (None, [e for _, e in inputs])
    # nothing deleted yet: every input is there, a job never submitted included (the
    # scheduler dead-letters its inputs; a what-if folds them as the scheduler did)
    stray: list[tuple[int, Event]] = [(4, RequirementsUpdated("k", 1, ()))]
    assert fold_start(stray, [], log_start=0) == (None, [stray[0][1]])


def test_without_the_submission_the_oldest_snapshot_the_log_follows_is_the_start(
    codec: Codec,
) -> None:
    job = state_after(example("failover.jsonl", codec)[:3])
    later = [(20, RequirementsUpdated("j", 5, ())), (31, RequirementsUpdated("j", 6, ()))]
    gone, old, held, newer = Start(2, job), Start(12, job), Start(19, job), Start(25, job)
    # the partition holds offsets 20 on: a snapshot through 19 is followed by all of them
    assert fold_start(later, [newer, held, gone], log_start=20) == (held, [e for _, e in later])
    assert fold_start(later, [newer, gone], log_start=20) == (newer, [later[1][1]])
    # every snapshot older than what the log holds: the inputs between are gone
    assert fold_start(later, [old, gone], log_start=20) is None
    assert fold_start(later, [], log_start=20) is None
    # a job none of whose inputs the log holds, from its latest snapshot the log follows
    assert fold_start([], [held], log_start=20) == (held, [])
    assert fold_start([], [], log_start=20) == (None, [])


def processed(codec: Codec, events: list[Event]) -> list[Any]:
    """What the processor sends for a job's inputs, offset by offset, as the service folds."""
    processor = Processor(codec, TOPICS, clock=lambda: 0.0, snapshot_interval_ms=DAY)
    stored, sent = None, []
    for offset, event in enumerate(events):
        key = event.job_id.encode()
        name, record = to_record(event)
        message = Incoming(
            "p.job-events", partition_for(key, 6), offset, key, codec.encode(name, record)
        )
        outcome = processor.process(message, stored)
        stored = outcome.stored or stored
        sent.append(
            [
                codec.decode(out.value)
                for out in outcome.outgoing
                if out.topic == TOPICS.job_snapshots
            ]
        )
    return sent


def test_the_scheduler_writes_a_snapshot_at_a_jobs_first_input_of_each_day(codec: Codec) -> None:
    base = example("requirements-update.jsonl", codec)
    shift = 5 * DAY - base[3].timestamp  # midnight falls between the third and fourth input
    assert base[2].timestamp < base[3].timestamp
    shifted = [replace(e, timestamp=e.timestamp + shift) for e in base]
    day, later = shifted[:3], shifted[3:]
    sent = processed(codec, day + later)
    where = [n for n, snapshots in enumerate(sent) if snapshots]
    assert where == [len(day)]  # the first input past midnight, and none before or after
    (decoded,) = sent[len(day)]
    record = decoded.record
    assert decoded.schema == r.JOB_SNAPSHOT
    assert record["offset"] == len(day) and record["stateFormat"] == STATE_FORMAT
    assert record["partition"] == partition_for(base[0].job_id.encode(), 6)
    assert loads(record["state"]) == state_after(day + later[:1])
    assert record["stateTimestampMillis"] == loads(record["state"]).now


def test_a_snapshot_is_due_only_at_a_new_interval() -> None:
    assert snapshot_due(DAY - 1, DAY, DAY)
    assert not snapshot_due(DAY, 2 * DAY - 1, DAY)
    assert snapshot_due(5, 3 * DAY, DAY)
    assert not snapshot_due(5, 3 * DAY, 0)  # 0: never
