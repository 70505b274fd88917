"""Fixtures of the history tests: the real broker (shared with tests/integration) and one Spark."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from services.contracts import SchemaRegistry
from services.history.decode import RescaleSchemas
from services.localstack.layout import cache_dir
from tests.integration.conftest import broker_settings, kafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["broker_settings", "kafka"]  # re-exported fixtures


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """One local[2] session for every history test; the subprocess tests start their own."""
    from services.history.spark import history_session
    from services.localstack.jars import spark_connector_jars

    session = history_session(
        spark_connector_jars(cache_dir(os.environ), progress=lambda _: None), "local[2]"
    )
    yield session
    session.stop()


@pytest.fixture(scope="session")
def schemas(registry: SchemaRegistry) -> RescaleSchemas:
    return RescaleSchemas.of(registry)
