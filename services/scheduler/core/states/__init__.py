"""The scheduler states (one Behaviour each), registered by name on import."""

from services.scheduler.core.behaviour import REGISTRY, Behaviour, behaviour
from services.scheduler.core.states import ending, running, setup

__all__ = ["REGISTRY", "Behaviour", "behaviour", "ending", "running", "setup"]
