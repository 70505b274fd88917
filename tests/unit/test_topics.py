"""Topic names come from one place and are distinct."""

from __future__ import annotations

from services.contracts import topics as t
from services.contracts.topics import Topics


def test_all_topics_are_distinct_and_prefixed() -> None:
    names = Topics("p.").all()
    assert len(names) == len(t.ALL)
    assert all(name.startswith("p.") for name in names)


def test_every_input_event_shares_the_job_events_topic() -> None:
    from services.contracts import records as r

    assert t.JOB_EVENTS.values == r.INPUT_EVENTS
    assert t.JOB_EVENTS.key == "jobId"


def test_topic_config_carries_cleanup_and_retention() -> None:
    assert t.DEAD_LETTERS.config()["retention.ms"] == str(30 * 24 * 3600 * 1000)
    assert t.JOB_EVENTS.config() == {"cleanup.policy": "delete", "retention.ms": str(14 * t.DAY_MS)}


def test_the_actuators_snapshots_outpace_the_retention_of_what_they_stand_for() -> None:
    """A restart reads `decisions` and `job-events` on from the latest snapshot: the
    topics it folds must keep records well beyond the default snapshot interval."""
    from services.cli import parse_args

    interval_ms = parse_args(["actuator"]).snapshot_minutes * 60_000
    assert 0 < interval_ms * 24 <= t.DECISIONS.retention_ms
    assert interval_ms * 24 <= t.JOB_EVENTS.retention_ms
    config = t.ACTUATOR_SNAPSHOTS.config()
    assert config["cleanup.policy"] == "compact" and config["retention.ms"] == "-1"
    assert int(config["max.message.bytes"]) >= 16 * 2**20
    assert int(config["segment.ms"]) <= 24 * 3600 * 1000
    assert t.ACTUATOR_SNAPSHOTS in t.ACCESS["actuator"].reads
    assert t.ACTUATOR_SNAPSHOTS in t.ACCESS["actuator"].writes


def test_a_topic_kept_longer_than_declared_is_a_drift_that_keeps_more() -> None:
    """An install from before `decisions` had a retention keeps it for ever: its disk grows."""
    old = t.drifts("p.decisions", t.DECISIONS, {"cleanup.policy": "delete", "retention.ms": "-1"})
    assert [(d.key, d.declared, d.actual, d.keeps_more) for d in old] == [
        ("retention.ms", str(t.WEEK_MS), "-1", True)
    ]
    assert str(old[0]) == (
        "topic p.decisions: retention.ms is for ever (-1) on the broker, scalefold declares "
        "7 days (604800000)"
    )
    shorter = t.drifts("p.decisions", t.DECISIONS, {"retention.ms": "420000"})
    assert [(d.actual, d.keeps_more) for d in shorter] == [("420000", False)]
    longer = t.drifts("p.decisions", t.DECISIONS, {"retention.ms": str(2 * t.WEEK_MS)})
    assert longer[0].keeps_more
    # job-events is declared 14 days: an install from before, keeping it for ever, keeps more
    assert t.drifts("p.job-events", t.JOB_EVENTS, {"retention.ms": "-1"})[0].keeps_more
    assert not t.drifts("p.job-events", t.JOB_EVENTS, {"retention.ms": "1000"})[0].keeps_more
    compacted = t.drifts("p.decisions", t.DECISIONS, {"cleanup.policy": "compact"})
    assert [(d.key, d.keeps_more) for d in compacted] == [("cleanup.policy", True)]
    assert not t.drifts("p.decisions", t.DECISIONS, {})  # nothing described: nothing judged


def test_a_command_is_deleted_before_its_outcome_and_after_the_planners_lookback() -> None:
    # a record is deleted between its retention and that plus a segment's time: every
    # outcome must outlive its command (a restarted actuator would apply it again), and
    # the ledger of commands must reach past what the planner can plan again (48 h)
    from dataclasses import fields

    from services.history.job import RunOptions

    latest_command_gone = t.COMMANDS.retention_ms + t.SEGMENT_MS
    assert t.COMMAND_OUTCOMES.retention_ms > latest_command_gone
    lookback = next(f.default for f in fields(RunOptions) if f.name == "plan_lookback_hours")
    assert t.COMMANDS.retention_ms > lookback * 3_600_000


def test_every_input_job_events_holds_follows_a_snapshot_or_its_jobs_first_input() -> None:
    """A fold of a job starts at its first input or at a snapshot whose successors the log
    still holds: the snapshots must outlive every job-events record (its retention and a
    segment), and the scheduler's default interval be well inside the retention."""
    from services.cli import parse_args

    assert t.JOB_SNAPSHOTS.retention_ms > t.JOB_EVENTS.retention_ms + t.SEGMENT_MS
    assert t.JOB_SNAPSHOTS.config()["cleanup.policy"] == "delete"
    interval_ms = parse_args(["scheduler"]).snapshot_hours * 3_600_000
    assert 0 < interval_ms * 7 <= t.JOB_EVENTS.retention_ms
    assert t.JOB_SNAPSHOTS in t.ACCESS["scheduler"].writes
    assert {t.JOB_EVENTS, t.JOB_SNAPSHOTS} <= set(t.ACCESS["history"].reads)
