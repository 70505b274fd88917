"""A poll's observation windows on a slow JobManager and across a step of the machine's
clock (services/bridge/poll.py): an input's window holds its instant and is at least as
wide as the time between the answers that bound it, whatever the wall clock does."""

from __future__ import annotations

import copy
from typing import Any

from services.bridge.offsets import JobOffset
from services.bridge.poll import ClusterPoller
from services.contracts.events import (
    JobSubmitted,
    RequirementsUpdated,
    TaskManagerRegistered,
)
from services.contracts.flinkrest import FlinkNotFoundError
from tests.unit.bridge.test_step import FIRST, JID, SECOND
from tests.unit.bridge.test_translate import answer

LATENCY_MS = 3_000
"""Each answer of the slow JobManager takes this long."""


class Clocks:
    """A wall clock and a monotonic one, both advanced by the fake JobManager's latency;
    the wall clock can be stepped."""

    def __init__(self) -> None:
        self.wall = 1_795_935_500_000
        self.ticks = 0

    def advance(self, ms: int) -> None:
        self.wall += ms
        self.ticks += ms


class SlowJobManager:
    """Flink 2.3.0's captured answers for one job, each after LATENCY_MS."""

    def __init__(self, clocks: Clocks) -> None:
        self.clocks = clocks
        self.answers: dict[str, Any] = {
            "/config": {"flink-version": "2.3.0"},
            "/jobs/overview": {"jobs": [{"jid": JID}]},
            "/taskmanagers": answer("taskmanagers.json"),
            f"/jobs/{JID}": answer("job.json"),
            f"/jobs/{JID}/rescales/history": answer("rescales-history.json"),
            f"/jobs/{JID}/rescales/config": answer("rescales-config.json"),
            f"/jobs/{JID}/config": answer("job-config.json"),
            f"/jobs/{JID}/resource-requirements": answer("resource-requirements.json"),
            f"/jobs/{JID}/exceptions": {"exceptionHistory": {"entries": []}},
            f"/jobs/{JID}/checkpoints": {"history": []},
            **{
                f"/jobs/{JID}/rescales/details/{u}": answer(f"rescales-details-{u}.json")
                for u in (FIRST, SECOND)
            },
        }

    def get_json(self, path: str) -> Any:
        self.clocks.advance(LATENCY_MS)
        if path not in self.answers:
            raise FlinkNotFoundError(path, [])
        return copy.deepcopy(self.answers[path])


def test_windows_on_a_slow_jobmanager_and_a_clock_stepped_back() -> None:
    clocks = Clocks()
    rest = SlowJobManager(clocks)
    poller = ClusterPoller("local", rest, lambda: clocks.wall, lambda: clocks.ticks)  # type: ignore[arg-type]
    offsets: dict[str, JobOffset] = {}

    def poll() -> list[Any]:
        polled = poller.poll(offsets, clocks.wall)
        for seen in polled.observed:
            offsets[seen.offset.key] = seen.offset
        return [e for seen in polled.observed for e in seen.events]

    first = poll()
    assert any(isinstance(e, JobSubmitted) for e in first)
    (submitted,) = [e for e in first if isinstance(e, JobSubmitted)]
    assert ("jobmanager.adaptive-scheduler.rescale-trigger.active-checkpoint.enabled", "false") in (
        submitted.configuration
    )
    # between two polls a TaskManager joins and the requirements change; the machine's
    # clock steps back ten minutes
    listing = rest.answers["/taskmanagers"]["taskmanagers"]
    listing.append({**listing[0], "id": "tm-9", "path": "pekko.tcp://flink@h:1/user/rpc/x"})
    requirements = rest.answers[f"/jobs/{JID}/resource-requirements"]
    for bounds in requirements.values():
        bounds["parallelism"]["upperBound"] = 1
    clocks.wall -= 600_000
    second = poll()
    (joined,) = [e for e in second if isinstance(e, TaskManagerRegistered)]
    (changed,) = [e for e in second if isinstance(e, RequirementsUpdated)]
    for event in (joined, changed):
        assert event.window is not None, event
        assert event.window.after < event.timestamp <= event.window.by, event
        # at least the time between the two answers that bound it: a poll's worth of
        # slow answers, however far the wall clock stepped
        assert event.window.by - event.window.after >= 5 * LATENCY_MS, event
