"""One Apache Kafka broker in KRaft mode (combined broker+controller) on 127.0.0.1.

    run_dir/
      server.properties   written from deploy/local/kafka/server.properties.in
      data/               KRaft storage, formatted once per cluster
      broker.log          the JVM's stdout and stderr
      broker.pid          pid of the running broker
      bootstrap           host:port of the broker once it answers metadata requests
      secure/             with `secure=True`: its TLS material (tls.py), users' passwords

Ports are free ones picked at first start (below the kernel's ephemeral range:
ports.py) and kept, so a stopped stack restarts with the same address and data;
`fresh=True` starts a new cluster. A start never discards data on its own: where
another program holds one of its ports, it waits a little and then says so.

A secured broker (`secure=True`, deploy/local/kafka/secure.properties.in) serves
clients on SASL_SSL only, with the authorizer on; `admin_config()` is the
broker's own identity (its certificate, on the INTERNAL listener), the one
super user, which `secure.provision` uses to create users and ACLs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import string
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.localstack.jvm import extra_jvm_options
from services.localstack.layout import DEPLOY_LOCAL
from services.localstack.ports import bindable, free_ports
from services.localstack.tls import BROKER_PRINCIPAL, BrokerTls, make_broker_tls

TEMPLATE = DEPLOY_LOCAL / "kafka" / "server.properties.in"
SECURE_TEMPLATE = DEPLOY_LOCAL / "kafka" / "secure.properties.in"
LOG4J = DEPLOY_LOCAL / "kafka" / "log4j2.yaml"
HEAP = ("-Xms256m", "-Xmx1g")
PORTS_WAIT = 15.0  # seconds a start waits for its ports, held by a process just ending

Progress = Callable[[str], None]


class BrokerError(RuntimeError):
    """The broker could not be started or stopped; the message says what to look at."""


@dataclass(frozen=True)
class Running:
    pid: int
    bootstrap: str


class LocalBroker:
    """Start, find and stop the broker of one run directory."""

    def __init__(self, run_dir: Path, jars: list[Path], secure: bool = False) -> None:
        self.run_dir = run_dir
        self.jars = jars
        self.secure = secure
        self.tls = BrokerTls(run_dir / "secure")
        self.config = run_dir / "server.properties"
        self.data = run_dir / "data"
        self.log = run_dir / "broker.log"
        self.pid_file = run_dir / "broker.pid"
        self.bootstrap_file = run_dir / "bootstrap"

    def status(self) -> Running | None:
        """The running broker of this directory, if any."""
        pid = _read_int(self.pid_file)
        if pid is None or not _alive(pid) or not self.bootstrap_file.exists():
            return None
        return Running(pid, self.bootstrap_file.read_text().strip())

    def start(self, fresh: bool = False, timeout: float = 90.0, progress: Progress = print) -> str:
        """Start the broker (or find it running) and return its bootstrap address."""
        running = self.status()
        if not fresh:
            self._check_kind()
        if running is not None and not fresh:
            progress(f"Kafka broker already running (pid {running.pid})")
            return running.bootstrap
        if running is not None:
            self.stop(progress=progress)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if fresh or not self._reusable():
            self._format(progress)
        else:
            self._wait_ports_free()
        bootstrap = self._bootstrap()
        self.bootstrap_file.unlink(missing_ok=True)
        progress(f"starting Kafka broker on {bootstrap} (log: {self.log})")
        with self.log.open("ab") as log:
            process = subprocess.Popen(
                [
                    self._java(),
                    *HEAP,
                    *extra_jvm_options(os.environ),
                    f"-Dlog4j2.configurationFile={LOG4J}",
                    *("-cp", _classpath(self.jars), "kafka.Kafka", str(self.config)),
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        self.pid_file.write_text(str(process.pid))
        self._wait_ready(process, bootstrap, timeout)
        self.bootstrap_file.write_text(bootstrap + "\n")
        return bootstrap

    def stop(self, timeout: float = 30.0, progress: Progress = print) -> bool:
        """Stop the broker: SIGTERM (an orderly shutdown; not Kafka's controlled shutdown, see
        server.properties.in), then SIGKILL. True if one ran."""
        pid = _read_int(self.pid_file)
        self.bootstrap_file.unlink(missing_ok=True)
        if pid is None or not _alive(pid):
            self.pid_file.unlink(missing_ok=True)
            return False
        progress(f"stopping Kafka broker (pid {pid})")
        _signal_group(pid, signal.SIGTERM)
        _wait_gone(pid, timeout, poll=0.2)
        if _alive(pid):
            progress("  broker did not stop in time; killing it")
            _signal_group(pid, signal.SIGKILL)
            _wait_gone(pid)
        _reap(pid)
        self.pid_file.unlink(missing_ok=True)
        return True

    def admin_config(self) -> dict[str, Any]:
        """librdkafka settings that reach this broker with full rights.

        Plaintext: its only listener. Secured: the INTERNAL listener with the
        broker's own certificate, the super user."""
        listeners = self._listeners()
        if "INTERNAL" not in listeners:
            return {"bootstrap.servers": self._bootstrap()}
        return {
            "bootstrap.servers": f"127.0.0.1:{listeners['INTERNAL']}",
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.tls.ca),
            "ssl.keystore.location": str(self.tls.keystore),
            "ssl.keystore.password": self.tls.keystore_password(),
        }

    def _secured(self) -> bool:
        return "INTERNAL" in self._listeners()

    def _check_kind(self) -> None:
        """A plaintext start must not silently replace a secured cluster, nor the reverse."""
        if not (self.data / "meta.properties").exists() or not self.config.exists():
            return
        if self.secure != self._secured():
            kind, flag = ("secured", "with") if self._secured() else ("plaintext", "without")
            raise BrokerError(
                f"{self.run_dir} holds a {kind} broker: start it {flag} --secure, "
                "or discard its data with --fresh"
            )

    def _reusable(self) -> bool:
        """Existing storage (with its TLS material if secured) is started again."""
        if not (self.data / "meta.properties").exists() or not self.config.exists():
            return False
        return not self.secure or self.tls.exists()

    def _wait_ports_free(self, timeout: float = PORTS_WAIT) -> None:
        """Wait for the listeners' ports; a port still held is an error, never a reason to
        discard the cluster (its clients know its address, its controller its port)."""
        deadline = time.monotonic() + timeout
        while True:
            held = {
                name: port
                for name, port in self._listeners().items()
                if not bindable(port, reuse_address=True)
            }
            if not held:
                return
            if time.monotonic() >= deadline:
                ports = ", ".join(f"{port} ({name})" for name, port in sorted(held.items()))
                raise BrokerError(
                    f"another process holds port {ports} of the broker in {self.run_dir}: "
                    "stop it, or start a new cluster with --fresh (discards the broker's data)"
                )
            time.sleep(0.5)

    def _format(self, progress: Progress) -> None:
        shutil.rmtree(self.data, ignore_errors=True)
        ports = dict(
            zip(("broker_port", "controller_port", "internal_port"), free_ports(3), strict=True)
        )
        text = string.Template(TEMPLATE.read_text()).substitute(ports, data_dir=self.data)
        if self.secure:
            progress("making a CA and the broker's certificate")
            shutil.rmtree(self.tls.directory, ignore_errors=True)
            make_broker_tls(self.tls.directory)
            overlay = string.Template(SECURE_TEMPLATE.read_text()).substitute(
                ports,
                keystore=self.tls.keystore,
                keystore_password=self.tls.keystore_password(),
                ca=self.tls.ca,
                super_user=BROKER_PRINCIPAL,
            )
            text = merge_properties(text, overlay)
        self.config.touch(exist_ok=True)
        self.config.chmod(0o600)  # a secured broker's configuration holds a password
        self.config.write_text(text)
        progress("formatting KRaft storage")
        result = subprocess.run(
            [
                *(self._java(), "-cp", _classpath(self.jars), "kafka.tools.StorageTool", "format"),
                *("-t", _cluster_id(), "-c", str(self.config), "--standalone"),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise BrokerError(f"formatting KRaft storage failed:\n{result.stdout}{result.stderr}")

    def _listeners(self) -> dict[str, int]:
        """Listener name -> port, from the configuration."""
        values = _properties(self.config.read_text())
        return {
            name: int(address.rsplit(":", 1)[1])
            for name, address in (item.split("://", 1) for item in values["listeners"].split(","))
        }

    def _bootstrap(self) -> str:
        """The address clients use: the first advertised listener."""
        advertised = _properties(self.config.read_text())["advertised.listeners"]
        return advertised.split(",")[0].split("://", 1)[1]

    def _wait_ready(self, process: subprocess.Popen[bytes], bootstrap: str, timeout: float) -> None:
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({**self.admin_config(), "log_level": 0})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise BrokerError(
                    f"the broker exited with code {process.returncode}; "
                    f"last lines of {self.log}:\n{_tail(self.log)}"
                )
            try:
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    return
            except Exception:  # not answering yet
                time.sleep(0.3)
        self.stop(progress=lambda _: None)
        raise BrokerError(f"no metadata answer from {bootstrap} in {timeout:.0f} s; see {self.log}")

    @staticmethod
    def _java() -> str:
        java = shutil.which("java")
        if java is None:
            raise BrokerError("java is not on PATH; the broker needs Java 17 or newer")
        return java


def _properties(text: str) -> dict[str, str]:
    return dict(
        line.split("=", 1) for line in text.splitlines() if "=" in line and not line.startswith("#")
    )


def merge_properties(base: str, overlay: str) -> str:
    """`base` with the keys of `overlay` replaced in place, and its new keys appended."""
    changes = _properties(overlay)
    lines = []
    for line in base.splitlines():
        key = line.split("=", 1)[0] if "=" in line and not line.startswith("#") else None
        lines.append(f"{key}={changes.pop(key)}" if key in changes else line)
    lines.extend(f"{key}={value}" for key, value in changes.items())
    return "\n".join(lines) + "\n"


def _classpath(jars: list[Path]) -> str:
    return os.pathsep.join(str(jar) for jar in jars)


def _cluster_id() -> str:
    """16 random bytes in URL-safe base64, never starting with "-" (which the storage
    tool would read as an option); Kafka's own Uuid.randomUuid avoids those too."""
    import base64

    while True:
        candidate = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not candidate.startswith("-"):
            return candidate


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    try:
        waited, _ = os.waitpid(pid, os.WNOHANG)  # reap our own child if it exited
        if waited == pid:
            return False
    except ChildProcessError:
        pass
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _state(pid) != "Z"


def _wait_gone(pid: int, timeout: float = float("inf"), poll: float = 0.1) -> None:
    """Until `pid` has exited, or `timeout` seconds have passed (none: until it exits)."""
    deadline = time.monotonic() + timeout
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(poll)


def _reap(pid: int) -> None:
    """Collect the exit status of our own child, so no zombie is left behind."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0]
    except (OSError, IndexError):
        return "?"


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, sig)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
