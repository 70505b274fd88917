"""The local stack's service processes: started detached, found again by pid file, stopped."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from services.localstack.broker import _alive, _read_int
from services.localstack.layout import PROJECT_ROOT


@dataclass(frozen=True)
class ServiceProcess:
    """One `scalefold <service>` process of a run directory."""

    name: str
    args: tuple[str, ...]
    run_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log(self) -> Path:
        """The newest run's log (a symbolic link to it)."""
        return self.run_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        pid = _read_int(self.pid_file)
        return pid if pid is not None and _alive(pid) else None

    def start(self, env: Mapping[str, str]) -> int:
        """Start the service in its own session, unless it already runs; return its pid."""
        running = self.pid()
        if running is not None:
            return running
        self.run_dir.mkdir(parents=True, exist_ok=True)
        command: Sequence[str] = (sys.executable, "-m", "services.cli", *self.args)
        with self._new_log().open("ab") as log:
            process = subprocess.Popen(
                command,
                env={**os.environ, **env},
                cwd=PROJECT_ROOT,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid_file.write_text(str(process.pid))
        return process.pid

    def _new_log(self) -> Path:
        """This run's own log, `<name>-<UTC time>.log`; `<name>.log` links to the newest."""
        stamp = datetime.now(tz=UTC).strftime("%Y%m%dT%H%M%S.%fZ")
        run_log = self.run_dir / f"{self.name}-{stamp}.log"
        run_log.touch()
        link = self.run_dir / f".{self.name}.log.new"
        link.unlink(missing_ok=True)
        link.symlink_to(run_log.name)
        os.replace(link, self.log)  # atomic: a reader sees the old log or the new one
        return run_log

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM to the service, SIGKILL to its process group after `timeout`.

        The SIGTERM goes to the service alone, not its group: the history
        service needs its Spark JVM (a child) alive to stop its queries
        cleanly. Whatever of the group is left afterwards is killed.
        True if it was running.
        """
        pid = self.pid()
        self.pid_file.unlink(missing_ok=True)
        if pid is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        deadline = time.monotonic() + 10.0
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        return True

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"
