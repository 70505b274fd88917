"""The local stack's service processes, each kept running by a supervisord of its own.

`local up` starts one supervisord per service (the well-kept process supervisor of the
Python world, pip-installable, no daemon of the machine's own needed): it starts the
service, and starts it again when it dies unexpectedly (a non-zero exit, a signal), a
service that dies within `START_SECONDS` of its start after a backoff growing by a
second each time, until `START_RETRIES` such failures in a row make it give up. One
supervisord per service, not one for all, because each service's environment (its
Kafka identity and secrets on a secured broker) is handed over in memory, as to any
child process, never written to a configuration file; and because a service is then
started, stopped and restarted alone, as before. supervisord opens no socket here (no
`supervisorctl`): it is stopped by SIGTERM, which stops its service first.

Each start of the service (the first and every restart) goes through `runlog.main`,
which opens that run's own log, `<name>-<UTC time>.log` (`<name>.log` links to the
newest), writes `<name>.pid` and then becomes the service (exec: the pid is the
service's). How often supervisord restarted a service is read from its own log,
`<name>.supervisor.log`.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from services.localstack.broker import _alive, _read_int, _wait_gone
from services.localstack.layout import PROJECT_ROOT

START_SECONDS: Final = 10
"""A service that runs this long has started (supervisord's `startsecs`): one that dies
sooner is started again after a backoff (1 s, 2 s, ...), one that dies later at once."""
START_RETRIES: Final = 8
"""Failed starts in a row after which supervisord gives up (its `startretries`)."""
STOP_SECONDS: Final = 30
"""How long a service has to stop after SIGTERM before its process group is killed."""
STARTED_WITHIN: Final = 60.0
"""How long `start` waits for the service's first pid (supervisord's and Python's start)."""


@dataclass(frozen=True)
class ServiceProcess:
    """One `scalefold <service>` process of a run directory, under its supervisord."""

    name: str
    args: tuple[str, ...]
    run_dir: Path

    @property
    def pid_file(self) -> Path:
        """The service's pid, written by each of its runs (runlog)."""
        return self.run_dir / f"{self.name}.pid"

    @property
    def log(self) -> Path:
        """The newest run's log (a symbolic link to it)."""
        return self.run_dir / f"{self.name}.log"

    @property
    def supervisor_pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.supervisor.pid"

    @property
    def supervisor_log(self) -> Path:
        return self.run_dir / f"{self.name}.supervisor.log"

    @property
    def supervisor_conf(self) -> Path:
        return self.run_dir / f"{self.name}.supervisor.conf"

    def pid(self) -> int | None:
        """The service's pid while it runs; None between a death and its restart."""
        pid = _read_int(self.pid_file)
        return pid if pid is not None and _alive(pid) else None

    def supervisor_pid(self) -> int | None:
        pid = _read_int(self.supervisor_pid_file)
        return pid if pid is not None and _alive(pid) else None

    def supervised(self) -> bool:
        """Running, or to be started again: its supervisord runs and has not given up."""
        return self.supervisor_pid() is not None and not self.restarts().gave_up

    def start(self, env: Mapping[str, str]) -> int:
        """Start the service under its supervisord, unless it already runs; return its pid."""
        running = self.pid()
        if running is not None and self.supervisor_pid() is not None:
            return running
        self.stop()  # a service without its supervisor (or the reverse) is started afresh
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.supervisor_conf.write_text(supervisor_conf(self))
        self.supervisor_log.unlink(missing_ok=True)  # its restarts are this start's
        command = (sys.executable, "-m", "supervisor.supervisord", "-c", str(self.supervisor_conf))
        process = subprocess.Popen(
            command,
            env={**os.environ, **env},
            cwd=PROJECT_ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.supervisor_pid_file.write_text(str(process.pid))
        deadline = time.monotonic() + STARTED_WITHIN
        while time.monotonic() < deadline:
            pid = self.pid()
            if pid is not None:
                return pid
            if process.poll() is not None:
                raise RuntimeError(
                    f"{self.name}'s supervisord exited ({process.returncode}); "
                    f"see {self.supervisor_log}"
                )
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not started in {STARTED_WITHIN:.0f} s; see {self.log}")

    def stop(self, timeout: float = STOP_SECONDS) -> bool:
        """Stop the service and its supervisord: SIGTERM to supervisord, which sends it to
        the service alone (the history service needs its Spark JVM, a child, alive to stop
        its queries cleanly) and kills the service's process group after `timeout`.
        Whatever of the group is left afterwards is killed. True if it was running."""
        supervisor, pid = self.supervisor_pid(), self.pid()
        self.supervisor_pid_file.unlink(missing_ok=True)
        self.pid_file.unlink(missing_ok=True)
        if supervisor is None and pid is None:
            return False
        if supervisor is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(supervisor, signal.SIGTERM)
            _wait_gone(supervisor, timeout + 10.0)
        elif pid is not None:  # a service whose supervisor was killed
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGTERM)
            _wait_gone(pid, timeout)
        for left in (pid, supervisor):
            if left is not None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(left, signal.SIGKILL)
                _wait_gone(left, 10.0)
        return True

    def restarts(self) -> Restarts:
        """What supervisord did since this service's start: unexpected deaths it restarted
        the service after, and whether it gave up."""
        try:
            text = self.supervisor_log.read_text(errors="replace")
        except OSError:
            return Restarts(0, False)
        name = re.escape(self.name)
        deaths = len(re.findall(rf"exited: {name} \(.*not expected\)", text))
        return Restarts(deaths, bool(re.search(rf"gave up: {name} entered FATAL", text)))

    def tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


@dataclass(frozen=True)
class Restarts:
    count: int
    gave_up: bool

    def words(self) -> str:
        """What `local status` says of them ("" when nothing happened)."""
        if self.gave_up:
            return f"gave up after {self.count} unexpected exits (see its supervisor log)"
        if self.count:
            return f"restarted {self.count} time{'s' if self.count > 1 else ''} by its supervisor"
        return ""


def supervisor_conf(process: ServiceProcess) -> str:
    """supervisord's configuration for one service: no socket, no environment (inherited)."""
    service = (sys.executable, "-m", "services.cli", *process.args)
    runlog = (sys.executable, "-m", "services.localstack.runlog", str(process.run_dir))
    command = shlex.join((*runlog, process.name, "--", *service))  # supervisord splits by shlex
    return "\n".join(
        (
            "[supervisord]",
            "nodaemon=true",
            f"logfile={_escaped(str(process.supervisor_log))}",
            "logfile_maxbytes=1MB",
            "logfile_backups=1",
            "loglevel=info",
            f"pidfile={_escaped(str(process.supervisor_pid_file))}",
            f"childlogdir={_escaped(str(process.run_dir))}",
            "",
            f"[program:{process.name}]",
            f"command={_escaped(command)}",
            f"directory={_escaped(str(PROJECT_ROOT))}",
            "autostart=true",
            "autorestart=unexpected",
            "exitcodes=0",
            f"startsecs={START_SECONDS}",
            f"startretries={START_RETRIES}",
            "stopsignal=TERM",
            f"stopwaitsecs={STOP_SECONDS}",
            "stopasgroup=false",
            "killasgroup=true",
            "stdout_logfile=NONE",  # each run writes its own log (runlog)
            "stderr_logfile=NONE",
            "",
        )
    )


def _escaped(text: str) -> str:
    """supervisord expands `%(name)s` in its values: a literal % is written %%."""
    return text.replace("%", "%%")
