"""The local stack's Flink: `local up --flink`, `local down`, `local status`.

The cluster of a run directory lives in `<run dir>/flink` (flink.py says what is there).
`up` is idempotent like `local up`: a running JobManager is kept, and only the
TaskManagers missing from the requested number are started.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from pathlib import Path

from services.contracts.settings import Secret
from services.localstack.flink import FlinkCluster, FlinkClusterError
from services.localstack.flinkconf import LOCAL_WAITS, FlinkConfig, RestTls, Waits
from services.localstack.flinkdist import flink_home, sample_job
from services.localstack.ports import free_ports
from services.localstack.tls import FLINK_REST, BrokerTls, make_truststore

Progress = Callable[[str], None]


def cluster_dir(run_dir: Path) -> Path:
    return run_dir / "flink"


def local_cluster(run_dir: Path, cache: Path, progress: Progress = print) -> FlinkCluster:
    """The run directory's cluster, with the jars fetched if they are not yet."""
    return FlinkCluster(cluster_dir(run_dir), flink_home(cache, progress))


def up(
    run_dir: Path,
    cache: Path,
    taskmanagers: int,
    progress: Progress = print,
    waits: Waits = LOCAL_WAITS,
    *,
    tls: BrokerTls | None = None,
) -> FlinkCluster:
    """Start (or keep) the JobManager and bring the running TaskManagers up to
    `taskmanagers`; the sample job is built too, so `scalefold flink submit` just runs.
    With `tls` (the secured broker's material) the REST endpoint serves TLS with its CA."""
    started = time.monotonic()
    cluster = local_cluster(run_dir, cache, progress)
    sample_job(cache, cluster.home, progress)
    if cluster.jobmanager.pid() is None:
        cluster.directory.mkdir(parents=True, exist_ok=True)
        rest_port, rpc_port = free_ports(2)
        secured = rest_tls(tls) if tls is not None else None
        cluster.configure(FlinkConfig(rest_port, rpc_port, waits=waits, rest_tls=secured))
        pid = cluster.start_jobmanager()
        progress(f"Flink JobManager running (pid {pid})")
    # The TaskManagers start beside the JobManager (each JVM takes seconds to come up)
    # and keep trying to register until it answers.
    running = [tm for tm in cluster.taskmanagers() if tm.pid() is not None]
    ids = cluster.add_taskmanagers(max(0, taskmanagers - len(running)))
    if ids:
        progress(f"Flink TaskManagers {', '.join(ids)} started")
    progress("waiting for Flink's REST API and the TaskManagers to register")
    cluster.wait_rest()
    cluster.wait_registered(ids)
    progress(
        f"Flink ready in {time.monotonic() - started:.0f} s: {cluster.rest_url()} "
        f"(web UI and REST; logs in {cluster.directory})"
    )
    return cluster


def rest_tls(tls: BrokerTls) -> RestTls:
    """Flink's REST TLS from the secured stack's material: the certificate signed for it
    when the CA was made, and a truststore of the CA (made here: it needs no CA key)."""
    server = tls.server(FLINK_REST)
    if not server.exists():
        raise FlinkClusterError(
            f"{tls.directory} has no certificate for Flink's REST endpoint (made by an "
            "earlier scalefold): start the stack again with `local up --secure --flink --fresh`"
        )
    truststore = tls.directory / f"{FLINK_REST}-truststore.p12"
    if not truststore.exists():
        make_truststore(tls.ca, truststore, server.password_file)
    return RestTls(server.keystore, truststore, Secret(server.password()), tls.ca)


def down(run_dir: Path, progress: Progress = print) -> list[str]:
    """Stop every Flink process of the run directory (no jar is needed for that)."""
    cluster = FlinkCluster(cluster_dir(run_dir), Path())
    return cluster.stop(progress)


def discard(run_dir: Path, progress: Progress = print) -> None:
    """`local up --fresh`: stop the earlier Flink and remove its directory (its logs)."""
    down(run_dir, progress)
    if cluster_dir(run_dir).is_dir():
        shutil.rmtree(cluster_dir(run_dir))
        progress(f"removed the earlier run's flink/ from {run_dir}")


def status_lines(run_dir: Path) -> list[str]:
    """`local status`'s lines for Flink, in its columns; none if Flink never ran here."""
    cluster = FlinkCluster(cluster_dir(run_dir), Path())
    jobmanager = cluster.jobmanager
    if not jobmanager.pid_file.exists() and not cluster.taskmanagers():
        return []
    pid = jobmanager.pid()
    lines = [
        f"{'flink':<10} running  pid {pid}  log {jobmanager.log}" if pid else "flink      stopped"
    ]
    if pid:
        lines.append(f"{'':<10}   {'rest':<8} {cluster.rest_url()}")
    taskmanagers = cluster.taskmanagers()
    width = max([8, *(len(tm.name) for tm in taskmanagers)])  # the actuator's names are long
    for tm in taskmanagers:
        tm_pid = tm.pid()
        state = f"running  pid {tm_pid}" if tm_pid else "stopped"
        lines.append(f"{'':<10}   {tm.name:<{width}} {state}  log {tm.log}")
    return lines
