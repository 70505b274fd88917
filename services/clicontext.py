"""What the `scalefold` entry point hands every subcommand.

Its own module, so the subcommand modules can name `Context` without importing
the entry point (`services.cli`), which imports their `register`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from services.contracts.settings import Settings


@dataclass(frozen=True)
class Context:
    """What every subcommand gets: settings, the jar cache and the environment."""

    settings: Settings
    cache_dir: Path
    env: Mapping[str, str]


Handler = Callable[[argparse.Namespace, Context], int]
"""A subcommand's entry: its parsed arguments and the context to its exit status."""
