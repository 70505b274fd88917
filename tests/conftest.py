"""Fixtures every test layer shares (the schemas and the codec), and `--exclusive`."""

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


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--exclusive",
        choices=("skip", "only"),
        help="deselect the tests marked `exclusive` (skip) or all others (only); "
        "`make test` runs the rest on two workers, then these one at a time",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("--exclusive")
    if wanted is None:
        return
    selected: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        exclusive = item.get_closest_marker("exclusive") is not None
        (selected if exclusive == (wanted == "only") else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
