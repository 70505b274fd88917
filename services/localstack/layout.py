"""Where the local stack keeps its files."""

from __future__ import annotations

from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DEPLOY_LOCAL = PROJECT_ROOT / "deploy" / "local"
RUN_ROOT = PROJECT_ROOT / ".run"
"""`.run/local` holds the stack of `make up`; `.run/test` the one `make test` starts."""
