"""The broker refusing a client: failed authentication, an untrusted certificate, a missing ACL.

Such a refusal never passes by itself, so it is never retried: every client
turns it into a `KafkaAccessError` at once, whose message names the cause and
the setting to check, and every entry point exits with one line and
`EXIT_ACCESS`. librdkafka keeps reconnecting after a failed authentication and
reports it only through its error callback, so `on_client_error` (installed by
`librdkafka_config`) raises from the client's next poll or flush.

No message here carries a secret: librdkafka's and the broker's error strings
name users, mechanisms and topics, never passwords.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from services.contracts.settings import Settings

LIBRDKAFKA_LOGGER = "librdkafka"  # where librdkafka_config sends librdkafka's own log lines
EXIT_ACCESS = 77  # EX_NOPERM (sysexits.h)
EXIT_UNREACHABLE = 69  # EX_UNAVAILABLE

log = logging.getLogger("scalefold.kafka")

_CREDENTIALS = "check SCALEFOLD_SASL_USERNAME, SCALEFOLD_SASL_PASSWORD and SCALEFOLD_SASL_MECHANISM"
_TRUST = "check SCALEFOLD_SSL_CA_LOCATION: it must hold the CA that signed the broker's certificate"
_ACL = "the broker's ACLs do not allow it"

# Kafka error name -> (what happened, what to do about it).
_REFUSALS: dict[str, tuple[str, str]] = {
    "_AUTHENTICATION": ("authentication failed", _CREDENTIALS),
    "SASL_AUTHENTICATION_FAILED": ("authentication failed", _CREDENTIALS),
    "UNSUPPORTED_SASL_MECHANISM": ("authentication failed", _CREDENTIALS),
    "ILLEGAL_SASL_STATE": ("authentication failed", _CREDENTIALS),
    "_SSL": ("TLS failed", _TRUST),
    "TOPIC_AUTHORIZATION_FAILED": ("not authorized for a topic", _ACL),
    "GROUP_AUTHORIZATION_FAILED": ("not authorized for a consumer group", _ACL),
    "CLUSTER_AUTHORIZATION_FAILED": ("not authorized for a cluster operation", _ACL),
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": ("not authorized for a transactional id", _ACL),
    "DELEGATION_TOKEN_AUTHORIZATION_FAILED": ("not authorized for a delegation token", _ACL),
}
REFUSAL_NAMES = frozenset(_REFUSALS)
# librdkafka's words for a refusal it reports as a transport error: a failed
# certificate check (before it names the handshake), a plaintext client on a
# TLS listener (or the reverse).
_TEXTS = (
    ("certificate verify failed", _REFUSALS["_SSL"]),
    ("security.protocol", ("wrong security protocol", "check SCALEFOLD_SECURITY_PROTOCOL")),
)


class KafkaConnectionError(RuntimeError):
    """This client cannot work with the broker; the entry point exits with `exit_code`."""

    exit_code = 1


class KafkaAccessError(KafkaConnectionError):
    """The broker refused this client; retrying cannot help. The message names the cause."""

    exit_code = EXIT_ACCESS


class KafkaUnreachableError(KafkaConnectionError):
    """No broker answered in time (a wrong address, or a protocol the listener does not speak)."""

    exit_code = EXIT_UNREACHABLE


def who(settings: Settings) -> str:
    security = settings.security
    user = f"user {security.sasl_username!r} " if security.uses_sasl else ""
    return f"{user}at {settings.bootstrap_servers} ({security.protocol})"


def refusal(error: Any, settings: Settings, what: str = "") -> KafkaAccessError | None:
    """The access error a librdkafka `KafkaError` is, or None if it is something else."""
    if not hasattr(error, "name"):
        return None
    name, text = error.name(), error.str()
    found = _REFUSALS.get(name) or next((found for words, found in _TEXTS if words in text), None)
    if found is None:
        return None
    cause, hint = found
    target = f" to {what}" if what else ""
    return KafkaAccessError(f"Kafka refused {who(settings)}{target}: {cause}: {text}; {hint}")


def raise_refusal(error: Any, settings: Settings, what: str = "") -> None:
    """Raise the access error `error` is, if it is one."""
    problem = refusal(error, settings, what)
    if problem is not None:
        raise problem


def on_client_error(settings: Settings, quiet: bool = False) -> Callable[[Any], None]:
    """librdkafka's `error_cb`: a refusal raises (from the client's poll or flush);
    anything else is logged (at DEBUG if `quiet`: the caller reports it itself),
    and librdkafka goes on retrying it."""

    refused: list[KafkaAccessError] = []

    def callback(error: Any) -> None:
        if refused:  # the client is done for; its follow-up errors would only be noise
            return
        problem = refusal(error, settings)
        if problem is not None:
            refused.append(problem)
            raise problem
        # "all brokers are down" follows each broker's own error, which says why.
        quietly = quiet or error.name() == "_ALL_BROKERS_DOWN"
        level = logging.DEBUG if quietly else logging.WARNING
        log.log(level, "Kafka client: %s", error.str())

    return callback


def without_reported_errors(record: logging.LogRecord) -> bool:
    """A filter for the librdkafka logger: its error lines repeat what `on_client_error`
    reports (or raises), so they are dropped; its warnings pass."""
    return record.levelno < logging.ERROR
