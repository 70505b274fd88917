"""What the `scalefold` entry point hands every subcommand.

Its own module, so the subcommand modules can name `Context` without importing
the entry point (`services.cli`), which imports their `register`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from services.contracts.ambiguity import Finder
from services.contracts.foresight import Forecaster
from services.contracts.settings import Settings


@dataclass(frozen=True)
class Context:
    """What every subcommand gets: settings, the jar cache and the environment, and what
    one service's command may ask of another's (the entry point wires it)."""

    settings: Settings
    cache_dir: Path
    env: Mapping[str, str]
    ambiguities: Finder | None = None
    """The scheduler's fold of a job's recorded inputs: which pairs it cannot decide."""
    forecasts: Forecaster | None = None
    """The scheduler's fold of a job's recorded inputs with a requirements change: what the
    adaptive scheduler does with a parallelism decision."""


Handler = Callable[[argparse.Namespace, Context], int]
"""A subcommand's entry: its parsed arguments and the context to its exit status."""
