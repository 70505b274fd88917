"""Flink's Adaptive Scheduler as a pure, replayable fold: stdlib and contracts only."""

from services.scheduler.core import native

# Before any module of the core is imported: a compiled build that matches the sources
# goes first on this package's path (native.py). "compiled" or "interpreted (why)".
MODE = native.activate(__path__)

from services.scheduler.core.effects import (  # noqa: E402
    Decision,
    Effect,
    Rejected,
    RescaleUpdated,
    RuntimeRequest,
    Step,
)
from services.scheduler.core.model import JobState  # noqa: E402
from services.scheduler.core.scheduler import advance, handle  # noqa: E402

__all__ = [
    "MODE",
    "Decision",
    "Effect",
    "JobState",
    "Rejected",
    "RescaleUpdated",
    "RuntimeRequest",
    "Step",
    "advance",
    "handle",
]
