"""One run of a supervised service (services/localstack/processes.py): its own log, its
pid, then the service itself.

`python -m services.localstack.runlog RUN_DIR NAME -- COMMAND...` opens
`RUN_DIR/NAME-<UTC time>.log` (`NAME.log` becomes a link to it, atomically: a reader
sees the old log or the new one), writes `NAME.pid`, and execs COMMAND with its output
in that log: supervisord then watches, signals and restarts the service itself.
"""

from __future__ import annotations

import os
import sys
from datetime import UTC, datetime
from pathlib import Path


def new_log(run_dir: Path, name: str) -> Path:
    """This run's own log, `<name>-<UTC time>.log`; `<name>.log` links to the newest."""
    stamp = datetime.now(tz=UTC).strftime("%Y%m%dT%H%M%S.%fZ")
    run_log = run_dir / f"{name}-{stamp}.log"
    run_log.touch()
    link = run_dir / f".{name}.log.new"
    link.unlink(missing_ok=True)
    link.symlink_to(run_log.name)
    os.replace(link, run_dir / f"{name}.log")
    return run_log


def main(argv: list[str]) -> None:
    if len(argv) < 4 or argv[2] != "--":
        sys.exit("usage: python -m services.localstack.runlog RUN_DIR NAME -- COMMAND...")
    run_dir, name, command = Path(argv[0]), argv[1], argv[3:]
    log = os.open(new_log(run_dir, name), os.O_WRONLY | os.O_APPEND)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    (run_dir / f"{name}.pid").write_text(str(os.getpid()))
    os.execv(command[0], command)


if __name__ == "__main__":
    main(sys.argv[1:])
