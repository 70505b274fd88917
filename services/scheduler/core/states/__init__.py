"""The scheduler states (one Behaviour each), registered by name on import."""

from services.scheduler.core.states import ending, running, setup
from services.scheduler.core.states.base import REGISTRY, Behaviour, behaviour

__all__ = ["REGISTRY", "Behaviour", "behaviour", "ending", "running", "setup"]
