"""A running Flink job's workload, read from its REST answers into a `FlinkWorkloadSignal`. Pure.

Two answers make a sample (issue 50, item 2):
- `/jobs/:jid`, which the bridge reads every poll anyway: per vertex, Flink's sums over
  its subtasks of records read and written and of accumulated busy, back-pressured and
  idle time. Counters: what a consumer divides by the time between two samples, the
  way the Kubernetes operator's autoscaler derives a vertex's true processing rate
  (records per busy second, after DS2). Its job plan gives each vertex's inputs (the
  edges along which target rates flow: history/parallelism.py).
- `/jobs/:jid/vertices/:vid/subtasks/metrics?get=...&agg=...`, one per vertex: the
  per-second gauges (busy, back-pressured and idle ms per second, records in and out
  per second) and a source's `pendingRecords` (FLIP-33; the Kafka source's lag), whose
  name carries its operator's (`Source__Workload.pendingRecords`): found in the
  vertex's metric listing (`source_metrics`), which also names each Kafka partition a
  Kafka source reads (a source's parallelism beyond them buys nothing) and the reader's
  `currentOffset` metric of each.

A Kafka source's backlog as the broker shows it (`source_backlog`, v2's `sourceBacklog`,
and what the topic received, v3's `sourceEndOffsets`: `source_end_offsets`):
the broker's end offset of each partition less the next offset the reader emits
(`currentOffset` + 1). The connector's `pendingRecords` is the Kafka consumer's
records-lag, which the consumer updates only when it fetches: under back pressure its
fetcher waits on a full queue, fetches nothing, and the lag stands still while the
topic grows (the autoscaling benchmark: 767 pending where the broker held 24,000 more
than the job had read). The end offsets are the bridge's to ask (poll.py, its
`--source-bootstrap-servers`); here they are data.

Flink's values are kept as given (NaN and negative ones too: the schema says why);
what Flink did not report is None. An answer of the wrong shape raises
`MalformedAnswerError` (the poll dead-letters it and sends no sample of that job).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any

from services.bridge.translate import MalformedAnswerError, field

GAUGES: dict[str, dict[str, str]] = {
    "busyTimeMsPerSecond": {"avg": "busyTimeMsPerSecondAvg", "max": "busyTimeMsPerSecondMax"},
    "backPressuredTimeMsPerSecond": {
        "avg": "backPressuredTimeMsPerSecondAvg",
        "max": "backPressuredTimeMsPerSecondMax",
    },
    "idleTimeMsPerSecond": {"avg": "idleTimeMsPerSecondAvg"},
    "numRecordsInPerSecond": {"sum": "numRecordsInPerSecond"},
    "numRecordsOutPerSecond": {"sum": "numRecordsOutPerSecond"},
}
"""Each task gauge asked for, and which of Flink's aggregates over the subtasks goes
into which field of `FlinkVertexSignal`."""
PENDING = "pendingRecords"
AGGREGATES = "avg,max,sum"

_COUNTERS = {
    "read-records": "readRecords",
    "write-records": "writeRecords",
}
_TIMES = {
    "accumulated-busy-time": "accumulatedBusyTimeMs",
    "accumulated-backpressured-time": "accumulatedBackPressuredTimeMs",
    "accumulated-idle-time": "accumulatedIdleTimeMs",
}
_COMPLETE = ("read-records-complete", "write-records-complete")
_KNOWN = frozenset({*_COUNTERS, *_TIMES, *_COMPLETE})
"""The keys of a vertex's `metrics` the record has fields for; others: `unknownFields`."""


KAFKA_PARTITION = re.compile(r"\.KafkaSourceReader\.topic\.(.+)\.partition\.(\d+)\.currentOffset$")
"""A Kafka source reader's metric of one partition it reads (the connector's, per topic)."""


Partition = tuple[str, int]
"""A Kafka topic's partition: the topic's name and the partition's number."""


@dataclass(frozen=True)
class SourceMetrics:
    """What a vertex's metric listing says of it as a source."""

    pending: str | None
    """The id of its `pendingRecords` metric (None: no operator of it reports one)."""
    partitions: int | None
    """The Kafka partitions it reads (None: none listed, or not a Kafka source)."""
    offsets: Mapping[str, Partition] = dataclass_field(default_factory=dict)
    """Each Kafka partition's `currentOffset` metric id, and the partition."""


def source_metrics(listing: Any) -> SourceMetrics:
    """A vertex's subtask metric listing (`[{"id": ...}, ...]`) read for its backlog metric
    and its Kafka partitions."""
    where = "subtasks/metrics"
    if not isinstance(listing, list):
        raise MalformedAnswerError(f"{where}: expected a list, got {type(listing).__name__}")
    ids = sorted(field(m, "id", str, f"{where}[]") for m in listing)
    pending = next((i for i in ids if i == PENDING or i.endswith(f".{PENDING}")), None)
    offsets = {
        i: (found.group(1), int(found.group(2)))
        for i in ids
        if (found := KAFKA_PARTITION.search(i))
    }
    return SourceMetrics(pending, len(set(offsets.values())) or None, offsets)


def metrics_query(pending: str | None, offsets: Sequence[str] = ()) -> str:
    """The query string of one vertex's aggregated gauges (and its pendingRecords and
    partitions' currentOffset metrics)."""
    names = [*GAUGES, *([pending] if pending else []), *offsets]
    return f"get={','.join(names)}&agg={AGGREGATES}"


def current_offsets(answer: Any, source: SourceMetrics) -> dict[Partition, float]:
    """Each partition's `currentOffset` in a vertex's aggregated answer (the `max` over
    its subtasks: one reads the partition, the others do not report it); a partition
    without one, or not a count, is left out."""
    if not isinstance(answer, list):
        return {}
    by_id = {m.get("id"): m for m in answer if isinstance(m, dict)}
    found: dict[Partition, float] = {}
    for metric, partition in source.offsets.items():
        value = _number(by_id.get(metric, {}), "max", f"subtasks/metrics?agg.{metric}")
        if value is not None and math.isfinite(value):
            found[partition] = value
    return found


def source_backlog(
    current: Mapping[Partition, float], marks: Mapping[Partition, tuple[int, int]]
) -> float | None:
    """Records the broker holds beyond what the source read (module doc): per partition
    with both, its end offset less the reader's next offset (`currentOffset` + 1; one
    below the partition's first offset, the reader has emitted none of it yet), summed.
    `marks`: each partition's (first, end) offsets as the broker answered. None: no
    partition had both."""
    known = [(current[p], marks[p]) for p in current.keys() & marks.keys()]
    if not known:
        return None
    return float(sum(max(0, end - max(first, int(at) + 1)) for at, (first, end) in known))


def source_end_offsets(
    current: Mapping[Partition, float], marks: Mapping[Partition, tuple[int, int]]
) -> int | None:
    """The broker's end offsets summed over the partitions `source_backlog` counts (v3's
    `sourceEndOffsets`): their change between two samples is what arrived, exactly. None:
    no partition had both."""
    known = current.keys() & marks.keys()
    return sum(marks[p][1] for p in known) if known else None


def gauges(answer: Any, pending: str | None) -> dict[str, float | None]:
    """One vertex's aggregated answer (`[{"id", "avg", "max", "sum"}, ...]`) as the
    signal's gauge fields (None: not reported)."""
    where = "subtasks/metrics?agg"
    if not isinstance(answer, list):
        raise MalformedAnswerError(f"{where}: expected a list, got {type(answer).__name__}")
    by_id = {field(m, "id", str, f"{where}[]"): m for m in answer}
    found: dict[str, float | None] = {}
    for metric, fields in GAUGES.items():
        for aggregate, name in fields.items():
            found[name] = _number(by_id.get(metric, {}), aggregate, f"{where}.{metric}")
    found["pendingRecords"] = (
        _number(by_id.get(pending, {}), "sum", f"{where}.{pending}") if pending else None
    )
    return found


def _number(entry: Mapping[str, Any], name: str, where: str) -> float | None:
    value = entry.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise MalformedAnswerError(f"{where}.{name}: expected a number, got {value!r:.80}")
    try:
        return float(value)  # Flink may write NaN and Infinity; "NaN" as text too
    except ValueError:
        raise MalformedAnswerError(
            f"{where}.{name}: expected a number, got {value!r:.80}"
        ) from None


def signal(
    cluster: str,
    job: Any,
    vertex_gauges: Mapping[str, Mapping[str, float | None]],
    observed_at_ms: int,
) -> dict[str, Any]:
    """The `FlinkWorkloadSignal` record of one sample: `job` is /jobs/:jid's answer,
    `vertex_gauges` each vertex's `gauges` by vertex id (a vertex missing: its gauges
    None)."""
    where = "jobs/:jid"
    now = field(job, "now", (int, type(None)), where)
    vertices: list[dict[str, Any]] = []
    unknown: dict[str, str] = {}
    edges = _edges(job.get("plan"), where)
    inputs, keyed = _inputs(edges), _keyed(edges)
    for vertex in field(job, "vertices", list, where):
        vid = field(vertex, "id", str, f"{where}.vertices[]")
        at = f"{where}.vertices[{vid}]"
        metrics = field(vertex, "metrics", (dict, type(None)), at) or {}
        entry: dict[str, Any] = {
            "jobVertexId": vid,
            "jobVertexName": field(vertex, "name", (str, type(None)), at),
            "parallelism": field(vertex, "parallelism", (int, type(None)), at),
            "maxParallelism": field(vertex, "maxParallelism", (int, type(None)), at),
            "inputs": inputs.get(vid, []),
            "keyedInput": keyed.get(vid),
            "countersComplete": _complete(metrics, at),
        }
        for name, key in _COUNTERS.items():
            entry[key] = field(metrics, name, (int, type(None)), f"{at}.metrics")
        for name, key in _TIMES.items():  # a double: Flink's JSON writes NaN as "NaN"
            entry[key] = _number(metrics, name, f"{at}.metrics")
        entry.update(vertex_gauges.get(vid) or dict.fromkeys(_GAUGE_FIELDS))
        vertices.append(entry)
        unknown |= {f"{vid}.{k}": json.dumps(v) for k, v in metrics.items() if k not in _KNOWN}
    return {
        "cluster": cluster,
        "jobId": field(job, "jid", str, where),
        "jobName": field(job, "name", (str, type(None)), where),
        "jobState": field(job, "state", str, where),
        "observedAtMillis": observed_at_ms,
        "jobManagerMillis": now,
        "vertices": vertices,
        "unknownFields": unknown,
    }


_GAUGE_FIELDS = (
    *(n for f in GAUGES.values() for n in f.values()),
    "pendingRecords",
    "sourcePartitions",
    "sourceBacklog",
    "sourceEndOffsets",
)


def _edges(plan: Any, where: str) -> dict[str, list[tuple[str, str | None]]]:
    """Each vertex's input edges from the job plan's nodes (`plan.nodes[].inputs[]`): the
    feeding vertex's id and the edge's `ship_strategy` (None: not named)."""
    if plan is None:
        return {}
    found: dict[str, list[tuple[str, str | None]]] = {}
    for node in field(plan, "nodes", list, f"{where}.plan"):
        at = f"{where}.plan.nodes[]"
        edges = field(node, "inputs", (list, type(None)), at) or []
        found[field(node, "id", str, at)] = [
            (
                field(e, "id", str, f"{at}.inputs[]"),
                field(e, "ship_strategy", (str, type(None)), f"{at}.inputs[]"),
            )
            for e in edges
        ]
    return found


def _inputs(edges: Mapping[str, Sequence[tuple[str, str | None]]]) -> dict[str, list[str]]:
    """Each vertex's inputs (`_edges`)."""
    return {vid: [source for source, _ in inputs] for vid, inputs in edges.items()}


def _keyed(edges: Mapping[str, Sequence[tuple[str, str | None]]]) -> dict[str, bool]:
    """Whether any input of each vertex is hash partitioned (`ship_strategy` HASH:
    keyBy); a vertex whose edges name no strategy is left out, a source is not keyed."""
    return {
        vid: any(strategy == "HASH" for _, strategy in inputs)
        for vid, inputs in edges.items()
        if not inputs or any(strategy is not None for _, strategy in inputs)
    }


def _complete(metrics: Mapping[str, Any], where: str) -> bool | None:
    flags = [field(metrics, f, (bool, type(None)), f"{where}.metrics") for f in _COMPLETE]
    known = [f for f in flags if f is not None]
    return all(known) if known else None


def vertex_ids(job: Any) -> Sequence[str]:
    """The job's vertex ids, in its answer's order."""
    return [
        field(v, "id", str, "jobs/:jid.vertices[]")
        for v in field(job, "vertices", list, "jobs/:jid")
    ]


def source_ids(job: Any) -> frozenset[str]:
    """The job's vertices no other feeds, by its plan (every vertex without a plan): the
    ones whose metric listing may name a backlog metric and partitions."""
    inputs = _inputs(_edges(job.get("plan"), "jobs/:jid"))
    vertices = vertex_ids(job)
    return frozenset(v for v in vertices if not inputs.get(v)) if inputs else frozenset(vertices)
