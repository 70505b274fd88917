"""Client configuration for librdkafka, aiokafka/Faust and Spark from one Settings.

Also the topic bootstrap (`ensure_topics`) every service and test uses, and
`redacted`, the only form in which a client configuration may be logged.
Every librdkafka client raises `KafkaAccessError` when the broker refuses it
(services/contracts/access.py); `is_transient` never calls a refusal transient.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception,
    stop_after_delay,
    wait_exponential,
)

from services.contracts.access import (
    LIBRDKAFKA_LOGGER,
    REFUSAL_NAMES,
    KafkaAccessError,
    KafkaUnreachableError,
    on_client_error,
    refusal,
    who,
)
from services.contracts.settings import Settings
from services.contracts.topics import Drift, TopicSpec, drifts

_SECRET_MARKERS = ("password", "jaas", "secret", "credential")

log = logging.getLogger("scalefold.kafka")
T = TypeVar("T")

# Errors a broker gives while it starts, elects leaders of new topics, or moves
# them: retried, never fatal (librdkafka marks most of them retriable, not all).
_TRANSIENT_NAMES = frozenset(
    {
        "NOT_LEADER_FOR_PARTITION",
        "UNKNOWN_LEADER_EPOCH",  # the client's metadata is a leader election behind
        "LEADER_NOT_AVAILABLE",
        "FENCED_LEADER_EPOCH",
        "OFFSET_NOT_AVAILABLE",
        "NOT_ENOUGH_REPLICAS",
        "UNKNOWN_TOPIC_OR_PART",
        "NOT_COORDINATOR",
        "COORDINATOR_NOT_AVAILABLE",
        "COORDINATOR_LOAD_IN_PROGRESS",
        "REQUEST_TIMED_OUT",
        "NETWORK_EXCEPTION",
        "_TRANSPORT",
        "_TIMED_OUT",
        "_ALL_BROKERS_DOWN",
        # a request outlived its broker handle: librdkafka drops the bootstrap and
        # decommissioned brokers' handles as metadata arrives (a broker restarting)
        "_DESTROY_BROKER",
        "_WAIT_COORD",
        "_UNKNOWN_PARTITION",
        "_UNKNOWN_TOPIC",
    }
)


def is_transient(error: BaseException) -> bool:
    """A Kafka error that passes by itself: a leader election, a broker (re)starting."""
    from confluent_kafka import KafkaException

    if not isinstance(error, KafkaException) or not error.args:
        return False
    kafka_error = error.args[0]
    if not hasattr(kafka_error, "name"):
        return False
    if kafka_error.fatal() or kafka_error.name() in REFUSAL_NAMES:
        return False
    return bool(kafka_error.retriable()) or kafka_error.name() in _TRANSIENT_NAMES


STARTUP_WAIT_S = 120.0
"""How long a service waits at start-up for a broker that does not answer, or answers
with transient errors only (docs/operations.md): then it exits with one line, status 69."""


def retry_transient(call: Callable[[], T], what: str, timeout: float = STARTUP_WAIT_S) -> T:
    """`call()`, retried with backoff while it fails with a transient Kafka error.

    Anything else is raised as it is; transient errors that outlast `timeout` end in
    `KafkaUnreachableError`, which an entry point reports in one line (status 69).
    """
    from confluent_kafka import KafkaException

    retrying = Retrying(
        retry=retry_if_exception(is_transient),
        stop=stop_after_delay(timeout),
        wait=wait_exponential(multiplier=0.05, max=2.0),
        before_sleep=before_sleep_log(log, logging.DEBUG),
        reraise=True,
    )
    log.debug("calling %s with transient retries", what)
    try:
        return retrying(call)
    except KafkaException as error:
        if not is_transient(error):
            raise
        last = error.args[0]
        raise KafkaUnreachableError(
            f"gave up on {what} after {timeout:g} s of transient errors, "
            f"the last {last.name()}: {last.str()}"
        ) from error


def redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with every secret-bearing value replaced by `***`."""
    return {
        key: "***" if any(m in key.lower() for m in _SECRET_MARKERS) else value
        for key, value in config.items()
    }


def librdkafka_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """Configuration for confluent-kafka's Producer, Consumer and AdminClient.

    Its `error_cb` raises `KafkaAccessError` from the client's next poll or
    flush when the broker refuses it; librdkafka's own log lines go to the
    `librdkafka` logger (each error among them also reaches `error_cb`, so the
    entry point drops them: `without_reported_errors`).
    """
    security = settings.security
    config: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "security.protocol": security.protocol,
        "error_cb": on_client_error(settings),
        "logger": logging.getLogger(LIBRDKAFKA_LOGGER),
    }
    if security.uses_sasl:
        assert security.sasl_password is not None  # checked by KafkaSecurity
        config["sasl.mechanism"] = security.sasl_mechanism
        config["sasl.username"] = security.sasl_username
        config["sasl.password"] = security.sasl_password.reveal()
    optional = {
        "ssl.ca.location": security.ssl_ca_location,
        "ssl.certificate.location": security.ssl_certificate_location,
        "ssl.key.location": security.ssl_key_location,
        "ssl.key.password": security.ssl_key_password.reveal()
        if security.ssl_key_password
        else None,
    }
    config.update({k: v for k, v in optional.items() if v is not None})
    config.update(extra)
    return config


def flush(producer: Any, timeout: float) -> int:
    """`producer.flush(timeout)` in short steps: a refusal raised by a callback
    surfaces from the next step, where one long flush would hold it until its end."""
    import time

    deadline = time.monotonic() + timeout
    while True:
        left = int(producer.flush(min(0.2, max(0.0, deadline - time.monotonic()))))
        if left == 0 or time.monotonic() >= deadline:
            return left


def producer_config(settings: Settings, **extra: Any) -> dict[str, Any]:
    """librdkafka producer configuration: idempotent, acks=all, and Kafka's standard
    murmur2 partitioner, so a key lands where Java, Spark and aiokafka (Faust) put it."""
    return librdkafka_config(
        settings,
        **{"enable.idempotence": True, "acks": "all", "partitioner": "murmur2_random", **extra},
    )


def partition_for(key: bytes, partitions: int) -> int:
    """The partition Kafka's default partitioner picks for `key`: murmur2, made positive."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 hash (org.apache.kafka.common.utils.Utils.murmur2), as signed 32 bit."""
    m, r, mask = 0x5BD1E995, 24, 0xFFFFFFFF
    length = len(data)
    h = (0x9747B28C ^ length) & mask
    body = length - length % 4
    for i in range(0, body, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    tail = data[body:]
    if len(tail) == 3:
        h ^= tail[2] << 16
    if len(tail) >= 2:
        h ^= tail[1] << 8
    if tail:
        h ^= tail[0]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


JAAS_KEY = "sasl.jaas.config"


class SparkSecretsError(ValueError):
    """Spark would be handed a password in its options; it needs a secrets file."""


def spark_kafka_options(settings: Settings, secrets: Path | None = None) -> dict[str, str]:
    """Options for Spark's Kafka source and sink (`kafka.`-prefixed Java client keys).

    With SASL, the JAAS line (which holds the password) is not an option: Spark
    prints a source's options unredacted in the parsed plan (`explain(True)`,
    query descriptions). The options point Kafka's FileConfigProvider (KIP-421)
    at `secrets` instead, a properties file of `spark_secrets(settings)` that
    each Kafka client reads as it starts.
    """
    security = settings.security
    options = {
        "kafka.bootstrap.servers": settings.bootstrap_servers,
        "kafka.security.protocol": security.protocol,
    }
    if security.uses_sasl:
        if secrets is None:
            raise SparkSecretsError("SASL for Spark needs a secrets file (spark_secrets)")
        options["kafka.sasl.mechanism"] = str(security.sasl_mechanism)
        options["kafka.config.providers"] = "file"
        options["kafka.config.providers.file.class"] = (
            "org.apache.kafka.common.config.provider.FileConfigProvider"
        )
        options["kafka.sasl.jaas.config"] = f"${{file:{secrets}:{JAAS_KEY}}}"
    if security.ssl_ca_location:
        options["kafka.ssl.truststore.type"] = "PEM"
        options["kafka.ssl.truststore.location"] = security.ssl_ca_location
    return options


def spark_secrets(settings: Settings) -> str:
    """The properties file `spark_kafka_options` refers to: the JAAS line with the password."""
    security = settings.security
    assert security.uses_sasl and security.sasl_password is not None
    module = (
        "org.apache.kafka.common.security.plain.PlainLoginModule"
        if security.sasl_mechanism == "PLAIN"
        else "org.apache.kafka.common.security.scram.ScramLoginModule"
    )

    def jaas(value: str) -> str:  # a quoted JAAS value (java.io.StreamTokenizer's escapes)
        for char, escaped in (("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r")):
            value = value.replace(char, escaped)
        return f'"{value}"'

    line = (
        f"{module} required username={jaas(str(security.sasl_username))} "
        f"password={jaas(security.sasl_password.reveal())};"
    )
    # java.util.Properties: a backslash escapes (the line holds no line break any more).
    return f"{JAAS_KEY}={line.replace(chr(92), chr(92) * 2)}\n"


class TopicMismatchError(RuntimeError):
    """An existing topic's partition count differs from its spec."""


CLI_CONNECT_TIMEOUT = 10.0
"""How long a user's command waits for the broker; services wait longer (a broker
that restarts under them is expected, a user at a prompt wants an answer)."""


def connect(settings: Settings, timeout: float = 30.0) -> Any:
    """An AdminClient that has reached the broker: `KafkaAccessError` within a second
    or two when the broker refuses us (librdkafka would otherwise wait out `timeout`),
    `KafkaUnreachableError` (one line, naming the address) when none answers in
    `timeout`. Its connection errors meanwhile are not logged: that line says them."""
    import time

    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    admin = AdminClient(librdkafka_config(settings, error_cb=on_client_error(settings, quiet=True)))
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.list_topics(timeout=1.0)
            return admin
        except KafkaException as error:
            admin.poll(0)  # serves error_cb, which raises a refusal
            if not is_transient(error):
                raise
            if time.monotonic() > deadline:
                raise KafkaUnreachableError(
                    f"no answer from the broker {who(settings)} in {timeout:.0f} s "
                    f"({error.args[0].str()}); check SCALEFOLD_BOOTSTRAP_SERVERS and "
                    "SCALEFOLD_SECURITY_PROTOCOL"
                ) from None


def ensure_topics(
    settings: Settings,
    specs: Mapping[str, TopicSpec],
    timeout: float = 30.0,
    connect_timeout: float = STARTUP_WAIT_S,
) -> list[str]:
    """Create the topics of `specs` that are missing; return the names created.

    An existing topic with another partition count is an error: records keyed
    by job id would land on other partitions than the Faust tables expect.
    On a broker with ACLs a topic the client may not describe looks missing;
    creating it is then refused, and the error says so.
    """
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    # a service may start while the broker (re)starts: wait it out, transient errors too
    admin = connect(settings, connect_timeout)
    existing = retry_transient(
        lambda: admin.list_topics(timeout=min(timeout, 10.0)).topics,
        "the broker's topics",
        timeout=connect_timeout,  # one bound for waiting out the broker, connected or not
    )
    for name, spec in specs.items():
        if name in existing and len(existing[name].partitions) != spec.partitions:
            raise TopicMismatchError(
                f"topic {name} has {len(existing[name].partitions)} partitions, "
                f"scalefold expects {spec.partitions}"
            )
    missing = [
        NewTopic(name, num_partitions=spec.partitions, replication_factor=-1, config=spec.config())
        for name, spec in specs.items()
        if name not in existing
    ]
    created = []
    if missing:
        for name, future in admin.create_topics(missing, request_timeout=timeout).items():
            try:
                future.result()
                created.append(name)
            except KafkaException as error:
                problem = refusal(error.args[0], settings, f"create the missing topic {name}")
                if problem is not None:
                    raise KafkaAccessError(
                        f"{problem} (or it exists and may not be described by this user); "
                        "an administrator creates the topics: `scalefold topics --create`"
                    ) from None
                if "TOPIC_ALREADY_EXISTS" not in str(error):
                    raise
    wait_for_leaders(admin, list(specs), timeout, settings)
    for drift in topic_drifts(admin, {n: s for n, s in specs.items() if n not in created}):
        # A topic kept longer than declared grows the broker's disk without bound.
        level = logging.WARNING if drift.keeps_more else logging.INFO
        log.log(level, "%s; `scalefold topics --apply` sets what is declared", drift)
    return sorted(created)


def topic_drifts(
    admin: Any,
    specs: Mapping[str, TopicSpec],
    timeout: float = 10.0,
    settings: Settings | None = None,
) -> list[Drift]:
    """The settings of existing topics that differ from their specs. Without `settings`,
    a topic this client may not describe the settings of (ACLs) is not judged (a
    service's start: best effort); with them, that refusal is a `KafkaAccessError`."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import ConfigResource  # type: ignore[attr-defined]

    if not specs:
        return []
    resources = [ConfigResource(ConfigResource.Type.TOPIC, name) for name in specs]
    found: list[Drift] = []
    for resource, future in admin.describe_configs(resources, request_timeout=timeout).items():
        try:
            entries = future.result()
        except KafkaException as error:
            what = f"describe the settings of topic {resource.name}"
            problem = refusal(error.args[0], settings, what) if settings else None
            if problem is not None:
                raise problem from None
            log.debug("the settings of topic %s were not described: %s", resource.name, error)
            continue
        actual = {key: entry.value for key, entry in entries.items() if entry.value is not None}
        found.extend(drifts(resource.name, specs[resource.name], actual))
    return found


def apply_topic_configs(
    settings: Settings, specs: Mapping[str, TopicSpec], timeout: float = 30.0
) -> list[Drift]:
    """Set on the broker each declared setting an existing topic holds otherwise; return
    the settings changed. Only those (an incremental alter): the rest stay as they are."""
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import (  # type: ignore[attr-defined]
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
    )

    admin = connect(settings, timeout)
    changed = topic_drifts(admin, specs, timeout, settings)
    by_topic: dict[str, list[Drift]] = {}
    for drift in changed:
        by_topic.setdefault(drift.topic, []).append(drift)
    resources = [
        ConfigResource(
            ConfigResource.Type.TOPIC,
            topic,
            incremental_configs=[
                ConfigEntry(d.key, d.declared, incremental_operation=AlterConfigOpType.SET)
                for d in items
            ],
        )
        for topic, items in by_topic.items()
    ]
    if resources:
        futures = admin.incremental_alter_configs(resources, request_timeout=timeout)
        for resource, future in futures.items():
            try:
                future.result()
            except KafkaException as error:
                problem = refusal(error.args[0], settings, f"alter topic {resource.name}")
                raise problem or error from None
    return changed


class LeadersNotReadyError(RuntimeError):
    """Partitions of a topic still have no leader after the timeout."""


def wait_for_leaders(
    admin: Any, topics: list[str], timeout: float = 30.0, settings: Settings | None = None
) -> None:
    """Block until every partition of `topics` has a leader that answers for it.

    A topic's creation returns before its partitions' leaders are elected, and
    the metadata names a leader a moment before that broker serves the
    partition: a client asking for offsets meanwhile gets
    NOT_LEADER_FOR_PARTITION. So this asks every partition's end offset, as
    clients will, until every one answers.
    """
    import time

    from confluent_kafka import KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    deadline = time.monotonic() + timeout
    while True:
        metadata = admin.list_topics(timeout=timeout).topics
        waiting = [name for name in topics if name not in metadata or not metadata[name].partitions]
        partitions = [
            TopicPartition(name, number)
            for name in topics
            if name in metadata
            for number in metadata[name].partitions
        ]
        if partitions:
            futures = admin.list_offsets(
                {tp: OffsetSpec.latest() for tp in partitions},  # type: ignore[no-untyped-call]
                request_timeout=timeout,
            )
            for tp, future in futures.items():
                try:
                    future.result()
                except KafkaException as error:
                    problem = settings and refusal(error.args[0], settings, f"describe {tp.topic}")
                    if problem:
                        raise problem from None
                    if not is_transient(error):
                        raise
                    waiting.append(f"{tp.topic}[{tp.partition}]")
        if not waiting:
            return
        if time.monotonic() > deadline:
            raise LeadersNotReadyError(f"no partition leader after {timeout:.0f} s: {waiting}")
        time.sleep(0.1)


class TopicReadError(RuntimeError):
    """A topic that could not be read to its end (missing, or the broker away too long)."""


def read_to_end(
    settings: Settings,
    topic: str,
    group: str,
    *,
    timeout: float = 30.0,
    patience: float = 600.0,
    keys: Collection[str] | None = None,
    log_starts: dict[int, int] | None = None,
) -> Iterator[Any]:
    """Every message of `topic` from the beginning to its end when asked (confluent_kafka
    messages, in order per partition). The end is each partition's end-of-partition event, as
    offsets may have gaps (retention, compaction). `group` names the throwaway consumer
    group (`Topics.own(...)`); `patience` is how long a broker may be away meanwhile;
    `keys`: only the partitions Kafka's default partitioner gives these keys (None: all);
    `log_starts`, if given, gets each partition's first offset still held once read (what
    retention has deleted lies before it)."""
    import time
    import uuid

    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer(
        librdkafka_config(
            settings,
            **{
                "group.id": f"{group}-{uuid.uuid4().hex}",
                "enable.auto.commit": False,
                "enable.partition.eof": True,
            },
        )
    )
    try:
        metadata = retry_transient(
            lambda: consumer.list_topics(topic, timeout=timeout).topics[topic],
            f"partitions of {topic}",
            timeout=patience,
        )
        if metadata.error is not None:
            raise TopicReadError(f"cannot read {topic}: {metadata.error}")
        chosen = sorted(metadata.partitions)
        if keys is not None:
            chosen = sorted({partition_for(k.encode(), len(chosen)) for k in keys})

        def ends() -> dict[int, int]:
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[1]
                for p in chosen
            }

        high = retry_transient(ends, f"end offsets of {topic}", patience)
        pending = {p for p, end in high.items() if end > 0}
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in pending])
        deadline = time.monotonic() + patience
        while pending:
            message = consumer.poll(1.0)
            if message is None:
                if time.monotonic() > deadline:
                    raise TopicReadError(f"timed out reading {topic} up to offsets {high}")
                continue
            error = message.error()
            if error is None:
                yield message
            elif error.code() == KafkaError._PARTITION_EOF:
                pending.discard(message.partition())
        if log_starts is not None:
            low = retry_transient(
                lambda: {
                    p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout)[0]
                    for p in chosen
                },
                f"start offsets of {topic}",
                patience,
            )
            log_starts.update(low)
    finally:
        consumer.close()
