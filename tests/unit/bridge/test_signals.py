"""Workload signals (services/bridge/signals.py and their sampling in poll.py): a running
Flink 2.3.0 job's captured answers become a `FlinkWorkloadSignal` the contract encodes;
Flink's values are kept as given; what Flink does not report is None; an answer of the
wrong shape is a dead letter and the sample goes on without it."""

from __future__ import annotations

import copy
import math
from typing import Any

import pytest

from services.bridge import signals as sg
from services.bridge.offsets import JobOffset
from services.bridge.poll import DEFAULT_SIGNALS_INTERVAL_MS, RELIST_PENDING_MS, ClusterPoller
from services.bridge.translate import MalformedAnswerError
from services.contracts import Codec, SchemaRegistry
from services.contracts import records as r
from services.contracts.flinkrest import FlinkNotFoundError
from tests.unit.bridge.test_poll import Clocks, SlowJobManager
from tests.unit.bridge.test_step import JID
from tests.unit.bridge.test_translate import answer

SOURCE, MAP = "cbc357ccb763df2852fee8c4fc7d55f2", "90bea66de1c231edf33913ecd54406c1"
"""The captured job's vertices: `Source: Numbers -> Slow map` and the keyed one after it."""


def _aggregated(busy: Any, pending: Any = None) -> list[dict[str, Any]]:
    found = [
        {"id": "busyTimeMsPerSecond", "avg": busy, "max": 900.0, "sum": 1800.0},
        {"id": "backPressuredTimeMsPerSecond", "avg": 0.0, "max": 0.0, "sum": 0.0},
        {"id": "idleTimeMsPerSecond", "avg": 100.0, "max": 150.0, "sum": 200.0},
        {"id": "numRecordsInPerSecond", "avg": 250.0, "max": 260.0, "sum": 500.0},
        {"id": "numRecordsOutPerSecond", "avg": 250.0, "max": 260.0, "sum": 500.0},
    ]
    if pending is not None:
        found.append(
            {"id": "Source__Numbers.pendingRecords", "avg": 1.0, "max": 2.0, "sum": pending}
        )
    return found


def test_a_sample_carries_flinks_counters_and_gauges_and_encodes_by_the_contract() -> None:
    job = answer("job.json")
    gauges = {SOURCE: sg.gauges(_aggregated(850.0, 4096), "Source__Numbers.pendingRecords")}
    record = sg.signal("local", job, gauges, 1_795_935_506_600)
    source, keyed = record["vertices"]
    assert (record["jobId"], record["jobState"], record["jobManagerMillis"]) == (
        JID,
        "RUNNING",
        job["now"],
    )
    assert source["jobVertexName"] == "Source: Numbers -> Slow map"
    assert (source["inputs"], keyed["inputs"]) == ([], [SOURCE])  # the plan's edges
    assert (source["keyedInput"], keyed["keyedInput"]) == (False, True)  # its HASH edge
    assert (source["readRecords"], source["writeRecords"], source["countersComplete"]) == (
        0,
        831,
        True,
    )
    assert source["accumulatedBusyTimeMs"] == 10351.0
    assert (source["busyTimeMsPerSecondAvg"], source["busyTimeMsPerSecondMax"]) == (850.0, 900.0)
    assert (source["numRecordsOutPerSecond"], source["pendingRecords"]) == (500.0, 4096.0)
    # a vertex without gauges (its metrics answer unusable): its counters, no gauges
    assert keyed["readRecords"] is not None and keyed["busyTimeMsPerSecondAvg"] is None
    assert f"{SOURCE}.read-bytes" in record["unknownFields"]  # kept, not dropped
    codec = Codec(SchemaRegistry.load())
    decoded = codec.decode(codec.encode(r.FLINK_WORKLOAD_SIGNAL, record))
    assert decoded.record["vertices"][0]["pendingRecords"] == 4096.0


def test_flinks_values_are_kept_as_given_and_a_wrong_shape_is_refused() -> None:
    nan = sg.gauges(_aggregated("NaN"), None)
    assert math.isnan(nan["busyTimeMsPerSecondAvg"] or 0.0)
    assert sg.gauges(_aggregated(-5.0), None)["busyTimeMsPerSecondAvg"] == -5.0
    assert nan["pendingRecords"] is None  # no operator of the vertex reports one
    assert sg.gauges([], None) == dict.fromkeys(nan)  # nothing reported yet
    # a vertex's accumulated times are doubles, which Flink's JSON writes "NaN" when it has
    # none (a real Flink 2.3, 2026-12-06: the whole sample was dead-lettered for it)
    job = answer("job.json")
    job["vertices"][0]["metrics"]["accumulated-busy-time"] = "NaN"
    source = sg.signal("local", job, {}, 1_795_935_506_600)["vertices"][0]
    assert math.isnan(source["accumulatedBusyTimeMs"])
    job["vertices"][0]["metrics"]["accumulated-busy-time"] = "busy"
    with pytest.raises(MalformedAnswerError):
        sg.signal("local", job, {}, 1_795_935_506_600)
    for bad in ({"id": "x"}, [{"id": "busyTimeMsPerSecond", "avg": True}], [{"avg": 1.0}]):
        with pytest.raises(MalformedAnswerError):
            sg.gauges(bad, None)
    listing = [{"id": "numRecordsIn"}, {"id": "Source__Workload.pendingRecords"}]
    assert sg.source_metrics(listing) == sg.SourceMetrics("Source__Workload.pendingRecords", None)
    assert sg.source_metrics([{"id": "busyTimeMsPerSecond"}]) == sg.SourceMetrics(None, None)
    reader = "Source__Kafka.KafkaSourceReader.topic"
    partitions = [{"id": f"{reader}.{t}.partition.{n}.currentOffset"} for t in "ab" for n in (0, 1)]
    assert sg.source_metrics([*listing, *partitions]).partitions == 4  # two topics' two each
    with pytest.raises(MalformedAnswerError):
        sg.source_metrics({"id": "x"})
    query = sg.metrics_query("Source__Workload.pendingRecords")
    assert query.endswith(".pendingRecords&agg=avg,max,sum")


class MeteredJobManager(SlowJobManager):
    """The captured job, with its vertices' metric listings and aggregated metrics,
    answering at once."""

    def __init__(self, clocks: Clocks) -> None:
        super().__init__(clocks)
        base = f"/jobs/{JID}/vertices"
        self.answers[f"{base}/{SOURCE}/subtasks/metrics"] = [
            {"id": "busyTimeMsPerSecond"},
            {"id": "Source__Numbers.pendingRecords"},
        ]  # no partition assigned yet
        self.answers[f"{base}/{MAP}/subtasks/metrics"] = [{"id": "busyTimeMsPerSecond"}]
        self.metrics = {SOURCE: _aggregated(400.0, 12), MAP: "not a list"}

    def get_json(self, path: str) -> Any:
        """Each answer after 1 ms: a poll takes far less than the sampling interval."""
        self.clocks.advance(1)
        head, _, query = path.partition("?")
        found = self.metrics.get(head.split("/")[-3]) if query else self.answers.get(path)
        if found is None:
            raise FlinkNotFoundError(path, [])
        return copy.deepcopy(found)


def test_a_running_job_is_sampled_once_an_interval_and_a_bad_answer_is_a_letter() -> None:
    clocks = Clocks()
    rest = MeteredJobManager(clocks)
    poller = ClusterPoller("local", rest, lambda: clocks.wall, lambda: clocks.ticks)  # type: ignore[arg-type]
    offsets: dict[str, JobOffset] = {}
    first = poller.poll(offsets, clocks.wall)
    (sample,) = first.signals
    source, keyed = sample["vertices"]
    assert (source["pendingRecords"], source["busyTimeMsPerSecondAvg"]) == (12.0, 400.0)
    assert source["sourcePartitions"] is None and keyed["sourcePartitions"] is None
    assert keyed["busyTimeMsPerSecondAvg"] is None and keyed["writeRecords"] is not None
    rest.answers[f"/jobs/{JID}/vertices/{SOURCE}/subtasks/metrics"].append(
        {"id": "Source__Numbers.KafkaSourceReader.topic.t.partition.5.currentOffset"}
    )  # the reader's partitions, once assigned: listed again after RELIST_PENDING_MS
    assert any("subtasks/metrics" in x.path and x.reason for x in first.letters)
    assert poller.poll(offsets, clocks.wall).signals == []  # within the interval
    clocks.advance(DEFAULT_SIGNALS_INTERVAL_MS)
    assert len(poller.poll(offsets, clocks.wall).signals) == 1
    clocks.advance(RELIST_PENDING_MS)
    (sample,) = poller.poll(offsets, clocks.wall).signals
    assert sample["vertices"][0]["sourcePartitions"] == 1
    rest.answers[f"/jobs/{JID}"]["state"] = "RESTARTING"
    clocks.advance(DEFAULT_SIGNALS_INTERVAL_MS)
    assert poller.poll(offsets, clocks.wall).signals == []  # only a running job
    off = ClusterPoller("local", rest, lambda: clocks.wall, lambda: clocks.ticks, 0)  # type: ignore[arg-type]
    rest.answers[f"/jobs/{JID}"]["state"] = "RUNNING"
    assert off.poll({}, clocks.wall).signals == []  # --signals-interval 0


READER = "Source__Kafka.KafkaSourceReader.topic"


def test_a_sources_backlog_is_the_brokers_end_offsets_beyond_its_readers_offsets() -> None:
    listing = [{"id": f"{READER}.in.partition.{n}.currentOffset"} for n in (0, 1, 2)]
    source = sg.source_metrics(listing)
    assert source.partitions == 3
    assert set(source.offsets.values()) == {("in", 0), ("in", 1), ("in", 2)}
    query = sg.metrics_query(None, list(source.offsets))
    assert f"{READER}.in.partition.2.currentOffset&agg=" in query
    answer = [
        {"id": f"{READER}.in.partition.0.currentOffset", "max": 99.0, "sum": 99.0},
        {"id": f"{READER}.in.partition.1.currentOffset", "max": -1.0, "sum": -1.0},
        {"id": f"{READER}.in.partition.2.currentOffset", "max": "NaN", "sum": "NaN"},
    ]  # partition 1: nothing emitted yet; partition 2: not a count, left out
    current = sg.current_offsets(answer, source)
    assert current == {("in", 0): 99.0, ("in", 1): -1.0}
    marks = {("in", 0): (0, 1_100), ("in", 1): (40, 540), ("in", 2): (0, 9_999)}
    # 1,100 - 100 (the next after 99) + 540 - 40 (none of it read yet)
    assert sg.source_backlog(current, marks) == 1_000.0 + 500.0
    assert sg.source_backlog(current, {("in", 0): (0, 50)}) == 0.0  # end behind: none
    assert sg.source_backlog(current, {}) is None  # the broker knew none of them
    assert sg.source_backlog({}, marks) is None
    # what the topic received, over the same partitions: 1,100 + 540 (partition 2 not
    # counted, as in the backlog)
    assert sg.source_end_offsets(current, marks) == 1_640
    assert sg.source_end_offsets({}, marks) is None
    assert sg.current_offsets("not a list", source) == {}


class KafkaJobManager(MeteredJobManager):
    """The captured job, its source a Kafka reader of two partitions of `in`."""

    def __init__(self, clocks: Clocks) -> None:
        super().__init__(clocks)
        self.answers[f"/jobs/{JID}/vertices/{SOURCE}/subtasks/metrics"] += [
            {"id": f"{READER}.in.partition.{n}.currentOffset"} for n in (0, 1)
        ]
        self.metrics[SOURCE] = [
            *_aggregated(400.0, 12),
            {"id": f"{READER}.in.partition.0.currentOffset", "max": 9.0},
            {"id": f"{READER}.in.partition.1.currentOffset", "max": 19.0},
        ]


def test_a_sample_carries_the_brokers_backlog_and_goes_on_without_it_when_it_fails() -> None:
    clocks = Clocks()
    asked: list[list[tuple[str, int]]] = []
    failing = {"now": False}

    def ends(partitions: Any) -> dict[tuple[str, int], tuple[int, int]]:
        asked.append(list(partitions))
        if failing["now"]:
            raise RuntimeError("broker gone")
        return {("in", 0): (0, 1_010), ("in", 1): (0, 20)}

    rest = KafkaJobManager(clocks)
    poller = ClusterPoller(
        "local",
        rest,  # type: ignore[arg-type]
        lambda: clocks.wall,
        lambda: clocks.ticks,
        end_offsets=ends,
    )
    (sample,) = poller.poll({}, clocks.wall).signals
    source, keyed = sample["vertices"]
    assert (source["sourceBacklog"], source["pendingRecords"]) == (1_000.0, 12.0)
    assert source["sourceEndOffsets"] == 1_030  # v3: what the topic received
    assert keyed["sourceBacklog"] is None and keyed["sourceEndOffsets"] is None  # no source
    assert asked == [[("in", 0), ("in", 1)]]
    codec = Codec(SchemaRegistry.load())
    decoded = codec.decode(codec.encode(r.FLINK_WORKLOAD_SIGNAL, sample))
    assert decoded.record["vertices"][0]["sourceBacklog"] == 1_000.0
    assert decoded.record["vertices"][0]["sourceEndOffsets"] == 1_030
    failing["now"] = True
    clocks.advance(DEFAULT_SIGNALS_INTERVAL_MS)
    (sample,) = poller.poll({}, clocks.wall).signals
    assert sample["vertices"][0]["sourceBacklog"] is None  # said once; pendingRecords stands
    assert sample["vertices"][0]["sourceEndOffsets"] is None
    assert sample["vertices"][0]["pendingRecords"] == 12.0
    without = ClusterPoller("local", rest, lambda: clocks.wall, lambda: clocks.ticks)  # type: ignore[arg-type]
    (sample,) = without.poll({}, clocks.wall).signals
    assert sample["vertices"][0]["sourceBacklog"] is None  # no broker to ask
