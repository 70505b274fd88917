"""Fixtures every test layer shares: the schemas and the codec."""

from __future__ import annotations

import os

import pytest

# The tests' own process runs the scheduler core interpreted, so that coverage sees its
# lines, unless SCALEFOLD_CORE says otherwise; the services the tests start as processes
# run what SCALEFOLD_CORE says (by default the compiled core after `make core`: native.py).
if "SCALEFOLD_CORE" not in os.environ:
    os.environ["SCALEFOLD_CORE"] = "interpreted"
    import services.scheduler.core  # noqa: F401

    del os.environ["SCALEFOLD_CORE"]

from services.contracts import Codec, SchemaRegistry


@pytest.fixture(scope="session")
def registry() -> SchemaRegistry:
    return SchemaRegistry.load()


@pytest.fixture(scope="session")
def codec(registry: SchemaRegistry) -> Codec:
    return Codec(registry)
