"""Where the actuator's TaskManagers come from on a real Flink: a launcher.

The Flink backend (flinkbackend.py) decides which TaskManagers to start and which idle
ones to stop; a launcher does it, and remembers what a release chose, so that a command
redone after a crash stops the same TaskManagers and no others. The local launcher runs
them as processes of a local Flink cluster's directory (`.run/local/flink` of
`scalefold local up --flink`, or the tests' cluster), with services/localstack's start
code: they show up in `scalefold local status`, and `local down` stops them. Its
`max_taskmanagers` caps how many of the directory's TaskManagers may run when the backend
starts more (quota.py; those started by hand count too).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Protocol

SLOTS_KEY = re.compile(r"^taskmanager\.numberOfTaskSlots:\s*\"?(\d+)\"?\s*$", re.MULTILINE)


class Launcher(Protocol):
    """Starts and stops one cluster's TaskManagers by resource id."""

    @property
    def slots_per_taskmanager(self) -> int: ...

    @property
    def max_taskmanagers(self) -> int | None:
        """The cap on running TaskManagers a provision fills up to (quota.py); None: none."""
        ...

    def rest_url(self) -> str | None: ...

    def start(self, resource_id: str) -> None: ...

    def stop(self, resource_id: str) -> bool: ...

    def running(self) -> list[str]: ...

    def started_before(self, resource_id: str) -> bool: ...

    def remember_release(self, command_id: str, resource_ids: list[str]) -> None: ...

    def remembered_release(self, command_id: str) -> list[str] | None: ...


class LocalLauncher:
    """TaskManagers as processes of the local Flink cluster in `directory`."""

    def __init__(self, directory: Path, cache: Path, max_taskmanagers: int | None = None) -> None:
        from services.localstack.flink import FlinkCluster

        self.directory, self.cache = directory, cache
        self.max_taskmanagers = max_taskmanagers  # every running TaskManager of it counts
        self._releases = directory / "releases"
        self._cluster = FlinkCluster(directory, Path())

    @property
    def slots_per_taskmanager(self) -> int:
        """As the cluster's config.yaml says (Flink's default: 1)."""
        try:
            match = SLOTS_KEY.search((self.directory / "conf" / "config.yaml").read_text())
        except OSError:
            return 1
        return int(match.group(1)) if match else 1

    def rest_url(self) -> str | None:
        """Read at each call: the JobManager may start after the actuator."""
        return self._cluster.rest_url()

    def rest_ca(self) -> Path | None:
        """The CA of a TLS REST endpoint (`local up --secure --flink`), read at each call too."""
        return self._cluster.rest_ca

    def start(self, resource_id: str) -> None:
        from services.localstack.flink import FlinkCluster
        from services.localstack.flinkdist import flink_home

        home = flink_home(self.cache, progress=lambda _: None)  # cached: the JobManager runs
        FlinkCluster(self.directory, home).start_taskmanager(resource_id)

    def stop(self, resource_id: str) -> bool:
        """SIGTERM: the TaskManager says goodbye to the JobManager and exits."""
        return self._cluster.stop_taskmanager(resource_id)

    def running(self) -> list[str]:
        return [tm.name for tm in self._cluster.taskmanagers() if tm.pid() is not None]

    def started_before(self, resource_id: str) -> bool:
        """Whether a process of this id was ever started here (its output file stays)."""
        return (self.directory / f"{resource_id}.out").exists()

    def remember_release(self, command_id: str, resource_ids: list[str]) -> None:
        self._releases.mkdir(parents=True, exist_ok=True)
        path = self._releases / f"{command_id}.json"
        scratch = path.with_suffix(".new")
        scratch.write_text(json.dumps(resource_ids))
        scratch.replace(path)  # atomic: a crash leaves the whole choice or none

    def remembered_release(self, command_id: str) -> list[str] | None:
        try:
            chosen = json.loads((self._releases / f"{command_id}.json").read_text())
        except (OSError, ValueError):
            return None
        return [str(resource_id) for resource_id in chosen]
