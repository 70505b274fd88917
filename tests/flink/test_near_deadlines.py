"""Inputs near one of Flink's deadlines (issue 47): decided right, or said to be ambiguous.

Two differential scenarios on a Flink 2.3.0 session cluster of this module's own, with
waits long enough to aim at (a 4 s submission stabilization and cooldown), observed by
the bridge polling every second in a thread of its own, as the service does (listing
the TaskManagers every 0.25 s between polls):

- **TaskManagers join near the submission stabilization deadline.** The sample job
  wants 4 slots (two slot-sharing groups at parallelism 2) and has 1; a second
  TaskManager makes the resources sufficient, which starts the 4 s stabilization; two
  more are started so as to register 0.6 s before and after the deadline (each a JVM's
  start, the second's as measured, ahead): Flink schedules 4, 3 or 2 slots, and rescales
  onto what came after.
- **A TaskManager is lost near the end of a cooldown.** The job runs at parallelism 1 on
  two TaskManagers; during the 20 s cooldown after the first schedule Sum's upper bound
  is raised (the rescale waits for the cooldown's end) and then a third TaskManager is
  started (so it is idle in Flink and in the prediction alike: which of three registered
  TaskManagers Flink's ResourceManager gives a job is its hash map's order, which no REST
  answer shows before the tasks run; and raised first, its slots are offered to the job as
  it registers); the idle TaskManager is stopped (SIGTERM: it leaves at once) within a
  second of the cooldown's end, before or after.

Each scenario folds the bridge's inputs through the core (the prediction), pairs its
rescales with Flink's, and asks the core which pairs the observation windows, or Flink's
own latency as its records show it, leave undecided (services/scheduler/observation.py):
every other pair must agree as the differential suite requires
(differential.unexplained). Where the decisive input landed
is read from the JobManager's log and written, with the verdict, to
.run/flink-differential/<scenario>.json.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import pytest

from services.bridge.poll import ClusterPoller
from services.bridge.service import Bridge
from services.bridge.sink import Sink
from services.bridge.translate import task_managers_hosting
from services.contracts import Codec
from services.contracts.events import TimerFired
from services.contracts.flinkrest import FlinkRest
from services.contracts.settings import Settings
from services.contracts.topics import flink_job_key
from services.localstack.flinkconf import Waits
from services.localstack.layout import RUN_ROOT
from services.scheduler.core.driver import replay
from services.scheduler.core.effects import Rejected, RescaleUpdated
from services.scheduler.observation import ambiguities, describe, fold, latency_ms
from tests.flink.differential import agreement, compare, differences, latest, unexplained
from tests.flink.flink_support import FlinkTestCluster, session_cluster, wait_for
from tests.integration.bridge_support import read_all, read_events
from tests.integration.conftest import kafka  # noqa: F401  (a fixture)

SUM = "Sum -> Discard: Writer"
CLUSTER = "n"
RESULTS = RUN_ROOT / "flink-differential"
AIM_MS = 4_000
WAITS = Waits(
    resource_wait=120_000,
    submission_stabilization=AIM_MS,
    cooldown=AIM_MS,
    executing_stabilization=500,
    heartbeat_interval=1_000,
    heartbeat_timeout=5_000,
)
"""Deadlines long enough to aim an input at, from the test's side, within about a second."""
COOLDOWN_MS = 20_000
COOLDOWN_WAITS = replace(WAITS, cooldown=COOLDOWN_MS)
"""A cooldown a TaskManager's JVM starts within (3-15 s on two busy cores)."""
REGISTERED = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*Registering TaskManager with ResourceID (\S+) ",
    re.M,
)
CLOSED = re.compile(
    r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*(?:Closing TaskExecutor connection|"
    r"Disconnect TaskExecutor) (\S+?)[ .]",
    re.M,
)


def _instants(pattern: re.Pattern[str], log: str) -> dict[str, int]:
    """TaskManager id -> the first instant (epoch ms, the JVM's local time) `log` says so."""
    found: dict[str, int] = {}
    for m in pattern.finditer(log):
        at = round(time.mktime(time.strptime(m[1], "%Y-%m-%d %H:%M:%S")) * 1000) + int(m[2])
        found.setdefault(m[3], at)
    return found


@dataclass
class Watched:
    """The cluster, and the bridge polling it every second in a thread of its own."""

    flink: FlinkTestCluster
    bridge: Bridge
    kafka: Settings
    codec: Codec
    stop: threading.Event

    def forwarded(self, jid: str) -> list[dict[str, Any]]:
        topic = self.kafka.topics.flink_rescales
        return [v for _, v in read_all(self.kafka, topic, self.codec) if v["jobId"] == jid]

    def settled(self, jid: str) -> list[dict[str, Any]]:
        """Until every rescale Flink shows is on flink-rescales in its final form."""

        def done() -> list[dict[str, Any]] | None:
            shown = {r["rescaleUuid"]: r["terminalState"] for r in self.flink.history(jid)}
            found = {r["rescaleUuid"]: r for r in latest(self.forwarded(jid))}
            same = all(found.get(u, {}).get("terminalState") == s for u, s in shown.items())
            return list(found.values()) if shown and same and set(found) == set(shown) else None

        return wait_for(f"job {jid}'s rescales on flink-rescales", done, 120.0)

    def log(self) -> str:
        path = self.flink.cluster.jobmanager.log
        return path.read_text(errors="replace") if path.exists() else ""


@pytest.fixture
def watched(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    kafka: Settings,  # noqa: F811
    codec: Codec,
) -> Iterator[Watched]:
    """The cluster with the waits a test asks for (indirect parametrization), else WAITS."""
    with watching(tmp_path, kafka, codec, getattr(request, "param", WAITS)) as found:
        yield found


@contextmanager
def watching(tmp_path: Path, settings: Settings, codec: Codec, waits: Waits) -> Iterator[Watched]:
    """The cluster with `waits`, and the bridge polling it onto `settings`' topics."""
    with session_cluster(tmp_path / "flink", waits) as cluster:
        sink = Sink(settings, codec, f"{settings.topics.own('bridge')}.{CLUSTER}")
        poller = ClusterPoller(CLUSTER, FlinkRest(cluster.url, 10.0))
        bridge = Bridge([poller], sink, 1.0, {}, presence_interval_s=0.25)
        stop = threading.Event()
        polling = threading.Thread(target=bridge.run, args=(stop.is_set,), daemon=True)
        polling.start()
        try:
            yield Watched(cluster, bridge, settings, codec, stop)
        finally:
            stop.set()
            polling.join(30)
            sink.close()


def verdict(watched: Watched, name: str, jid: str, landed: dict[str, Any]) -> dict[str, Any]:
    """The prediction against Flink's rescales; the pairs the observation cannot decide
    apart. Every decidable pair agrees (as differential.unexplained requires)."""
    forwarded = watched.settled(jid)
    time.sleep(3.0)  # the bridge's last poll's inputs, sent with its records
    key = flink_job_key(CLUSTER, jid)
    inputs = [e for e in read_events(watched.kafka, watched.codec) if e.job_id == key]
    _, effects = replay(inputs)
    assert not [e for e in effects if isinstance(e, Rejected)]
    predicted = latest(e.record for e in effects if isinstance(e, RescaleUpdated))
    pairs = compare(latest(forwarded), predicted)
    found = ambiguities(inputs, (), latest(forwarded))
    doubtful = {a.pair_index for a in found}
    decidable = [pair for index, pair in enumerate(pairs, start=1) if index not in doubtful]
    result = {
        "scenario": name,
        "job": jid,
        "landed": landed,
        "rescales": {"flink": len(forwarded), "predicted": len(predicted)},
        "pairs": len(pairs),
        "ambiguous": [describe(a) for a in found],
        "latency_ms": asdict(latency_ms(latest(forwarded), fold(inputs, ()))),
        "decidable_agreement": agreement(decidable),
        "differences": differences(pairs),
        "timeline": timeline(inputs, latest(forwarded), predicted),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(result, indent=2))
    (RESULTS / f"{name}.jobmanager.log").write_text(watched.log())
    assert unexplained(decidable) == [], result
    return result


def timeline(
    inputs: list[Any], flink: list[dict[str, Any]], predicted: list[dict[str, Any]]
) -> dict[str, list[str]]:
    """What a failing run is read from: each input (and its window) and each side's state spans,
    in ms after the job's submission (as the bridge stamped it)."""
    origin = inputs[0].timestamp if inputs else 0

    def spans(records: list[dict[str, Any]]) -> list[str]:
        ordered = sorted(records, key=lambda r: r["startTimestampInMillis"])
        return [
            f"#{n} {r['triggerCause']} {s['state']} +{(s['enterTimestampInMillis'] or 0) - origin}"
            for n, r in enumerate(ordered, start=1)
            for s in r["schedulerStates"] or []
        ]

    def window(e: Any) -> str:
        w = getattr(e, "window", None)
        return "" if w is None else f" ({w.after - origin}, {w.by - origin}]"

    windowed = [
        f"{type(e).__name__} {getattr(e, 'task_manager_id', '')} +{e.timestamp - origin}"
        f"{window(e)} hosted={getattr(e, 'hosted_tasks', '-')}"
        for e in inputs
        if not isinstance(e, TimerFired)
    ]
    return {"inputs": windowed, "flink": spans(flink), "predicted": spans(predicted)}


def registered_at(flink: FlinkTestCluster, ids: list[str]) -> float:
    """When /taskmanagers first lists `ids` (time.time(), looked every 0.1 s)."""

    def listed() -> float | None:
        return time.time() if set(ids) <= flink.registered() else None

    return wait_for(f"{ids} registered", listed, 180.0)


def test_a_taskmanager_joins_near_the_submission_stabilization_deadline(
    watched: Watched,
) -> None:
    flink = watched.flink
    flink.add_taskmanagers(1)
    jid = flink.submit("--max-parallelism", "2")
    wait_for("the job waiting for resources", lambda: flink.history(jid) or None)
    started = time.time()
    second = flink.cluster.add_taskmanagers(1)  # sufficient: the stabilization starts
    joined = registered_at(flink, second)
    # two more, aimed 0.6 s either side of the deadline, each started a JVM's start (the
    # second's, just measured) before that
    latency = joined - started
    late = []
    for aim in (-0.6, 0.6):
        time.sleep(max(0.0, joined + AIM_MS / 1000 + aim - latency - time.time()))
        late += flink.cluster.add_taskmanagers(1)
    flink.cluster.wait_registered(late, timeout=180.0)
    flink.wait_running(jid, {})
    flink.wait_rescales(jid, 1)
    time.sleep(2 * AIM_MS / 1000)  # a rescale onto those that came after
    flink.wait_running(jid, {})
    logged = _instants(REGISTERED, watched.log())
    deadline_ms = logged[second[0]] + AIM_MS
    landed = {f"{tm}_after_deadline_ms": logged[tm] - deadline_ms for tm in late}
    print(verdict(watched, "near-submission-stabilization", jid, landed))


@pytest.mark.parametrize("watched", [COOLDOWN_WAITS], indirect=True, ids=["20s-cooldown"])
def test_a_taskmanager_lost_near_the_end_of_a_cooldown(watched: Watched) -> None:
    """The job at parallelism 1 on two TaskManagers (its source and Bucket chained in one
    slot-sharing group, Sum in the other); Sum's upper bound raised to 2 during the
    cooldown after the first schedule (the rescale waits for the cooldown's end), a third
    TaskManager started, and stopped within a second of that end: Flink
    rescales onto it and then fails over, or its rescale finds no slot for Sum."""
    flink = watched.flink
    flink.add_taskmanagers(2)
    jid = flink.submit("--parallelism", "1", "--max-parallelism", "2")
    (first,) = flink.wait_rescales(jid, 1)
    cooldown_end = (first["endTimestampInMillis"] + COOLDOWN_MS) / 1000  # Executing entered
    flink.wait_running(jid, {})
    # Raised first, so the third TaskManager's slots are offered to the job as it registers
    # (REST shows the registration); started first, they would be offered only once the
    # raised requirements reach the ResourceManager, an instant no REST answer shows.
    raise_sum(flink, jid)
    (idle,) = flink.add_taskmanagers(1)
    assert idle not in hosting(flink, jid)  # its slot is the job's, no task runs on it
    offset = random.Random(jid).uniform(-0.8, 0.8)
    time.sleep(max(0.0, cooldown_end + offset - time.time()))
    flink.stop_taskmanager(idle)  # SIGTERM: it leaves the ResourceManager at once
    time.sleep(2 * AIM_MS / 1000)  # a rescale, a failover
    flink.wait_running(jid, {})
    gone = _instants(CLOSED, watched.log())
    landed = {
        "aimed_ms": round(offset * 1000),
        "lost_after_cooldown_end_ms": gone.get(idle, 0) - round(cooldown_end * 1000),
    }
    print(verdict(watched, "near-cooldown-end", jid, landed))


def raise_sum(flink: FlinkTestCluster, jid: str) -> None:
    """PUT Sum's upper bound to 2 (FLIP-291)."""
    from services.localstack.flinkcli import merged, vertex_ids

    wanted = vertex_ids({SUM: (1, 2)}, flink.job(jid)["vertices"])
    flink.rest.set_requirements(jid, merged(flink.rest.requirements(jid), wanted))


def hosting(flink: FlinkTestCluster, jid: str) -> set[str]:
    """The TaskManagers a subtask of job `jid` runs on."""
    found: set[str] = set()
    for vertex in flink.job(jid)["vertices"]:
        path = f"/jobs/{jid}/vertices/{vertex['id']}/taskmanagers"
        found |= task_managers_hosting(flink.rest.get_json(path), path)
    return found
