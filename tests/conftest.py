"""Fixtures every test layer shares: the schemas and the codec."""

from __future__ import annotations

import pytest

from services.contracts import Codec, SchemaRegistry


@pytest.fixture(scope="session")
def registry() -> SchemaRegistry:
    return SchemaRegistry.load()


@pytest.fixture(scope="session")
def codec(registry: SchemaRegistry) -> Codec:
    return Codec(registry)
