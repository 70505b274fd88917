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
    assert t.JOB_EVENTS.config() == {"cleanup.policy": "delete", "retention.ms": "-1"}


def test_the_actuators_snapshots_outpace_the_retention_of_what_they_stand_for() -> None:
    """A restart reads `decisions` and `job-events` on from the latest snapshot: the
    topics it folds must keep records well beyond the default snapshot interval."""
    from services.cli import parse_args

    interval_ms = parse_args(["actuator"]).snapshot_minutes * 60_000
    assert 0 < interval_ms * 24 <= t.DECISIONS.retention_ms
    assert t.JOB_EVENTS.retention_ms == t.INFINITE
    config = t.ACTUATOR_SNAPSHOTS.config()
    assert config["cleanup.policy"] == "compact" and config["retention.ms"] == "-1"
    assert int(config["max.message.bytes"]) >= 16 * 2**20
    assert int(config["segment.ms"]) <= 24 * 3600 * 1000
    assert t.ACTUATOR_SNAPSHOTS in t.ACCESS["actuator"].reads
    assert t.ACTUATOR_SNAPSHOTS in t.ACCESS["actuator"].writes
