"""The local stack's broker: idempotent start, metadata answers, nothing left behind."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from services.localstack.broker import BrokerError, LocalBroker
from services.localstack.jars import kafka_jars
from services.localstack.layout import cache_dir
from services.localstack.ports import ephemeral_range

pytestmark = pytest.mark.integration


def test_start_is_idempotent_and_stop_leaves_no_process(tmp_path: Path) -> None:
    broker = LocalBroker(
        tmp_path / "stack", kafka_jars(cache_dir(os.environ), progress=lambda _: None)
    )
    quiet = lambda _: None  # noqa: E731
    bootstrap = broker.start(progress=quiet)
    try:
        assert bootstrap.startswith("127.0.0.1:")
        first = broker.status()
        assert first is not None
        assert broker.start(progress=quiet) == bootstrap  # found running, not started twice
        assert broker.status() == first
        metadata = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)
        assert len(metadata.brokers) == 1
    finally:
        assert broker.stop(progress=quiet)
    assert broker.status() is None
    with pytest.raises(ProcessLookupError):
        os.kill(first.pid, 0)
    # A stopped stack restarts on the same address with its data.
    assert broker.start(progress=quiet) == bootstrap
    broker.stop(progress=quiet)


def test_a_start_never_discards_a_cluster_whose_port_another_process_holds(
    tmp_path: Path,
) -> None:
    broker = LocalBroker(
        tmp_path / "stack", kafka_jars(cache_dir(os.environ), progress=lambda _: None)
    )
    quiet = lambda _: None  # noqa: E731
    bootstrap = broker.start(progress=quiet)
    broker.stop(progress=quiet)
    port = int(bootstrap.rsplit(":", 1)[1])
    assert port < ephemeral_range()[0]  # no connection or bind(0) of the kernel's can take it
    cluster = (tmp_path / "stack" / "data" / "meta.properties").read_text()
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with pytest.raises(BrokerError, match=f"another process holds port {port} .*--fresh"):
            broker.start(progress=quiet)
    assert broker.start(progress=quiet) == bootstrap
    try:
        assert (tmp_path / "stack" / "data" / "meta.properties").read_text() == cluster
    finally:
        broker.stop(progress=quiet)
