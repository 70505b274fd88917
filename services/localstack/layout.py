"""Where the local stack keeps its files."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEPLOY_LOCAL = PROJECT_ROOT / "deploy" / "local"
RUN_ROOT = PROJECT_ROOT / ".run"
"""`.run/local` holds the stack of `make up`; `.run/test` the one `make test` starts."""


def cache_dir(env: Mapping[str, str]) -> Path:
    """Where fetched jars are cached: $SCALEFOLD_CACHE_DIR, else $XDG_CACHE_HOME/scalefold."""
    if env.get("SCALEFOLD_CACHE_DIR"):
        return Path(env["SCALEFOLD_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "scalefold"


def absolute_dir(value: str) -> str:
    """`--run-dir` as an absolute path: the stack's processes (Flink's among them) run
    in directories of their own, where a relative one would name another place."""
    return str(Path(value).resolve())
