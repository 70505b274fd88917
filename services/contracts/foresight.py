"""What the adaptive scheduler will do with a parallelism decision before it is sent, as
the scheduler's fold of the job's recorded inputs predicts it (services/scheduler/foresight.py),
asked by the history service's autoscaler (services/history/autoscaling.py).

The two services share only the contracts: the entry point (services/cli.py) hands the
history service a `Forecaster` that reads the job's recorded inputs and folds them with
the decision's requirements change appended.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from services.contracts.settings import Settings


@dataclass(frozen=True)
class Forecast:
    """The rescale a requirements change starts (if any) within the fold's horizon: its
    trigger, how it ends, and each vertex's parallelism after it (what the slots there are,
    and those the fold expects, let the job reach); `described` says it in a line."""

    job_key: str
    trigger_cause: str | None
    """None: no rescale starts (e.g. the change leaves the job where it is)."""
    terminal_state: str | None
    reached: Mapping[str, int] = field(default_factory=dict)
    described: str = ""
    requirements: Mapping[str, tuple[int, int]] = field(default_factory=dict)
    """Each vertex's (lower, upper) bounds before the change, as recorded: what the change
    rests on (the actuator applies it only while Flink still has these)."""

    @property
    def rescales(self) -> bool:
        return self.trigger_cause is not None


class ForecastUnknownError(Exception):
    """The job's recorded inputs could not be read or folded (the message says why)."""


Forecaster = Callable[[Settings, str, Mapping[str, int], int], Forecast]
"""(settings, a job's key, target parallelism by vertex, now in epoch ms) -> what the
adaptive scheduler does with those targets as upper bounds; ForecastUnknownError if unknown."""
