"""The local stack's ports: free, and out of the way of the kernel's own choices."""

from __future__ import annotations

import socket
from pathlib import Path

from services.localstack.ports import LINUX_DEFAULT_RANGE, bindable, ephemeral_range, free_ports


def test_free_ports_are_distinct_bindable_and_below_the_ephemeral_range() -> None:
    low, _ = ephemeral_range()
    ports = free_ports(20)
    assert len(set(ports)) == 20
    assert all(port < low and bindable(port) for port in ports)


def test_a_held_port_is_not_bindable() -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        assert not bindable(port)
        assert not bindable(port, reuse_address=True)
    assert bindable(port, reuse_address=True)


def test_the_ephemeral_range_is_read_from_the_kernel_or_is_linux_default(tmp_path: Path) -> None:
    source = tmp_path / "ip_local_port_range"
    source.write_text("40000\t50000\n")
    assert ephemeral_range(source) == (40000, 50000)
    source.write_text("garbage")
    assert ephemeral_range(source) == LINUX_DEFAULT_RANGE
    assert ephemeral_range(tmp_path / "missing") == LINUX_DEFAULT_RANGE
