"""A poll's observation windows on a slow JobManager and across a step of the machine's
clock (services/bridge/poll.py): an input's window holds its instant and is at least as
wide as the time between the answers that bound it, whatever the wall clock does; a new
TaskManager's slots reach the job when its log says they were offered (slotlog.py)."""

from __future__ import annotations

import copy
import time
from typing import Any

from services.bridge.offsets import JobOffset
from services.bridge.poll import ClusterPoller
from services.contracts.events import (
    JobSubmitted,
    RequirementsUpdated,
    TaskManagerRegistered,
    TimerFired,
    Window,
)
from services.contracts.flinkrest import FlinkNotFoundError
from tests.unit.bridge.test_step import FIRST, JID, SECOND
from tests.unit.bridge.test_translate import answer

NO_LOG_FILE_ANSWER = (
    b'{"errors": ["Internal server error.", "<Exception on server side: org.apache.flink.'
    b"util.FlinkException: Failed to transfer file from TaskExecutor tm-8. Caused by: org."
    b'apache.flink.util.FlinkException: The file LOG is not available on the TaskExecutor."]}'
)
"""Flink 2.3's answer for the log of a TaskManager without a log file (its cause's text as
TaskExecutor.requestFileUploadByFilePath words it)."""
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
        self.logs: dict[str, str] = {}  # path -> a TaskManager's log
        self.asked: list[str] = []  # the raw GETs' paths

    def get_raw(self, path: str) -> tuple[int, bytes]:
        self.clocks.advance(LATENCY_MS)
        self.asked.append(path)
        text = self.logs.get(path)
        if text == "500":
            return 500, b'{"errors": ["Failed to transfer file from TaskExecutor"]}'
        if text == "no file":  # Flink's 500 for a TaskManager logging to its console only
            return 500, NO_LOG_FILE_ANSWER
        return (404, b"{}") if text is None else (200, text.encode())

    def get_json(self, path: str) -> Any:
        self.clocks.advance(LATENCY_MS)
        if path not in self.answers:
            raise FlinkNotFoundError(path, [])
        return copy.deepcopy(self.answers[path])


class Polling:
    """A poller of the slow JobManager, and the offsets its polls left, as the service
    keeps them."""

    def __init__(self) -> None:
        self.clocks = Clocks()
        self.rest = SlowJobManager(self.clocks)
        clocks = self.clocks
        self.poller = ClusterPoller(
            "local",
            self.rest,  # type: ignore[arg-type]
            lambda: clocks.wall,
            lambda: clocks.ticks,
        )
        self.offsets: dict[str, JobOffset] = {}

    def poll(self) -> list[Any]:
        """One poll's events; the offsets it leaves kept."""
        polled = self.poller.poll(self.offsets, self.clocks.wall)
        for seen in polled.observed:
            self.offsets[seen.offset.key] = seen.offset
        return [e for seen in polled.observed for e in seen.events]

    def join(self, tm: str) -> None:
        """A TaskManager more in the listing."""
        listing = self.rest.answers["/taskmanagers"]["taskmanagers"]
        listing.append({**listing[0], "id": tm, "path": f"pekko.tcp://flink@h:1/user/rpc/{tm}"})


def test_windows_on_a_slow_jobmanager_and_a_clock_stepped_back() -> None:
    polling = Polling()
    clocks, rest, poll = polling.clocks, polling.rest, polling.poll

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


def log_line(at_ms: int, zone_ms: int, message: str) -> str:
    """A line of a TaskManager's log in Flink's default pattern, its clock `zone_ms` off UTC."""
    local = at_ms + zone_ms
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(local // 1000))
    return f"{stamp},{local % 1000:03d} INFO  org.apache.flink.X [] - {message}"


def task_manager_log(registered: int, offer: tuple[int, int] | None, zone_ms: int) -> str:
    lines = [log_line(registered, zone_ms, "Successful registration at resource manager x")]
    if offer is not None:
        lines += [
            log_line(offer[0] - 40, zone_ms, f"Receive slot request a1 for job {JID} from x"),
            log_line(offer[0], zone_ms, f"Offer reserved slots to the leader of job {JID}."),
            log_line(offer[1], zone_ms, "Activate slot a1."),
        ]
    return "\n".join(lines) + "\n"


def test_a_new_task_managers_slots_reach_the_job_when_its_log_says_they_were_offered() -> None:
    polling = Polling()
    clocks, rest, poller, poll = polling.clocks, polling.rest, polling.poller, polling.poll

    poll()
    clocks.advance(60_000)
    polling.join("tm-9")
    registered = clocks.wall - 500
    zone = -5 * 3_600_000  # the TaskManager logs in UTC-5
    rest.logs["/taskmanagers/tm-9/log"] = task_manager_log(registered, None, zone)
    held = poll()
    # listed, its slots not offered yet: not registered, the job's clock kept before it
    assert not [e for e in held if isinstance(e, TaskManagerRegistered)]
    listed = poller.presence.appeared["tm-9"]
    assert listed is not None
    clocks_sent = [e.timestamp for e in held if isinstance(e, TimerFired)]
    assert all(at <= listed.after for at in clocks_sent)
    # offered and accepted four seconds after its registration, in its log
    offer = (registered + 4_000, registered + 4_050)
    rest.logs["/taskmanagers/tm-9/log"] = task_manager_log(registered, offer, zone)
    (joined,) = [e for e in poll() if isinstance(e, TaskManagerRegistered)]
    assert joined.window == Window(offer[0] - 1, offer[1])
    assert joined.timestamp == offer[0]  # its sending: the JobMaster takes it as it comes


def test_a_task_manager_whose_log_cannot_be_read_is_registered_by_its_listing() -> None:
    polling = Polling()
    polling.poll()
    polling.join("tm-9")
    polling.rest.logs["/taskmanagers/tm-9/log"] = "a log4j pattern of someone else's\n"
    (joined,) = [e for e in polling.poll() if isinstance(e, TaskManagerRegistered)]
    assert joined.window == polling.poller.presence.appeared["tm-9"]
    # nor is one without a log file (a console-only Flink answers 500, saying so)
    polling.join("tm-8")
    polling.rest.logs["/taskmanagers/tm-8/log"] = "no file"
    (joined,) = [e for e in polling.poll() if isinstance(e, TaskManagerRegistered)]
    assert joined.task_manager_id == "tm-8"
    # nor is its log asked for again, by this job or a new one (offsets forgotten)
    polling.offsets.clear()
    polling.poll()
    assert polling.rest.asked.count("/taskmanagers/tm-9/log") == 1


def held_back(tm: str) -> Polling:
    """A poller of a submitted job, with `tm` listed a minute later and its log answering
    500 (a TaskManager going away): held back for its offer, then dropped by the listing."""
    polling = Polling()
    polling.poll()
    polling.clocks.advance(60_000)
    polling.join(tm)
    polling.rest.logs[f"/taskmanagers/{tm}/log"] = "500"
    assert not [e for e in polling.poll() if isinstance(e, TaskManagerRegistered)]
    polling.rest.answers["/taskmanagers"]["taskmanagers"].pop()
    return polling


def task_manager_events(events: list[Any]) -> list[tuple[str, str]]:
    return [(type(e).__name__, e.task_manager_id) for e in events if hasattr(e, "task_manager_id")]


def test_a_task_manager_going_away_before_its_offer_never_reaches_the_job() -> None:
    # near-cooldown-end at load (2026-12-05): a TaskManager stopped 0.7 s after it
    # registered, before it offered its slots; Flink answered 500 for its log, the bridge
    # took the listing, and the prediction rescaled onto slots Flink never had
    polling = held_back("tm-9")
    assert task_manager_events(polling.poll()) == []


def test_a_task_manager_going_away_after_its_offer_is_the_jobs_by_flinks_exceptions() -> None:
    # the Flink demo beside two hogs (2026-12-06): killed 2 s after Flink ran on it, before
    # a poll read its offer; its log answered 500 from then on. Flink's heartbeat dropped it
    # from the listing as the JobMaster failed the job over for it
    polling = held_back("tm-9")
    lost = "TaskManager with id tm-9 is no longer reachable."
    exceptions = polling.rest.answers[f"/jobs/{JID}/exceptions"]["exceptionHistory"]["entries"]
    exceptions.append({"timestamp": polling.clocks.wall - 1_000, "stacktrace": lost})
    assert task_manager_events(polling.poll()) == [
        ("TaskManagerRegistered", "tm-9"),
        ("TaskManagerLost", "tm-9"),
    ]
    # a later entry names it again (a deployment to its released slots): once is enough
    exceptions.append({"timestamp": polling.clocks.wall, "stacktrace": lost})
    assert task_manager_events(polling.poll()) == []
