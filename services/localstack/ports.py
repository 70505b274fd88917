"""Ports for the local stack's listeners: free, and below the kernel's ephemeral range.

The kernel hands out ports of its ephemeral range (`net.ipv4.ip_local_port_range`) to
every `bind(port 0)` and as the source port of every outgoing connection. A listener
whose port lies in that range can find it taken when it starts again: a broker stopped
for a few seconds while Spark, Faust and librdkafka clients open connections around it.
Its storage names its ports, so it could not come back where its clients look for it.
A port below the range is never handed out by the kernel, so a restarted listener gets
its port back unless a program asked for that very port.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path

PORT_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
LINUX_DEFAULT_RANGE = (32768, 60999)
LOWEST = 20000  # below it lie the well-known defaults of many servers (8080, 9092, ...)
TRIES = 100


def ephemeral_range(source: Path = PORT_RANGE) -> tuple[int, int]:
    """The kernel's ephemeral port range (Linux's default where it cannot be read)."""
    try:
        low, high = (int(part) for part in source.read_text().split())
    except (OSError, ValueError):
        return LINUX_DEFAULT_RANGE
    return low, high


def free_port() -> int:
    """A port on 127.0.0.1 that nothing holds now, below the ephemeral range.

    Where the range starts too low to leave room, the kernel's own choice."""
    choose = random.SystemRandom()
    low, _ = ephemeral_range()
    if low - LOWEST >= 1000:
        for _ in range(TRIES):
            port = choose.randrange(LOWEST, low)
            if bindable(port):
                return port
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def free_ports(count: int) -> list[int]:
    """`count` distinct free ports, as `free_port` picks them."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = free_port()
        if port not in chosen:
            chosen.append(port)
    return chosen


def bindable(port: int, *, reuse_address: bool = False) -> bool:
    """Whether a listener could bind 127.0.0.1:`port` now.

    `reuse_address` as Java's servers bind (Kafka's among them): connections of a
    listener that just stopped linger in TIME_WAIT on its port and do not hold it."""
    with socket.socket() as sock:
        if reuse_address:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
        return True
