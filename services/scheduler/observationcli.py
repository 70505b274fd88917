"""`scalefold ambiguities`: which of a job's predicted rescales its observation cannot decide.

The shell around observation.py: the job's recorded inputs are read from the job-events
topic (whatif.read_recorded), folded (observation.ambiguities), and each ambiguous pair
printed, as a line or as JSON (what `scalefold demo --flink` reads: the tools reach the
scheduler core only through the command line).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO

from services.contracts import Codec, Settings


def run_command(
    args: argparse.Namespace, settings: Settings, codec: Codec, out: IO[str] = sys.stdout
) -> int:
    from services.contracts.kafka import CLI_CONNECT_TIMEOUT, TopicReadError, connect
    from services.scheduler.core.config import ConfigError
    from services.scheduler.observation import ambiguities, as_json, describe
    from services.scheduler.replay import parse_defines
    from services.scheduler.whatif import WhatIfError, read_recorded, resolve

    job = args.job
    try:
        defaults = parse_defines(args.default)
        connect(settings, CLI_CONNECT_TIMEOUT)
        recorded = read_recorded(settings, codec, lambda key: key == job or key.endswith(f".{job}"))
        key = resolve(job, recorded.inputs.keys() or recorded.known)
        events = recorded.inputs.get(key)
        if not events:
            raise WhatIfError(f"job {key} has no input the scheduler could fold")
        found = ambiguities(events, defaults)
    except (WhatIfError, ConfigError, TopicReadError) as error:
        print(f"scalefold ambiguities: {error}", file=sys.stderr)
        return 2
    if args.format == "json":
        out.write(json.dumps([as_json(a) for a in found], indent=2) + "\n")
    else:
        lines = [f"pair {a.pair_index}: {describe(a)}" for a in found]
        out.write("\n".join(lines or [f"job {key}: no pair is ambiguous"]) + "\n")
    return 0
