"""The real Kafka broker: the one `scalefold local run` started, or one of our own."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from services.contracts.settings import Settings
from services.localstack.layout import cache_dir
from tests.kafka_support import unique_settings


@pytest.fixture(scope="session")
def broker_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Settings]:
    """Settings for a running broker; starts one when the suite runs outside `make test`."""
    bootstrap = os.environ.get("SCALEFOLD_BOOTSTRAP_SERVERS")
    if bootstrap:
        yield Settings(bootstrap_servers=bootstrap)
        return
    from services.localstack.broker import LocalBroker
    from services.localstack.jars import kafka_jars

    cache = cache_dir(os.environ)
    broker = LocalBroker(tmp_path_factory.mktemp("broker"), kafka_jars(cache))
    bootstrap = broker.start(fresh=True)
    try:
        yield Settings(bootstrap_servers=bootstrap)
    finally:
        broker.stop()


@pytest.fixture
def kafka(broker_settings: Settings) -> Settings:
    """Settings with a topic prefix of this test's own, all topics created."""
    return unique_settings(broker_settings)
