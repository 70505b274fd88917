"""A service's start: its topics made if missing, then its rights checked with the broker.

A missing ACL then stops the service at its start with one line naming the
right it lacks, instead of somewhere inside Faust or Spark, which may retry
it quietly for ever (aiokafka waits on a refused consumer-group join).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from services.contracts.access import KafkaAccessError, refusal, who
from services.contracts.kafka import connect, ensure_topics, retry_transient
from services.contracts.settings import Settings
from services.contracts.topics import ACCESS, Topics


def prepare(settings: Settings, client: str, private: Sequence[str] = ()) -> list[str]:
    """Make `client`'s topics (`ACCESS[client]`) if missing, check its rights on them,
    its consumer group and its `private` topics; return the topics created."""
    created = ensure_topics(settings, settings.topics.used_by(client))
    admin = connect(settings)
    retry_transient(
        lambda: verify_access(admin, settings, client, private), f"the rights of {client}"
    )
    return created


@dataclass(frozen=True)
class Need:
    """Operations a client needs on one topic or consumer group."""

    resource: str  # "topic" | "group"
    name: str
    operations: tuple[str, ...]  # Kafka AclOperation names: READ, WRITE


def needs(topics: Topics, client: str) -> list[Need]:
    """What `client` (a key of ACCESS) needs: its topics, and its consumer group(s)."""
    access = ACCESS[client]
    result = [
        Need(
            "topic",
            topics.name(spec),
            tuple(
                op for op, on in (("READ", access.reads), ("WRITE", access.writes)) if spec in on
            ),
        )
        for spec in access.specs
    ]
    # The group named like the prefix itself: a PREFIXED grant covers it and every longer name.
    return [*result, Need("group", topics.own(client), ("READ",))]


def verify_access(admin: Any, settings: Settings, client: str, private: Sequence[str] = ()) -> None:
    """Raise `KafkaAccessError` naming the first thing `client` may not do.

    Asked of the broker: KIP-430's authorized operations of each topic and
    group, and a validate-only creation of each `private` topic still to be made.
    """
    from confluent_kafka import TopicCollection
    from confluent_kafka.admin import NewTopic  # type: ignore[attr-defined]

    wanted = needs(settings.topics, client)
    existing = admin.list_topics(timeout=30).topics
    wanted += [Need("topic", name, ("READ", "WRITE")) for name in private if name in existing]
    topics = [need for need in wanted if need.resource == "topic"]
    groups = [need for need in wanted if need.resource == "group"]
    described = admin.describe_topics(
        TopicCollection([need.name for need in topics]), include_authorized_operations=True
    )
    for need in topics:
        _check(need, described[need.name], settings)
    described = admin.describe_consumer_groups(
        [need.name for need in groups], include_authorized_operations=True
    )
    for need in groups:
        _check(need, described[need.name], settings)
    missing = [NewTopic(name, 1, 1) for name in private if name not in existing]
    for name, future in admin.create_topics(missing, validate_only=True).items() if missing else ():
        try:
            future.result()
        except Exception as error:
            if _already_exists(error):  # another worker of the group made it meanwhile
                continue
            _raise(f"CREATE on topic {name} (its own, made at start)", error, settings)


def _already_exists(error: Exception) -> bool:
    from confluent_kafka import KafkaError, KafkaException

    return (
        isinstance(error, KafkaException)
        and error.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS
    )


def _check(need: Need, future: Any, settings: Settings) -> None:
    what = f"{'/'.join(need.operations)} on {need.resource} {need.name}"
    try:
        granted = future.result().authorized_operations
    except Exception as error:
        _raise(what, error, settings)
    if granted is None:  # the broker did not say; the client will find out
        return
    names = {op.name for op in granted}
    if "ALL" in names:
        return
    lacking = [op for op in need.operations if op not in names]
    if lacking:
        raise KafkaAccessError(
            f"Kafka refused {who(settings)}: its ACLs do not allow {'/'.join(lacking)} "
            f"on {need.resource} {need.name}; docs/security.md lists what each client needs"
        )


def _raise(what: str, error: Exception, settings: Settings) -> NoReturn:
    kafka_error = error.args[0] if error.args else None
    problem = refusal(kafka_error, settings, what)
    if problem is not None:
        raise KafkaAccessError(
            f"{problem} (docs/security.md lists what each client needs)"
        ) from None
    raise error
