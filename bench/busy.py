"""Run a command on a busy machine: CPU hogs on every core, and a fleet on its stack's broker.

    .venv/bin/python -m bench.busy --hogs 6 --fleet .run/demo -- make demo
    .venv/bin/python -m bench.busy --hogs 6 --fleet .run/demo-flink -- make demo-flink
    .venv/bin/python -m bench.busy --hogs 6 -- .venv/bin/pytest tests/integration/test_stale_view.py

`--hogs N` busy processes (bench/load.py) run from the start to the end of the command;
with `--fleet RUN_DIR`, once RUN_DIR's broker is up (its `bootstrap` file written anew),
the example logs are produced as new jobs every two seconds onto it (bench/load.Fleet),
as a fleet's jobs would keep the history busy beside the command's own. Prints the
1-minute load average every 30 s and at the end, and exits with the command's status.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path

from bench.load import Fleet, hogs, load_average
from services.contracts import Settings


def _fleet_when_up(run_dir: Path, started: float, stop: threading.Event, out: list[Fleet]) -> None:
    """Start a fleet on RUN_DIR's broker once it has written its address anew."""
    bootstrap = run_dir / "bootstrap"
    while not stop.is_set():
        if bootstrap.exists() and bootstrap.stat().st_mtime >= started:
            time.sleep(5)  # the topics are created right after the broker answers
            settings = Settings().with_overrides(bootstrap_servers=bootstrap.read_text().strip())
            fleet = Fleet(settings)
            fleet.__enter__()
            out.append(fleet)
            return
        stop.wait(1)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hogs", type=int, default=6)
    parser.add_argument("--fleet", type=Path, metavar="RUN_DIR")
    parser.add_argument("--hours", type=float, default=2.0, help="the hogs' bound")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    started, stop, fleets = time.time(), threading.Event(), list[Fleet]()
    with ExitStack() as busy:
        busy.enter_context(hogs(args.hogs, args.hours * 3600))
        if args.fleet is not None:
            waiter = threading.Thread(
                target=_fleet_when_up, args=(args.fleet, started, stop, fleets), daemon=True
            )
            waiter.start()
        process = subprocess.Popen(command)
        loads = []
        while process.poll() is None:
            time.sleep(1)
            if int(time.time() - started) % 30 == 0:
                loads.append(load_average())
                print(f"busy: load {loads[-1]:.1f}", file=sys.stderr, flush=True)
        stop.set()
        for fleet in fleets:
            fleet.__exit__()
        jobs = sum(f.jobs for f in fleets)
        print(
            f"busy: {' '.join(command)} exited {process.returncode} after "
            f"{time.time() - started:.0f} s; {args.hogs} hogs, {jobs} fleet jobs; load "
            f"min {min(loads, default=0):.1f} max {max(loads, default=0):.1f}",
            file=sys.stderr,
        )
        return process.returncode


if __name__ == "__main__":
    sys.exit(main())
