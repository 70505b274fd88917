"""A local Flink 2.3 session cluster: a JobManager and TaskManagers as Java processes.

Everything lives in one directory (`.run/local/flink` for `local up --flink`, a temporary
one for the tests): `conf/` (config.yaml, log4j.properties, the memory flags
BashJavaUtils computed), and per process `<name>.pid`, `<name>.log` (Flink's log) and
`<name>.out` (the JVM's stdout and stderr). `rest.url` holds the JobManager's REST
address for `local status`, `scalefold flink` and the bridge; with TLS (an https URL),
`rest-ca.pem` the CA its certificate verifies against, and conf/ is its owner's alone
(config.yaml holds the keystore's password). The processes run in
their own sessions and outlive the command that started them, like the broker.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from services.contracts.flinkrest import FlinkRest, FlinkRestError
from services.localstack.broker import _alive, _read_int, _wait_gone
from services.localstack.flinkconf import (
    JVM_OPENS,
    LOG4J,
    FlinkConfig,
    render,
    resource_params,
)
from services.localstack.jvm import extra_jvm_options

Progress = Callable[[str], None]

JOBMANAGER = "jobmanager"
JOBMANAGER_MAIN = "org.apache.flink.runtime.entrypoint.StandaloneSessionClusterEntrypoint"
TASKMANAGER_MAIN = "org.apache.flink.runtime.taskexecutor.TaskManagerRunner"
BASH_JAVA_UTILS = "org.apache.flink.runtime.util.bash.BashJavaUtils"
TASKMANAGER_ID = re.compile(r"^tm-(\d+)$")
REST_CA = "rest-ca.pem"


class FlinkClusterError(RuntimeError):
    """A Flink process did not come up; the message ends with its log's last lines."""


class FlinkNotStartedError(FlinkClusterError):
    """No JobManager was started in the cluster's directory: no local Flink to talk to."""


@dataclass(frozen=True)
class FlinkProcess:
    """One JVM of the cluster, found again by its pid file."""

    name: str
    directory: Path

    @property
    def pid_file(self) -> Path:
        return self.directory / f"{self.name}.pid"

    @property
    def log(self) -> Path:
        return self.directory / f"{self.name}.log"

    @property
    def out(self) -> Path:
        return self.directory / f"{self.name}.out"

    def pid(self) -> int | None:
        pid = _read_int(self.pid_file)
        return pid if pid is not None and _alive(pid) else None

    def start(self, command: list[str]) -> int:
        with self.out.open("ab") as out:
            process = subprocess.Popen(
                command,
                cwd=self.directory,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid_file.write_text(str(process.pid))
        return process.pid

    def stop(self, *, kill: bool = False, timeout: float = 30.0) -> bool:
        """SIGTERM (Flink's shutdown hooks: a TaskManager says goodbye) or, with `kill`,
        SIGKILL at once (the JobManager notices by the heartbeat timeout). True if it ran."""
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
        _wait_gone(pid, timeout)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
        _wait_gone(pid, poll=0.05)
        self.pid_file.unlink(missing_ok=True)
        return True

    def tail(self, lines: int = 20) -> str:
        text = ""
        for path in (self.log, self.out):
            with contextlib.suppress(OSError):
                text += "\n".join(path.read_text(errors="replace").splitlines()[-lines:]) + "\n"
        return text or "(no log)"


@dataclass(frozen=True)
class FlinkCluster:
    """The cluster of `directory`, run with the jars of `home` (flinkdist.flink_home)."""

    directory: Path
    home: Path

    @property
    def conf_dir(self) -> Path:
        return self.directory / "conf"

    @property
    def jobmanager(self) -> FlinkProcess:
        return FlinkProcess(JOBMANAGER, self.directory)

    def rest_url(self) -> str | None:
        """The JobManager's REST address as written at its start (None if never started)."""
        with contextlib.suppress(OSError):
            return (self.directory / "rest.url").read_text().strip() or None
        return None

    @property
    def rest_ca(self) -> Path | None:
        """The CA the REST endpoint's certificate verifies against (None: plain HTTP)."""
        path = self.directory / REST_CA
        return path if path.exists() else None

    def rest(self, timeout: float = 5.0) -> FlinkRest:
        url = self.rest_url()
        if url is None:
            raise FlinkNotStartedError(f"no Flink JobManager was started in {self.directory}")
        return FlinkRest(url, timeout, ca=self.rest_ca)

    def configure(self, config: FlinkConfig) -> None:
        """Write conf/ and let BashJavaUtils compute both processes' memory flags once."""
        self.conf_dir.mkdir(parents=True, exist_ok=True)
        (self.directory / REST_CA).unlink(missing_ok=True)
        if config.rest_tls is not None:
            self.conf_dir.chmod(0o700)
            shutil.copyfile(config.rest_tls.ca, self.directory / REST_CA)
        config_file = self.conf_dir / "config.yaml"
        config_file.touch(mode=0o600, exist_ok=True)
        config_file.chmod(0o600)
        config_file.write_text(render(config))
        (self.conf_dir / "log4j.properties").write_text(LOG4J)
        kinds = ("jm", "tm")
        with ThreadPoolExecutor(len(kinds)) as pool:  # two JVMs at once: ~5 s each
            outputs = pool.map(self._java_utils, kinds)
        for kind, output in zip(kinds, outputs, strict=True):
            flags, dynamic = resource_params(output)
            params = {"jvm": flags, "dynamic": dynamic}
            (self.conf_dir / f"{kind}-params.json").write_text(json.dumps(params))
        (self.directory / "rest.url").write_text(config.rest_url + "\n")

    def _java_utils(self, kind: str) -> str:
        """BashJavaUtils' answer to GET_JM_ or GET_TM_RESOURCE_PARAMS (`kind` jm or tm)."""
        classpath = f"{self.home / 'bin' / 'bash-java-utils.jar'}:{self.home / 'lib'}/*"
        command = f"GET_{kind.upper()}_RESOURCE_PARAMS"
        args = [_java(), "-cp", classpath, BASH_JAVA_UTILS, command, "--configDir"]
        result = subprocess.run(
            [*args, str(self.conf_dir)], capture_output=True, text=True, check=False
        )
        return result.stdout + result.stderr

    def _command(self, process: FlinkProcess, kind: str, main: str, *extra: str) -> list[str]:
        params = json.loads((self.conf_dir / f"{kind}-params.json").read_text())
        return [
            _java(),
            *JVM_OPENS,
            *params["jvm"],
            *extra_jvm_options(os.environ),
            f"-Dlog.file={process.log}",
            f"-Dlog4j.configurationFile=file:{self.conf_dir / 'log4j.properties'}",
            "-cp",
            f"{self.home / 'lib'}/*",
            main,
            "--configDir",
            str(self.conf_dir),
            *params["dynamic"],
            *extra,
        ]

    def start_jobmanager(self) -> int:
        process = self.jobmanager
        running = process.pid()
        if running is not None:
            return running
        process.log.unlink(missing_ok=True)
        return process.start(self._command(process, "jm", JOBMANAGER_MAIN))

    def wait_rest(self, timeout: float = 90.0) -> None:
        """Until the JobManager answers REST; FlinkClusterError with its log if it dies."""
        rest = self.rest(timeout=2.0)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._alive_or_fail(self.jobmanager)
            with contextlib.suppress(FlinkRestError):
                rest.overview()
                return
            time.sleep(0.3)
        raise FlinkClusterError(f"the JobManager gave no REST answer in {timeout:.0f} s")

    def taskmanagers(self) -> list[FlinkProcess]:
        """The TaskManagers started here and still recorded (running or not)."""
        names = [path.stem for path in self.directory.glob("tm-*.pid")]
        return [FlinkProcess(name, self.directory) for name in sorted(names, key=_order)]

    def add_taskmanagers(self, count: int = 1) -> list[str]:
        """Start `count` TaskManagers with fresh resource ids (`tm-N`, never reused: Flink
        keeps a lost TaskManager's id in its logs and exceptions); their ids."""
        counter = self.directory / "taskmanager.next"
        first = _read_int(counter) or 1
        ids = [f"tm-{number}" for number in range(first, first + count)]
        counter.write_text(str(first + count))
        for resource_id in ids:
            self.start_taskmanager(resource_id)
        return ids

    def start_taskmanager(self, resource_id: str) -> int:
        """Start one TaskManager with this resource id (the actuator names its own,
        services/actuator/launcher.py); its pid."""
        process = FlinkProcess(resource_id, self.directory)
        extra = ("-D", f"taskmanager.resource-id={resource_id}")
        return process.start(self._command(process, "tm", TASKMANAGER_MAIN, *extra))

    def wait_registered(self, ids: list[str], timeout: float = 90.0) -> None:
        """Until each of `ids` is in the JobManager's /taskmanagers."""
        rest = self.rest(timeout=2.0)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for resource_id in ids:
                self._alive_or_fail(FlinkProcess(resource_id, self.directory))
            with contextlib.suppress(FlinkRestError):
                if set(ids) <= {tm["id"] for tm in rest.taskmanagers()}:
                    return
            time.sleep(0.3)
        raise FlinkClusterError(f"TaskManagers {ids} not registered in {timeout:.0f} s")

    def stop_taskmanager(self, resource_id: str, *, kill: bool = False) -> bool:
        return FlinkProcess(resource_id, self.directory).stop(kill=kill)

    def stop(self, progress: Progress = print) -> list[str]:
        """Stop every TaskManager, then the JobManager; the names of those that ran."""
        stopped = []
        for process in [*self.taskmanagers(), self.jobmanager]:
            if process.stop():
                stopped.append(process.name)
                progress(f"stopped Flink's {process.name}")
        return stopped

    def _alive_or_fail(self, process: FlinkProcess) -> None:
        if process.pid() is None:
            raise FlinkClusterError(f"Flink's {process.name} exited:\n{process.tail()}")


def _number(name: str) -> int:
    match = TASKMANAGER_ID.match(name)
    return int(match.group(1)) if match else 0


def newest(names: list[str]) -> str | None:
    """The TaskManager `flink taskmanager stop` takes by default: the highest-numbered
    `tm-N` (they are numbered as started), else the last of the actuator's by name."""
    return max(names, key=lambda name: (_number(name), name), default=None)


def _order(name: str) -> tuple[bool, int, str]:
    """tm-1, tm-2, ..., tm-10 by number, then the others (the actuator's) by name."""
    number = _number(name)
    return (number == 0, number, name)


def _java() -> str:
    """JAVA_HOME's java where set (as Flink's scripts choose), else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java") or "java"
