"""A predicted rescale its observation cannot decide, as the scheduler's fold finds it
(services/scheduler/observation.py) and `flink compare` judges with it (services/history).

The two services share only the contracts: the entry point (services/cli.py) hands
`flink compare` a `Finder` that reads the job's recorded inputs and folds them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from services.contracts.settings import Settings


@dataclass(frozen=True)
class AmbiguousPair:
    """Pair `pair_index` (1-based, by start) of job `job_key` depends on where in its
    observation window an input fell: `fields` change with it; `described` says which
    input, its window and the deadline inside it; `cause` names the input and its window
    alone (the pairs one input makes ambiguous share it)."""

    job_key: str
    pair_index: int
    fields: tuple[str, ...]
    described: str
    cause: str = ""


EXISTENCE = "paired"
"""The `fields` entry of a pair whose rescale exists in one case only (the pairing's
column `paired`): every later pair is paired by start with another rescale then."""


@dataclass(frozen=True)
class Findings:
    """The scheduler's answer for one job: its ambiguous pairs, and how far apart its
    prediction's instants and Flink's may lie from the observation alone
    (`resolution_ms`: the widest observation window of the job's inputs plus Flink's
    latency as its records show it), within which a span's duration is not judged."""

    pairs: tuple[AmbiguousPair, ...]
    resolution_ms: int


class AmbiguitiesUnknownError(Exception):
    """The job's recorded inputs could not be read or folded: which pairs are ambiguous is
    not known (the message says why)."""


Finder = Callable[[Settings, str], Findings]
"""(settings, a job's key) -> its findings; AmbiguitiesUnknownError if unknown."""
