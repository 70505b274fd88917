"""A local Flink 2.3 session cluster's configuration, as data (no process, no file).

The settings of `scalefold local up --flink` and of the tests' cluster (tests/flink): the
adaptive scheduler with its rescale history on, everything on loopback, the ports chosen
by the caller (free ones, services/localstack/ports.py), a JobManager of 1 GB and
TaskManagers of 700 MB (the issue's sizes for 24 GiB machines), and the adaptive
scheduler's waits, which the tests set short so a scenario takes seconds. With `rest_tls`
(`local up --secure --flink`) the REST endpoint and web UI serve TLS with the secured
stack's CA (Flink's `security.ssl.rest.*`); Flink's internal RPC stays on loopback, plain.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from services.contracts.settings import Secret

FLINK_VERSION = "2.3.0"
HISTORY_SIZE_KEY = "web.adaptive-scheduler.rescale-history.size"

JVM_OPENS = (
    # Flink's default env.java.opts.all: without them running a jar fails on Java 17
    # (InaccessibleObjectException in DataStreamV2SinkTransformationTranslator).
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.api=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.parser=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.tree=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.util=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    *(
        f"--add-opens=java.base/{package}=ALL-UNNAMED"
        for package in (
            "java.lang",
            "java.net",
            "java.io",
            "java.nio",
            "sun.nio.ch",
            "java.lang.reflect",
            "java.text",
            "java.time",
            "java.util",
            "java.util.concurrent",
            "java.util.concurrent.atomic",
            "java.util.concurrent.locks",
        )
    ),
)

LOG4J = """\
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = MainAppender
appender.main.name = MainAppender
appender.main.type = File
appender.main.fileName = ${sys:log.file}
appender.main.layout.type = PatternLayout
appender.main.layout.pattern = %d{yyyy-MM-dd HH:mm:ss,SSS} %-5p %-60c %x - %m%n
"""

TASKMANAGER_MEMORY = {
    # 700 MB a TaskManager: small fixed parts, the rest task heap (~316 MB).
    "taskmanager.memory.process.size": "700m",
    "taskmanager.memory.jvm-metaspace.size": "128m",
    "taskmanager.memory.jvm-overhead.min": "64m",
    "taskmanager.memory.jvm-overhead.max": "64m",
    "taskmanager.memory.framework.heap.size": "64m",
    "taskmanager.memory.framework.off-heap.size": "64m",
    "taskmanager.memory.managed.size": "32m",
    "taskmanager.memory.network.min": "32m",
    "taskmanager.memory.network.max": "32m",
}


@dataclass(frozen=True)
class Waits:
    """The adaptive scheduler's waits and the heartbeat, in milliseconds.

    Flink's defaults (the local stack's, apart from the resource wait) are for production;
    the tests' are short: a scenario then takes seconds, and a stopped TaskManager is
    noticed within `heartbeat_timeout`."""

    resource_wait: int = 300_000  # submission.resource-wait-timeout (Flink: 5 min)
    submission_stabilization: int = 10_000  # submission.resource-stabilization-timeout
    cooldown: int = 30_000  # executing.cooldown-after-rescaling
    executing_stabilization: int = 60_000  # executing.resource-stabilization-timeout
    heartbeat_interval: int = 10_000
    heartbeat_timeout: int = 50_000
    restart_delay: int | None = None  # the cluster's fixed-delay restart strategy, if set


SHORT_WAITS = Waits(
    resource_wait=60_000,
    submission_stabilization=1_000,
    cooldown=1_000,
    executing_stabilization=2_000,
    heartbeat_interval=1_000,
    heartbeat_timeout=5_000,
)
"""The tests' waits (tests/flink): seconds, not Flink's minutes."""

LOCAL_WAITS = Waits(
    submission_stabilization=5_000,
    cooldown=10_000,
    executing_stabilization=10_000,
    heartbeat_interval=2_000,
    heartbeat_timeout=10_000,
)
"""`local up --flink`'s: a TaskManager added by hand shows its rescale within ~10 s."""


@dataclass(frozen=True)
class RestTls:
    """Flink's REST endpoint over TLS: its PKCS#12 keystore (key, certificate, CA), a
    truststore with the CA (for Flink's own CLI, a REST client), the one password both
    open with, and the CA's PEM certificate (what our Python clients verify against)."""

    keystore: Path
    truststore: Path
    password: Secret
    ca: Path


@dataclass(frozen=True)
class FlinkConfig:
    """What differs between local clusters: ports, slots, history, waits."""

    rest_port: int
    rpc_port: int
    slots_per_taskmanager: int = 1
    history_size: int = 100
    waits: Waits = field(default_factory=Waits)
    jobmanager_memory: str = "1000m"
    rest_tls: RestTls | None = None

    def with_waits(self, waits: Waits) -> FlinkConfig:
        return replace(self, waits=waits)

    @property
    def rest_url(self) -> str:
        scheme = "https" if self.rest_tls is not None else "http"
        return f"{scheme}://127.0.0.1:{self.rest_port}"


def entries(config: FlinkConfig) -> dict[str, str]:
    """config.yaml's keys and values (all strings, as Flink's flat YAML takes them)."""
    waits = config.waits
    adaptive = "jobmanager.adaptive-scheduler"
    return {
        "jobmanager.scheduler": "adaptive",
        HISTORY_SIZE_KEY: str(config.history_size),
        "jobmanager.rpc.address": "localhost",
        "jobmanager.rpc.port": str(config.rpc_port),
        "jobmanager.bind-host": "127.0.0.1",
        "rest.address": "127.0.0.1",
        "rest.bind-address": "127.0.0.1",
        "rest.port": str(config.rest_port),
        "taskmanager.host": "127.0.0.1",
        "taskmanager.bind-host": "127.0.0.1",
        # ephemeral ports: several TaskManagers share the loopback, none listens twice
        "blob.server.port": "0",
        "taskmanager.rpc.port": "0",
        "taskmanager.data.port": "0",
        "jobmanager.memory.process.size": config.jobmanager_memory,
        "taskmanager.numberOfTaskSlots": str(config.slots_per_taskmanager),
        **TASKMANAGER_MEMORY,
        f"{adaptive}.submission.resource-wait-timeout": f"{waits.resource_wait} ms",
        f"{adaptive}.submission.resource-stabilization-timeout": (
            f"{waits.submission_stabilization} ms"
        ),
        f"{adaptive}.executing.cooldown-after-rescaling": f"{waits.cooldown} ms",
        f"{adaptive}.executing.resource-stabilization-timeout": (
            f"{waits.executing_stabilization} ms"
        ),
        # Pekko's 10 s defaults, longer for a loaded machine. Remoting.start's own 10 s
        # wait is not this key: at load 80 a TaskManager still exited with a
        # TimeoutException there (the tests start another, tests/flink/flink_support.py)
        "pekko.startup-timeout": "60 s",
        "pekko.ask.timeout": "30 s",
        "heartbeat.interval": str(waits.heartbeat_interval),
        "heartbeat.timeout": str(waits.heartbeat_timeout),
        **restart_entries(waits.restart_delay),
        **tls_entries(config.rest_tls),
    }


def restart_entries(delay_ms: int | None) -> dict[str, str]:
    """The cluster's restart strategy: fixed-delay with `delay_ms`, else Flink's default.
    A job that sets none of its own takes it (and REST then says "Cluster level default
    restart strategy": the bridge reads this from /jobmanager/config)."""
    if delay_ms is None:
        return {}
    return {
        "restart-strategy.type": "fixed-delay",
        "restart-strategy.fixed-delay.attempts": "1000",
        "restart-strategy.fixed-delay.delay": f"{delay_ms} ms",
    }


TLS_SUITES = (
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
)


def tls_entries(tls: RestTls | None) -> dict[str, str]:
    """`security.ssl.rest.*`: TLS on the REST endpoint, not mutual (any client that trusts
    the CA may call; the endpoint binds loopback only). Flink logs its configuration at
    start with the values of keys holding "password" masked (GlobalConfiguration.isSensitive)."""
    if tls is None:
        return {}
    rest = "security.ssl.rest"
    password = tls.password.reveal()
    return {
        # Flink's default suite (TLS_RSA_WITH_AES_128_CBC_SHA) needs an RSA key and a SHA-1
        # MAC, which Python's default client context refuses; our keys are EC (P-256).
        "security.ssl.protocol": "TLSv1.2",
        "security.ssl.algorithms": ",".join(TLS_SUITES),
        f"{rest}.enabled": "true",
        f"{rest}.keystore": str(tls.keystore),
        f"{rest}.keystore-password": password,
        f"{rest}.key-password": password,
        f"{rest}.truststore": str(tls.truststore),
        f"{rest}.truststore-password": password,
    }


def render(config: FlinkConfig) -> str:
    """config.yaml's text: one `key: value` a line, passwords double-quoted (a JSON string
    is a YAML one) so that no character of theirs is read as YAML; `1000 ms` is fine bare."""
    return "".join(
        f"{key}: {json.dumps(value) if key.endswith('password') else value}\n"
        for key, value in entries(config).items()
    )


RESULT_PREFIX = "BASH_JAVA_UTILS_EXEC_RESULT:"


def resource_params(output: str) -> tuple[list[str], list[str]]:
    """(JVM flags, `-D key=value` arguments) from BashJavaUtils' GET_*_RESOURCE_PARAMS
    output: its last two result lines, the JVM's memory flags and the dynamic
    properties the process needs (without them: "taskmanager.cpu.cores is not set")."""
    results = [
        line[len(RESULT_PREFIX) :].strip()
        for line in output.splitlines()
        if line.startswith(RESULT_PREFIX)
    ]
    if len(results) < 2:
        raise ValueError(f"BashJavaUtils gave no resource parameters: {output.strip()[-500:]}")
    return results[-2].split(), results[-1].split()
