"""A real Flink 2.3.0 cluster for the tests: its processes, REST, and waits by deadline.

One cluster serves a whole test session (per pytest-xdist worker; tests/flink/conftest.py
starts and stops it). Each test begins with no TaskManager and no running job and adds
what its scenario needs; `reset` puts the cluster back afterwards.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from services.contracts.flinkrest import FlinkRest, FlinkRestError
from services.localstack.flink import FlinkCluster, FlinkClusterError, FlinkProcess
from services.localstack.flinkconf import Waits
from tests.patience import give_up_at

T = TypeVar("T")

TERMINAL = {"FINISHED", "FAILED", "CANCELED"}
STARTS = 3
"""A TaskManager that exits before registering is started again, this many times at most."""


def wait_for(what: str, probe: Callable[[], T | None], seconds: float = 60.0) -> T:
    """Poll `probe` until it gives something truthy; AssertionError naming `what` at the
    deadline (a hang guard, lengthened by SCALEFOLD_TEST_PATIENCE)."""
    deadline = give_up_at(seconds)
    last: T | None = None
    while time.monotonic() < deadline:
        try:
            last = probe()
        except FlinkRestError:
            last = None
        if last:
            return last
        time.sleep(0.25)
    raise AssertionError(f"gave up waiting for {what} (last: {last!r})")


@dataclass
class FlinkTestCluster:
    """The session's cluster: start and stop TaskManagers, submit the sample job."""

    cluster: FlinkCluster
    jar: Path
    rest: FlinkRest = field(init=False)
    jar_id: str | None = None

    def __post_init__(self) -> None:
        self.rest = self.cluster.rest(timeout=30.0)

    @property
    def url(self) -> str:
        return self.rest.base_url

    def add_taskmanagers(self, count: int = 1) -> list[str]:
        """Start `count` TaskManagers (one slot each) and wait until they registered (a JVM
        took 90 s and more to register on two cores at load 50: the guard is generous)."""
        ids = self.cluster.add_taskmanagers(count)
        for attempt in range(1, STARTS + 1):
            try:
                self.cluster.wait_registered(ids, timeout=give_up_at(180.0) - time.monotonic())
                return ids
            except FlinkClusterError:
                # At load 50-80 a TaskManager's Pekko remoting did not start within its
                # 10 s and the JVM exited: start another in its place.
                exited = [i for i in ids if FlinkProcess(i, self.cluster.directory).pid() is None]
                if not exited or attempt == STARTS:
                    raise
                alive = [i for i in ids if i not in exited]
                ids = alive + self.cluster.add_taskmanagers(len(exited))
        return ids

    def registered(self) -> set[str]:
        return {tm["id"] for tm in self.rest.taskmanagers()}

    def stop_taskmanager(self, resource_id: str, *, kill: bool = False) -> None:
        """Stop it and wait until the JobManager no longer lists it (by the heartbeat
        timeout after a kill, at once after a SIGTERM)."""
        self.cluster.stop_taskmanager(resource_id, kill=kill)
        wait_for(
            f"{resource_id} to leave /taskmanagers", lambda: resource_id not in self.registered()
        )

    def running_taskmanagers(self) -> list[str]:
        return [tm.name for tm in self.cluster.taskmanagers() if tm.pid() is not None]

    def stop_jobmanager(self) -> None:
        """SIGTERM the JobManager and wait until it exited. Without HA its jobs are gone
        when it comes back (Flink suspends them at the stop)."""
        log = self.cluster.jobmanager.log
        assert self.cluster.jobmanager.stop(), "the JobManager was not running"
        if log.exists():  # start_jobmanager writes a new log in its place
            shutil.copyfile(log, log.with_suffix(f".{int(time.time())}.log"))

    def start_jobmanager(self) -> None:
        """Start it again with the same configuration (ports, waits) and wait for REST; the
        uploaded jar is gone with the old one."""
        self.cluster.start_jobmanager()
        self.cluster.wait_rest(timeout=give_up_at(120.0) - time.monotonic())
        self.jar_id = None

    def submit(self, *arguments: str) -> str:
        """Run the sample job with `arguments` (flink submit's program arguments); its id."""
        if self.jar_id is None:
            self.jar_id = self.rest.upload_jar(self.jar.name, self.jar.read_bytes())
        return self.rest.run_jar(self.jar_id, list(arguments))

    def job(self, jid: str) -> dict[str, Any]:
        return self.rest.job(jid)

    def wait_state(self, jid: str, state: str, seconds: float = 60.0) -> dict[str, Any]:
        return wait_for(
            f"job {jid} {state}",
            lambda: job if (job := self.job(jid))["state"] == state else None,
            seconds,
        )

    def wait_running(self, jid: str, parallelism: dict[str, int]) -> dict[str, Any]:
        """Until the job runs with every task RUNNING and these vertices (by name) at
        these parallelisms."""

        def settled() -> dict[str, Any] | None:
            job = self.job(jid)
            by_name = {vertex["name"]: vertex for vertex in job["vertices"]}
            if job["state"] != "RUNNING" or any(
                by_name[name]["parallelism"] != wanted for name, wanted in parallelism.items()
            ):
                return None
            tasks = [v["tasks"] for v in job["vertices"]]
            if any(count for t in tasks for key, count in t.items() if key != "RUNNING"):
                return None
            return job

        # deploying and restoring every task took over a minute at load 50
        return wait_for(f"job {jid} running at {parallelism}", settled, 180.0)

    def history(self, jid: str) -> list[dict[str, Any]]:
        """Flink's rescales of the job, oldest first."""
        return list(reversed(self.rest.rescale_history(jid)))

    def wait_rescales(self, jid: str, count: int, seconds: float = 120.0) -> list[dict[str, Any]]:
        """Until the job has `count` rescales, the newest one terminal; oldest first."""

        def enough() -> list[dict[str, Any]] | None:
            found = self.history(jid)
            return found if len(found) >= count and found[-1]["terminalState"] else None

        return wait_for(f"{count} rescales of {jid}", enough, seconds)

    def reset(self) -> None:
        """Cancel every job still running and stop every TaskManager."""
        for job in self.rest.jobs():
            if job["state"] not in TERMINAL:
                self.rest.cancel(job["jid"])
        for job in self.rest.jobs():
            self.wait_state(job["jid"], job["state"] if job["state"] in TERMINAL else "CANCELED")
        for resource_id in self.running_taskmanagers():
            self.cluster.stop_taskmanager(resource_id)
        wait_for("no TaskManager registered", lambda: not self.registered() or None)


@contextmanager
def session_cluster(directory: Path, waits: Waits | None = None) -> Iterator[FlinkTestCluster]:
    """A Flink session cluster in `directory` on free loopback ports, with the adaptive
    scheduler's waits short (`waits`, by default flinkconf.SHORT_WAITS); stopped,
    TaskManagers and all, at the end."""
    from services.localstack.flinkconf import SHORT_WAITS, FlinkConfig
    from services.localstack.flinkdist import flink_home, sample_job
    from services.localstack.layout import cache_dir
    from services.localstack.ports import free_ports
    from tests.patience import patient

    cache = cache_dir(os.environ)
    home = flink_home(cache)
    jar = sample_job(cache, home)
    cluster = FlinkCluster(directory, home)
    rest_port, rpc_port = free_ports(2)
    cluster.configure(FlinkConfig(rest_port, rpc_port, waits=waits or SHORT_WAITS))
    try:
        cluster.start_jobmanager()
        cluster.wait_rest(timeout=patient(120.0))
        yield FlinkTestCluster(cluster, jar)
    finally:
        cluster.stop(progress=lambda _: None)
