"""The local stack: the broker plus scalefold's services, as `make up` runs them."""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path

from services.bridge.brokers import OWN_BROKERS
from services.contracts.settings import Settings
from services.localstack.processes import ServiceProcess
from services.localstack.secure import PLAINTEXT_ENV
from services.localstack.tls import HISTORY_REST, HTTPS_SERVERS, BrokerTls

Progress = Callable[[str], None]

EXTERNAL_RUNTIME = "-Dscalefold.runtime.mode=external"
NAMES = ("scheduler", "actuator", "history", "bridge")
HISTORY_READY = "streaming query started"
BRIDGE_READY = "scalefold.bridge: polling "
LOCAL_FLINK = "local"
"""The name `local up --flink` gives its Flink cluster: its jobs are `local.<Flink job id>`."""


def scheduler_process(run_dir: Path, web_port: int, *extra: str) -> ServiceProcess:
    """The scheduler; on the local stack the embedded cluster is every job's runtime."""
    data = str(run_dir / "scheduler")
    args = ("scheduler", "--web-port", str(web_port), "--data-dir", data, EXTERNAL_RUNTIME, *extra)
    return ServiceProcess("scheduler", args, run_dir)


def actuator_process(run_dir: Path, web_port: int, *extra: str) -> ServiceProcess:
    return ServiceProcess("actuator", ("actuator", "--web-port", str(web_port), *extra), run_dir)


def history_process(run_dir: Path, *extra: str) -> ServiceProcess:
    """The history service (Spark); its tables and checkpoints live in `run_dir/history`."""
    return ServiceProcess(
        "history", ("history", "run", "--data-dir", str(run_dir / "history"), *extra), run_dir
    )


def bridge_process(run_dir: Path, rest_url: str, *extra: str) -> ServiceProcess:
    """The Flink bridge, polling the local stack's Flink (services/bridge, docs/bridge.md);
    the jobs' Kafka sources read the stack's own broker (the workload's topic)."""
    args = (
        *("bridge", "run", "--flink-rest", f"{LOCAL_FLINK}={rest_url}"),
        *("--source-bootstrap-servers", OWN_BROKERS, *extra),
    )
    return ServiceProcess("bridge", args, run_dir)


def flink_ca(tls: BrokerTls) -> tuple[str, str]:
    """The actuator's and the bridge's argument: the local Flink's certificate verifies
    against the secured stack's CA."""
    return ("--flink-ca", f"{LOCAL_FLINK}={tls.ca}")


def tls_current(tls: BrokerTls) -> bool:
    """Whether the secured stack's material has every HTTPS server's certificate (material
    made before they existed has not, and its CA key is gone: no new one can be signed)."""
    return all(tls.server(name).exists() for name in HTTPS_SERVERS)


def rest_tls(tls: BrokerTls) -> tuple[str, ...]:
    """The history's arguments: its REST API and web page serve TLS with the stack's CA."""
    server = tls.server(HISTORY_REST)
    return ("--rest-cert", str(server.certificate), "--rest-key", str(server.key))


def web_port(process: ServiceProcess) -> int:
    return int(process.args[process.args.index("--web-port") + 1])


def services(run_dir: Path) -> list[ServiceProcess]:
    """The services of a run directory, as recorded when they were started."""
    found = []
    for name in NAMES:
        args_file = run_dir / f"{name}.args"
        if args_file.exists():
            found.append(ServiceProcess(name, tuple(json.loads(args_file.read_text())), run_dir))
    return found


def start(
    process: ServiceProcess, settings: Settings, identity: Mapping[str, str] | None = None
) -> int:
    """Start `process` against `settings`' broker, as `identity` (its `SCALEFOLD_*`
    security variables, secure.client_env) on a secured broker, else in plaintext."""
    (process.run_dir / f"{process.name}.args").write_text(json.dumps(process.args))
    env = {
        **(identity if identity is not None else _plaintext(settings)),
        "SCALEFOLD_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "SCALEFOLD_TOPIC_PREFIX": settings.topic_prefix,
    }
    pid = process.start(env)
    write_endpoints(process)
    return pid


def write_endpoints(process: ServiceProcess) -> None:
    """Record where the service listens, `<name>.endpoints.json`, for `local status`.

    A service that opens another endpoint (e.g. SQL) adds its URL under its own key.
    """
    endpoints = {}
    if "--web-port" in process.args:
        base = f"http://127.0.0.1:{web_port(process)}"
        endpoints = {"web": f"{base}/health", "metrics": f"{base}/metrics"}
    endpoints_file(process).write_text(json.dumps(endpoints))


def endpoints_file(process: ServiceProcess) -> Path:
    return process.run_dir / f"{process.name}.endpoints.json"


def endpoints(process: ServiceProcess) -> dict[str, str]:
    try:
        found: dict[str, str] = json.loads(endpoints_file(process).read_text())
    except (OSError, ValueError):
        found = {}
    if process.name == "history":  # the service writes them (services/history/endpoint.py)
        for kind, name in (("sql", "sql.url"), ("jdbc", "jdbc.url")):
            try:
                url = (process.run_dir / "history" / name).read_text().strip()
            except OSError:
                url = ""
            if url:
                found[kind] = url
        rest = _read(process.run_dir / "history" / "rest.url")  # its REST API (docs/rest-api.md)
        if rest:
            found["rest"] = f"{rest}/jobs/<jobid>/rescales/history"
            found["page"] = f"{rest}/web/"
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _plaintext(settings: Settings) -> Mapping[str, str]:
    """For a plaintext broker, no security variable from the calling shell is inherited."""
    return PLAINTEXT_ENV if settings.security.protocol == "PLAINTEXT" else {}


def wait_healthy(process: ServiceProcess, port: int, timeout: float = 120.0) -> None:
    """Poll the service's /health until it says ready; fail with its log if it dies."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.supervised():
            raise RuntimeError(
                f"{process.name} exited; last lines of {process.log}:\n{process.tail()}"
            )
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as response:
                if json.load(response).get("status") == "ready":
                    return
        except OSError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{process.name} not ready in {timeout:.0f} s; see {process.log}")


def wait_logged(process: ServiceProcess, line: str, timeout: float = 180.0) -> None:
    """Wait until the service's log says `line` (for services without a web endpoint)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process.supervised():
            raise RuntimeError(
                f"{process.name} exited; last lines of {process.log}:\n{process.tail()}"
            )
        try:
            if line in process.log.read_text(errors="replace"):
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise RuntimeError(f"{process.name} not ready in {timeout:.0f} s; see {process.log}")


def wait_ready(process: ServiceProcess) -> None:
    if process.name == "history":
        wait_logged(process, HISTORY_READY)
    elif process.name == "bridge":
        wait_logged(process, BRIDGE_READY)
    else:
        wait_healthy(process, web_port(process))


def stop_all(run_dir: Path, progress: Progress) -> None:
    for process in reversed(services(run_dir)):
        if process.stop():
            progress(f"stopped {process.name}")


RUN_DIRS = ("data", "history", "scheduler")
"""The broker's storage, the history's tables and checkpoints, the scheduler's data."""
RUN_FILES = (
    "*.log",
    "*.args",
    "*.pid",
    "*.port",
    "*.endpoints.json",
    "*.supervisor.conf",
    "bootstrap",
    "server.properties",
)
"""Logs, the services' recorded arguments and pids, the broker's address and config."""


def wipe(run_dir: Path, progress: Progress) -> None:
    """Remove everything an earlier run left in `run_dir` (stop it first).

    Only what the stack itself writes: a fresh stack must not meet Parquet rows,
    Spark checkpoints (their offsets belong to the old broker) or logs of the
    old one, but a file of the user's own in the directory stays.
    """
    removed = []
    for name in RUN_DIRS:
        if (run_dir / name).is_dir():
            shutil.rmtree(run_dir / name)
            removed.append(f"{name}/")
    for pattern in RUN_FILES:
        for path in sorted(run_dir.glob(pattern)):
            path.unlink()
            removed.append(path.name)
    if removed:
        progress(f"removed the earlier run's {', '.join(removed)} from {run_dir}")
