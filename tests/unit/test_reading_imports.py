"""The Spark-free reading commands stay Spark-free: `history summary` answers from
delta-rs and DataFusion without importing pyspark, pyarrow, numpy or pandas (docs/history.md,
"Speed, freshness and mistakes"). A table declared with a Spark column at import once cost
every such command 0.2 s."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

HEAVY = ("pyspark", "pyarrow", "numpy", "pandas")
PROBE = """
import runpy, sys
heavy = set(sys.argv[2:])
sys.argv = ["scalefold", "history", "summary", "--data-dir", sys.argv[1]]
try:
    runpy.run_module("services.cli", run_name="__main__")
except SystemExit:
    pass
print("imported:" + ",".join(sorted({m.split(".")[0] for m in sys.modules} & heavy)))
"""


def test_history_summary_imports_no_heavy_library(tmp_path: Path) -> None:
    (tmp_path / "tables").mkdir()  # a history with no table committed yet: all zero
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path), *HEAVY],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
    )
    assert "Rescale overview" in done.stdout, done.stderr
    assert done.stdout.splitlines()[-1] == "imported:", done.stdout
