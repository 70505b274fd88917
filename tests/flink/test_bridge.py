"""The bridge against the real Flink 2.3.0 of the test session and a real broker: every
rescale the REST API shows reaches flink-rescales, its latest revision equal to Flink's
details; the job and its TaskManagers reach job-events, and the scheduler core folds them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from services.bridge.poll import ClusterPoller
from services.bridge.rescales import record as rescale_record
from services.bridge.service import Bridge
from services.bridge.sink import Sink
from services.contracts import Codec
from services.contracts import jobconfig as k
from services.contracts.events import JobSubmitted
from services.contracts.flinkrest import FlinkRest
from services.contracts.settings import Settings
from services.contracts.topics import flink_job_key
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import Rejected, RescaleUpdated
from tests.flink.flink_support import FlinkTestCluster, wait_for
from tests.integration.bridge_support import read_all, read_events
from tests.integration.conftest import broker_settings, kafka  # noqa: F401  (fixtures)

BUCKET, SUM = "Bucket", "Sum -> Discard: Writer"
IGNORED = ("revision", "observedAtMillis")


@pytest.fixture
def running_bridge(kafka: Settings, codec: Codec, flink: FlinkTestCluster) -> Iterator[Bridge]:  # noqa: F811
    sink = Sink(kafka, codec, f"{kafka.topics.own('bridge')}.t")
    poller = ClusterPoller("t", FlinkRest(flink.url, 10.0))
    yield Bridge([poller], sink, 0.5, sink.restore())
    sink.close()


def forwarded(kafka: Settings, codec: Codec, jid: str) -> dict[str, dict[str, Any]]:  # noqa: F811
    """The latest revision of every forwarded rescale of job `jid`, by uuid (the session's
    cluster is shared: the jobs of the worker's earlier tests are forwarded too)."""
    latest: dict[str, dict[str, Any]] = {}
    for _, value in read_all(kafka, kafka.topics.flink_rescales, codec):
        if value["jobId"] != jid:
            continue
        if value["revision"] > latest.get(value["rescaleUuid"], {"revision": 0})["revision"]:
            latest[value["rescaleUuid"]] = value
    return latest


def same_as_flink(flink: FlinkTestCluster, jid: str, record: dict[str, Any]) -> None:
    details = flink.rest.rescale_details(jid, record["rescaleUuid"])
    expected = rescale_record("t", jid, record["jobName"], details, revision=0, observed_at=0)
    assert {k: v for k, v in record.items() if k not in IGNORED} == {
        k: v for k, v in expected.items() if k not in IGNORED
    }


def test_every_rescale_flink_shows_is_forwarded_and_the_job_is_predicted(
    kafka: Settings,  # noqa: F811
    codec: Codec,
    flink: FlinkTestCluster,
    running_bridge: Bridge,
) -> None:
    flink.add_taskmanagers(2)
    jid = flink.submit("--max-parallelism", "4", "--checkpoint-interval", "1500")
    flink.wait_running(jid, {BUCKET: 1, SUM: 1})
    flink.wait_rescales(jid, 1)
    running_bridge.step(0.0)
    flink.add_taskmanagers(1)
    history = flink.wait_rescales(jid, 2)
    flink.wait_running(jid, {})

    def all_there() -> dict[str, dict[str, Any]] | None:
        running_bridge.step(running_bridge.schedules["t"].due)
        found = forwarded(kafka, codec, jid)
        final = all(found.get(r["rescaleUuid"], {}).get("terminalState") for r in history)
        return found if final else None

    found = wait_for("the rescales on flink-rescales", all_there)
    assert sorted(found) == sorted(r["rescaleUuid"] for r in flink.history(jid))
    for record in found.values():
        same_as_flink(flink, jid, record)

    key = flink_job_key("t", jid)
    # The worker's earlier tests may have left jobs on the shared cluster: theirs are
    # observed (and keyed) as their own.
    inputs = [e for e in read_events(kafka, codec) if e.job_id == key]
    assert inputs
    submitted = inputs[0]
    assert isinstance(submitted, JobSubmitted)
    assert {v.ssg_name for v in submitted.vertices} == {"default", "sums"}
    config = dict(submitted.configuration)
    assert config[k.OBSERVED_CLUSTER] == "t" and config[k.RESTART_STRATEGY] == "fixed-delay"
    assert submitted.checkpoint_interval_ms == 1500
    _, effects = replay(inputs)
    assert not [e for e in effects if isinstance(e, Rejected)]
    predicted = [e.record for e in effects if isinstance(e, RescaleUpdated)]
    assert predicted[0]["triggerCause"] == "INITIAL_SCHEDULE"
