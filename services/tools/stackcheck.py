"""Is the stack there? One quick look before a command that needs it waits on it.

librdkafka keeps retrying a broker that refuses its connections until the client's
timeout (10 s for the CLI), then reports "no answer". When every bootstrap address
refuses a plain TCP connection at once, nothing listens there: the command can say
so in one line, at once, with what to run. An address that does not answer at all
(a firewall that drops, a slow network) is no proof either way: then the Kafka
client's own wait and its own message stand.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from typing import Literal

from services.contracts.access import KafkaUnreachableError
from services.contracts.settings import DEFAULT_BOOTSTRAP

Answer = Literal["listening", "refused", "unsure"]

LOOK_S = 1.5
"""How long the look may take in all: the whole command answers within 2 s."""


def addresses(servers: str) -> list[tuple[str, int]]:
    """`host:port[,...]` as (host, port) pairs; a bracketed IPv6 host loses its brackets."""
    found = []
    for server in (s.strip() for s in servers.split(",")):
        host, _, port = server.rpartition(":")
        if host and port.isdigit():
            found.append((host.strip("[]"), int(port)))
    return found


def look(servers: str, budget: float = LOOK_S) -> Answer:
    """Whether something accepts TCP connections at one of the bootstrap addresses."""
    pairs = addresses(servers)
    if not pairs:
        return "unsure"
    deadline = time.monotonic() + budget
    answers = []
    for host, port in pairs:
        left = deadline - time.monotonic()
        if left <= 0:
            answers.append("unsure")
            break
        answers.append(_knock(host, port, left / len(pairs)))
        if answers[-1] == "listening":
            return "listening"
    return "refused" if all(a == "refused" for a in answers) else "unsure"


def _knock(host: str, port: int, timeout: float) -> Answer:
    try:
        with socket.create_connection((host, port), timeout=max(timeout, 0.05)):
            return "listening"
    except (ConnectionRefusedError, socket.gaierror):
        return "refused"  # nothing listens there, or no such host
    except OSError:
        return "unsure"


def not_running(servers: str, local: bool) -> str:
    """The one line for a broker nobody runs: which, and what to run."""
    if local and servers == DEFAULT_BOOTSTRAP:  # no stack wrote its address: none is up
        return (
            "the local stack is not running: `make up` starts it (its broker on a port of its "
            "own), or set SCALEFOLD_BOOTSTRAP_SERVERS to use another broker"
        )
    if local:
        return (
            f"the local stack is not running (no broker at {servers}, where it last ran): "
            "`make up` starts it, or set SCALEFOLD_BOOTSTRAP_SERVERS to use another broker"
        )
    return (
        f"the stack is not running: no broker listens at {servers} "
        "(SCALEFOLD_BOOTSTRAP_SERVERS or --bootstrap-servers); `make up` starts the local stack"
    )


def uses_local_stack(env: Mapping[str, str], bootstrap_option: str | None) -> bool:
    """Whether the broker is the local stack's (no address given by the user)."""
    return not (env.get("SCALEFOLD_BOOTSTRAP_SERVERS") or bootstrap_option)


def require_broker(servers: str, local: bool, knock: Callable[[str], Answer] = look) -> None:
    """Raise the one-line `KafkaUnreachableError` at once when no broker listens."""
    if knock(servers) == "refused":
        raise KafkaUnreachableError(not_running(servers, local))
