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
