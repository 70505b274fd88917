"""One pass of fold + store over the core bench's workload, nothing else: a target for
profilers that count (valgrind's callgrind) or sample (perf, py-spy) (not a test).

    .venv/bin/python -m bench.fold_loop [--workload mix|rescales] [--events 20000] [--jobs 1000]

Instructions per event, counted only inside the step and the state's encoding (the
workload's construction and the interpreter's start-up left out):

    SCALEFOLD_CORE=compiled valgrind --tool=callgrind \\
        --toggle-collect=CPyDef_scheduler___handle --toggle-collect=JSONEncoder_encode \\
        .venv/bin/python -m bench.fold_loop

then divide the `I refs` valgrind prints by the events this prints. The two names are
the C functions of the compiled `handle` (mypyc) and of msgspec's JSON encoder.
`--workload` is `bench.process_bench`'s: `mix`, the core bench's events, or
`rescales`, the scheduler bench's latency run (its set-up, one submission per job, is
folded first and counted too: `--events 0` counts the set-up alone).
Instruction counts do not move with the machine's load, so two builds compare to
within a fraction of a per cent where their timings move by ±30 %. `--digest` prints
a sha256 over every step's effects and stored state: a change meant to make the core
faster must leave it as it was (run it outside valgrind).
"""

from __future__ import annotations

import argparse
import hashlib

from bench.process_bench import events_of
from services.scheduler.core import MODE as CORE_MODE
from services.scheduler.core import handle
from services.scheduler.core.model import JobState
from services.scheduler.core.serde import dumps


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", choices=("mix", "rescales"), default="mix")
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--jobs", type=int, default=1_000)
    parser.add_argument(
        "--digest",
        action="store_true",
        help="also print a sha256 over every step's effects and stored state, to check that "
        "a change of the core keeps them byte for byte (not counted: run it without valgrind)",
    )
    args = parser.parse_args()
    digest = hashlib.sha256() if args.digest else None
    setup, timed = events_of(args.workload, args.jobs, args.events)
    events = setup + timed
    jobs: dict[str, JobState | None] = {}
    stored = 0
    for event in events:
        step = handle(jobs.get(event.job_id), event)
        jobs[event.job_id] = step.job
        state = dumps(step.job) if step.job is not None else b""
        stored += len(state)
        if digest is not None:
            digest.update(repr(step.effects).encode())
            digest.update(state)
    print(
        f"{len(events)} events ({len(setup)} of them the set-up's) over {args.jobs} jobs "
        f"folded and stored ({stored:,} bytes of state written; core {CORE_MODE})"
    )
    if digest is not None:
        print(f"sha256 of the effects and stored states: {digest.hexdigest()}")


if __name__ == "__main__":
    main()
