"""What does not need Spark does not load it: `history summary` answers from delta-rs and
DataFusion, and the scheduler, the actuator and the bridge start, without importing
pyspark, pyarrow, numpy or pandas (docs/history.md, "Speed, freshness and mistakes"). A
table declared with a Spark column at import once cost every `scalefold` command 0.2 s and
21 MiB, each service's resident memory included (the CLI declares every command's
arguments)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pyspark", "pyarrow", "numpy", "pandas")
PROBE = """
import runpy, sys
heavy = set(sys.argv[1].split(","))
sys.argv = ["scalefold", *sys.argv[2:]]
try:
    runpy.run_module("services.cli", run_name="__main__")
except SystemExit:
    pass
print("imported:" + ",".join(sorted({m.split(".")[0] for m in sys.modules} & heavy)))
"""


@pytest.mark.parametrize(
    "command",
    [
        ("history", "summary", "--data-dir"),
        ("scheduler", "--help"),
        ("actuator", "--help"),
        ("bridge", "--help"),
    ],
    ids=lambda command: " ".join(command[:2]),
)
def test_a_command_that_needs_no_spark_imports_no_heavy_library(
    command: tuple[str, ...], tmp_path: Path
) -> None:
    (tmp_path / "tables").mkdir()  # a history with no table committed yet: all zero
    arguments = [*command, str(tmp_path)] if command[-1] == "--data-dir" else list(command)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, ",".join(HEAVY), *arguments],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )
    assert done.stdout.splitlines()[-1] == "imported:", done.stdout + done.stderr
