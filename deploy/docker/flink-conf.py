"""Write the Flink image's conf/ on the host (`deploy/docker/provision.sh flink`).

The settings are the local stack's own (services/localstack/flinkconf.py): the adaptive
scheduler, a rescale history of 100 per job, a JobManager of 1000 MB and TaskManagers of
700 MB, `local up --flink`'s waits (with Flink's own heartbeat timeout, 50 s). Only the addresses differ: in compose the JobManager
is `jobmanager` on the network and every process listens beyond its container's loopback
(the host publishes only the REST port, on 127.0.0.1). BashJavaUtils computes both
processes' memory flags here, once, so a container starts one JVM, not two, and the image
build runs none.

    .venv/bin/python deploy/docker/flink-conf.py FLINK_HOME CONF_DIR
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from services.localstack import flinkconf
from services.localstack.flink import BASH_JAVA_UTILS

REST_PORT, RPC_PORT = 8081, 6123
SLOTS = "taskmanager.numberOfTaskSlots"
WAITS = replace(flinkconf.LOCAL_WAITS, heartbeat_interval=10_000, heartbeat_timeout=50_000)
"""`local up --flink`'s waits, but Flink's own heartbeat: a container's JVM starting beside
others on a busy machine missed the local stack's 10 s once (a needless failover)."""
CONTAINER = {
    "jobmanager.rpc.address": "jobmanager",
    "jobmanager.bind-host": "0.0.0.0",
    "rest.address": "jobmanager",
    "rest.bind-address": "0.0.0.0",
    "taskmanager.bind-host": "0.0.0.0",
    # the container's own address, given at its start (deploy/docker/flink-run.sh)
    "taskmanager.host": None,
    # fixed: on the compose network only, never published
    "blob.server.port": "6124",
}
REMOTING_STARTUP = "-Dpekko.remote.classic.startup-timeout=60s"
"""Pekko's classic Remoting.start waits `pekko.remote.classic.startup-timeout` (10 s in the
reference.conf of Flink 2.3.0's flink-rpc-akka.jar); Flink's `pekko.startup-timeout` sets
`pekko.remote.startup-timeout`, which classic remoting does not read. At load 50-78 a
TaskManager exited there three times in a row ("Futures timed out after [10000
milliseconds]" in Remoting.start). Pekko's reference configuration takes system
properties over reference.conf, so the JVM flag reaches it."""
LOG4J_CONSOLE = """\
rootLogger.level = INFO
rootLogger.appenderRef.console.ref = ConsoleAppender
appender.console.name = ConsoleAppender
appender.console.type = CONSOLE
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
"""


def config_yaml() -> str:
    config = flinkconf.FlinkConfig(rest_port=REST_PORT, rpc_port=RPC_PORT, waits=WAITS)
    values = {**flinkconf.entries(config), **CONTAINER}
    return "".join(f"{key}: {value}\n" for key, value in values.items() if value is not None)


def resource_params(home: Path, conf: Path, kind: str) -> tuple[list[str], list[str]]:
    """BashJavaUtils' JVM flags and dynamic properties for `kind` (jm or tm)."""
    classpath = f"{home / 'bin' / 'bash-java-utils.jar'}:{home / 'lib'}/*"
    command = ["java", "-cp", classpath, BASH_JAVA_UTILS, f"GET_{kind.upper()}_RESOURCE_PARAMS"]
    done = subprocess.run(
        [*command, "--configDir", str(conf)], capture_output=True, text=True, check=False
    )
    return flinkconf.resource_params(done.stdout + done.stderr)


def without(dynamic: list[str], key: str) -> list[str]:
    """The `-D key=value` pairs but `key`'s (a container's slots are its own: FLINK_TASK_SLOTS)."""
    pairs = list(zip(dynamic[::2], dynamic[1::2], strict=True))
    return [word for pair in pairs if not pair[1].startswith(f"{key}=") for word in pair]


def main(home: Path, conf: Path) -> None:
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "config.yaml").write_text(config_yaml())
    (conf / "log4j-console.properties").write_text(LOG4J_CONSOLE)
    (conf / "jvm-opens").write_text("\n".join(flinkconf.JVM_OPENS) + "\n")
    for kind in ("jm", "tm"):
        jvm, dynamic = resource_params(home, conf, kind)
        jvm, dynamic = [*jvm, REMOTING_STARTUP], without(dynamic, SLOTS)
        (conf / f"{kind}.jvm").write_text("\n".join(jvm) + "\n")
        (conf / f"{kind}.dynamic").write_text("\n".join(dynamic) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
