"""`scalefold ambiguities`: which of a job's predicted rescales its observation cannot decide.

The shell around observation.py: the job's recorded inputs are read from the job-events
topic and Flink's records of it from flink-rescales (whatif.read_recorded), folded
(observation.ambiguities), and each ambiguous pair printed, as a line or as JSON; `find`
answers `flink compare` (services/cli.py hands it over: the history and the scheduler
share only the contracts).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import IO, TYPE_CHECKING

from services.contracts import Codec, Settings
from services.contracts.access import KafkaConnectionError
from services.contracts.ambiguity import AmbiguitiesUnknownError, AmbiguousPair, Findings

if TYPE_CHECKING:
    from services.scheduler.observation import Ambiguity


FIND_CONNECT_TIMEOUT = 3.0
"""How long `flink compare` waits for the broker before it goes on without ambiguities."""


def folded(
    settings: Settings,
    codec: Codec,
    job: str,
    defines: Sequence[str] | None = None,
    connect_timeout: float | None = None,
) -> tuple[str, list[Ambiguity], int]:
    """The job's key (`job` may be a bare Flink job id), its ambiguous pairs and the
    observation's resolution (observation.resolution_ms); AmbiguitiesUnknownError when
    its inputs cannot be read or folded."""
    from services.contracts.kafka import CLI_CONNECT_TIMEOUT, TopicReadError, connect
    from services.scheduler.core.config import ConfigError
    from services.scheduler.observation import ambiguities, resolution_ms
    from services.scheduler.replay import parse_defines
    from services.scheduler.whatif import WhatIfError, read_recorded, resolve

    try:
        defaults = parse_defines(defines)
        connect(settings, connect_timeout or CLI_CONNECT_TIMEOUT)
        recorded = read_recorded(settings, codec, lambda key: key == job or key.endswith(f".{job}"))
        key = resolve(job, recorded.inputs.keys() or recorded.known)
        events = recorded.events_of(key)
        if key in recorded.starts:  # the pairs are judged from the job's first input on
            raise WhatIfError(
                f"job {key}'s first inputs have left job-events: its pairs are not judged"
            )
        flink = recorded.flink.get(key, ())
        found = ambiguities(events, defaults, flink)
        return key, found, resolution_ms(events, defaults, flink)
    except (WhatIfError, ConfigError, TopicReadError, KafkaConnectionError) as error:
        raise AmbiguitiesUnknownError(str(error)) from None


def find(settings: Settings, job: str) -> Findings:
    """`flink compare`'s question (contracts/ambiguity.py `Finder`), answered."""
    from services.contracts import SchemaRegistry
    from services.scheduler.observation import describe

    codec = Codec(SchemaRegistry.load(settings.schemas_dir))
    key, found, resolution = folded(settings, codec, job, connect_timeout=FIND_CONNECT_TIMEOUT)
    pairs = tuple(AmbiguousPair(key, a.pair_index, a.fields, describe(a), cause(a)) for a in found)
    return Findings(pairs, resolution)


def cause(ambiguity: Ambiguity) -> str:
    """What made a pair ambiguous, the same for every pair it made so."""
    from services.scheduler.observation import LATENCY

    a = ambiguity
    return a.input if a.input == LATENCY else f"{a.input} {a.window}"


def run_command(
    args: argparse.Namespace, settings: Settings, codec: Codec, out: IO[str] = sys.stdout
) -> int:
    from services.scheduler.observation import as_json, describe

    try:
        key, found, resolution = folded(settings, codec, args.job, args.default)
    except AmbiguitiesUnknownError as error:
        print(f"scalefold ambiguities: {error}", file=sys.stderr)
        return 2
    if args.format == "json":
        out.write(json.dumps([as_json(a) for a in found], indent=2) + "\n")
    else:
        lines = [f"pair {a.pair_index}: {describe(a)}" for a in found]
        lines = lines or [f"job {key}: no pair is ambiguous"]
        lines.append(
            f"resolution: the observation places the prediction's instants within "
            f"{resolution / 1000:.3f} s of Flink's (widest input window + Flink's latency)"
        )
        out.write("\n".join(lines) + "\n")
    return 0
