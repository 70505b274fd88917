"""How long a killed service of the local stack takes to come back by itself.

    .venv/bin/scalefold local up --run-dir .run/cb
    .venv/bin/python -m bench.comeback --run-dir .run/cb --kills 3
    .venv/bin/python -m bench.busy --hogs 2 -- .venv/bin/python -m bench.comeback --run-dir .run/cb

For each service of the running stack in turn, `--kills` times: SIGKILL to the service
(not its supervisor, services/localstack/processes.py), then the time until its
supervisor has started it again (a new pid) and until it is ready again (its /health
says so, or its log says it started, as `local up` waits). Prints one line per kill and
a table of medians; the stack is left running, each service restarted `--kills` times.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import sys
import time
from pathlib import Path

from bench.load import load_average
from services.localstack import stack
from services.localstack.processes import ServiceProcess


def comeback(process: ServiceProcess) -> tuple[float, float]:
    """Kill `process`; seconds until a new pid, and until it is ready."""
    pid = process.pid()
    if pid is None:
        raise SystemExit(f"{process.name} is not running")
    killed = time.monotonic()
    os.kill(pid, signal.SIGKILL)
    while process.pid() in (None, pid):
        if time.monotonic() - killed > 300:
            raise SystemExit(f"{process.name} not started again in 300 s")
        time.sleep(0.05)
    started = time.monotonic() - killed
    stack.wait_ready(process)
    return started, time.monotonic() - killed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--run-dir", type=Path, default=Path(".run/local"))
    parser.add_argument("--kills", type=int, default=3, help="kills per service (3)")
    parser.add_argument(
        "--services", nargs="*", default=None, help="which (default: every one that runs)"
    )
    args = parser.parse_args(argv)
    processes = [
        p
        for p in stack.services(args.run_dir)
        if p.pid() is not None and (args.services is None or p.name in args.services)
    ]
    if not processes:
        print(f"no running service in {args.run_dir}", file=sys.stderr)
        return 1
    rows = []
    for process in processes:
        started, ready = [], []
        for kill in range(1, args.kills + 1):
            time.sleep(5)  # settled after the previous start
            load = load_average()
            new_pid, back = comeback(process)
            started.append(new_pid)
            ready.append(back)
            print(
                f"{process.name} kill {kill}: new pid after {new_pid:.2f} s, ready after "
                f"{back:.1f} s (load {load:.1f})",
                flush=True,
            )
        rows.append((process.name, statistics.median(started), statistics.median(ready)))
    print("\n| service | kills | new pid (median) | ready (median) |\n|---|--:|--:|--:|")
    for name, started_s, ready_s in rows:
        print(f"| {name} | {args.kills} | {started_s:.2f} s | {ready_s:.1f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
