"""Flink's Adaptive Scheduler as a pure, replayable fold: stdlib and contracts only."""

from services.scheduler.core.effects import (
    Decision,
    Effect,
    Rejected,
    RescaleUpdated,
    RuntimeRequest,
)
from services.scheduler.core.model import JobState
from services.scheduler.core.scheduler import Step, advance, handle

__all__ = [
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
