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
        choices=("skip", "only", "beside", "alone"),
        help="deselect the tests marked `exclusive` (skip) or all others (only); beside: "
        "only those that may share the machine with the docker-compose tests, alone: only "
        "those marked `exclusive(alone=True)`, which may not; `make test` runs the rest on "
        "three workers, then these one at a time (deploy/test.sh)",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    wanted = config.getoption("--exclusive")
    if wanted is None:
        return
    selected: list[pytest.Item] = []
    deselected: list[pytest.Item] = []
    for item in items:
        marker = item.get_closest_marker("exclusive")
        alone = marker is not None and bool(marker.kwargs.get("alone"))
        wants = {
            "skip": marker is None,
            "only": marker is not None,
            "beside": marker is not None and not alone,
            "alone": alone,
        }[wanted]
        (selected if wants else deselected).append(item)
    if deselected:
        config.hook.pytest_deselected(items=deselected)
        items[:] = selected
