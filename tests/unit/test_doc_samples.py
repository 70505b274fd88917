"""Every output sample the docs mark is what the command prints today.

A sample is a fenced block right after `<!-- output: COMMAND (where it is tested) -->`,
in README.md or docs/*.md. COMMAND is run (a `scalefold` command that needs no stack,
e.g. `replay` on an example log) and each line of the block, bar a `$ ` line (the
command, as typed) and `...` (lines left out), must be a line of its output, in the
block's order. A sample that needs a running stack is not marked so; it is covered by
the test its docs name.
"""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = re.compile(
    r"<!--\s*output:\s*(.*?)\s*(?:\([^()]*\))?\s*-->\s*\n```\w*\n(.*?)^```", re.M | re.S
)
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def samples() -> list[tuple[str, str, list[str]]]:
    found = []
    for page in PAGES:
        text = page.read_text("utf-8")
        for match in SAMPLE.finditer(text):
            line = text[: match.start()].count("\n") + 1
            shown = [
                row.rstrip()
                for row in match.group(2).splitlines()
                if row.strip() and not row.startswith("$ ") and row.strip() != "..."
            ]
            found.append((f"{page.relative_to(ROOT)}:{line}", match.group(1), shown))
    return found


def in_order(shown: list[str], printed: list[str]) -> list[str]:
    """The sample's lines that are not lines of the output in that order (none: it is)."""
    missing, at = [], 0
    for row in shown:
        try:
            at = printed.index(row, at) + 1
        except ValueError:
            missing.append(row)
    return missing


def test_the_docs_have_samples() -> None:
    assert len(samples()) >= 3


@pytest.mark.parametrize(("where", "command", "shown"), samples(), ids=lambda v: str(v)[:60])
def test_each_sample_is_what_its_command_prints(where: str, command: str, shown: list[str]) -> None:
    words = shlex.split(command)
    assert words[0] == "scalefold", f"{where}: only scalefold commands are run"
    done = subprocess.run(
        [sys.executable, "-m", "services.cli", *words[1:]],
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (where, done.stderr[-2000:])
    printed = [row.rstrip() for row in done.stdout.splitlines()]
    assert in_order(shown, printed) == [], f"{where}: not what `{command}` prints"


def test_a_sample_that_drifted_is_found() -> None:
    assert in_order(["b", "c"], ["a", "b", "x", "c"]) == []
    assert in_order(["c", "b"], ["a", "b", "c"]) == ["b"]
    assert in_order(["  5.000s old format"], ["  +5.000s new format"]) == ["  5.000s old format"]
