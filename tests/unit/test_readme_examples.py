"""Every example command in README.md works as written.

Each ```sh block of the README is preceded by a marker comment saying how it is checked:

- `<!-- example: run (...) -->`: cheap and self-contained (no stack); every command runs for real
  from the project root, as written, and must exit 0 with some output.
- `<!-- example: parse (...) -->`: needs the running stack (or is a `make` target); every
  `scalefold` command must parse with the CLI's real parser (and its subcommand's `--help`
  must work), `produce` commands must build valid events (`--dry-run`), `make` targets must
  exist in the Makefile, `python -m` modules must exist, and every file named must exist.

A README block without a marker fails the check, so the rule stays visible where examples are
written. Pages in docs/ opt in: their marked blocks are checked the same way (e.g. the quick
benchmark runs of docs/benchmarks.md, parse-checked).

Every duration the README states (in its prose and its shell blocks' comments) is either a
bound ("at most 5 s", "timeout, 5 minutes") or a figure of the table "Measured times" in
docs/operations.md, whose every row names the command that measured it. Speed itself is
never asserted (a test cannot own the machine's load); what is checked is that no time is
stated without a measurement behind it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shlex
import subprocess
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

from services.cli import parse_args

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SCALEFOLD = ".venv/bin/scalefold"
PYTHON = ".venv/bin/python"
BLOCK = re.compile(r"(?:<!--\s*example:\s*(\w+)[^>]*-->\s*\n)?```(\w*)\n(.*?)^```", re.M | re.S)
INPUT_FILE = re.compile(r"^(examples|deploy|docs|bench|schemas|services)/\S+$|\.jsonl$")


@dataclass(frozen=True)
class Block:
    mode: str | None
    line: int
    commands: tuple[str, ...]
    page: str = "README.md"


def blocks(text: str, page: str = "README.md") -> list[Block]:
    found = []
    for match in BLOCK.finditer(text):
        mode, language, body = match.groups()
        if language not in ("sh", "shell", "bash", "console"):
            continue
        joined = re.sub(r"\\\n\s*", " ", body)
        commands = tuple(c for c in (ln.strip() for ln in joined.splitlines()) if c)
        found.append(Block(mode, text.count("\n", 0, match.start()) + 1, commands, page))
    return found


README_BLOCKS = blocks(README.read_text(encoding="utf-8"))
DOC_BLOCKS = [
    block
    for page in sorted((ROOT / "docs").glob("*.md"))
    for block in blocks(page.read_text(encoding="utf-8"), f"docs/{page.name}")
    if block.mode is not None
]
MAKE_TARGETS = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), re.M))


def argv(command: str) -> list[str]:
    return shlex.split(command, comments=True)


def _ids(block: Block) -> str:
    return f"{block.page}:{block.line}"


def test_every_shell_block_says_how_it_is_checked() -> None:
    assert README_BLOCKS, "no ```sh blocks found in README.md"
    unmarked = [_ids(b) for b in README_BLOCKS + DOC_BLOCKS if b.mode not in ("run", "parse")]
    assert unmarked == [], "precede each with <!-- example: run --> or <!-- example: parse -->"
    assert any(b.mode == "run" for b in README_BLOCKS)


def parses(words: list[str]) -> str | None:
    """None if the real `scalefold` parser takes `words`, else argparse's complaint."""
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            parse_args(words)
    except SystemExit as stop:
        if stop.code not in (0, None):
            return err.getvalue().strip() or f"exit {stop.code}"
    return None


def _subcommand(words: list[str]) -> list[str]:
    """The command path (`cluster state`, `history sql`, ...) before the first option."""
    path = []
    for word in words:
        if word.startswith("-") or len(path) == 2:
            break
        path.append(word)
    return path


def check_statically(command: str) -> list[str]:
    words = argv(command)
    problems = [
        f"{command!r}: no such file {word}"
        for word in words
        if INPUT_FILE.search(word) and not (ROOT / word).exists()
    ]
    if words[0] == "make":
        problems += [f"{command!r}: no make target {t}" for t in words[1:] if t not in MAKE_TARGETS]
    elif words[0] == SCALEFOLD:
        rest = words[1:]
        complaint = parses(rest)
        if complaint:
            problems.append(f"{command!r}: {complaint}")
        path = _subcommand(rest)
        while path and parses([*path, "--help"]) is not None:
            path = path[:-1]  # `history sql QUERY`: QUERY is a positional, not a verb
        if not path:
            problems.append(f"{command!r}: `scalefold {rest[0]} --help` fails")
        if rest[:1] == ["produce"] and "--dry-run" not in rest:
            done = subprocess.run(
                [str(ROOT / SCALEFOLD), *rest, "--dry-run"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
                check=False,
            )
            if done.returncode != 0 or not done.stdout.strip():
                problems.append(f"{command!r} --dry-run: {done.stderr.strip()[-500:]}")
    elif words[0] == "java":
        problems += _java_problems(command, words)
    elif words[0] != PYTHON:
        problems.append(f"{command!r}: not a make, {SCALEFOLD}, {PYTHON} or java command")
    if PYTHON in words:  # also `scalefold local run -- .venv/bin/python -m bench...`
        module = words[words.index(PYTHON) + 1 :][:2]
        if module[:1] == ["-m"] and importlib.util.find_spec(module[1]) is None:
            problems.append(f"{command!r}: no module {module[1]}")
    return problems


def _java_problems(command: str, words: list[str]) -> list[str]:
    """`java -cp "DIR/*" MAIN ...`: DIR exists and one of its jars holds the class MAIN."""
    if words[1:2] != ["-cp"] or len(words) < 4 or not words[2].endswith("/*"):
        return [f'{command!r}: expected java -cp "DIR/*" MAIN ...']
    entry = words[3].replace(".", "/") + ".class"
    for jar in sorted((ROOT / words[2].removesuffix("/*")).glob("*.jar")):
        with zipfile.ZipFile(jar) as archive:
            if entry in archive.NameToInfo:
                return []
    return [f"{command!r}: no jar in {words[2]} holds {words[3]}"]


@pytest.mark.parametrize("block", README_BLOCKS + DOC_BLOCKS, ids=_ids)
def test_each_command_names_real_commands_flags_and_files(block: Block) -> None:
    assert [p for command in block.commands for p in check_statically(command)] == []


RUN_BLOCKS = [b for b in README_BLOCKS + DOC_BLOCKS if b.mode == "run"]


@pytest.mark.parametrize("block", RUN_BLOCKS, ids=_ids)
def test_runnable_examples_run_as_written(block: Block) -> None:
    for command in block.commands:
        done = subprocess.run(
            ["bash", "-o", "pipefail", "-c", command],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
        assert done.stdout.strip(), f"{command}: printed nothing"


def test_the_check_finds_a_wrong_flag_a_missing_file_and_an_unmarked_block() -> None:
    assert check_statically(f"{SCALEFOLD} replay examples/no-such.jsonl --summary")
    assert check_statically(f"{SCALEFOLD} cluster state --no-such-flag")
    assert check_statically("make no-such-target")
    assert check_statically(f"{PYTHON} -m bench.no_such_bench")
    assert check_statically('java -cp ".venv/lib/python3.11/site-packages/pyspark/jars/*" No.Such')
    assert check_statically(f"{SCALEFOLD} history summary --job clicks") == []
    text = "```sh\nmake test\n```\n<!-- example: run -->\n```sh\nmake demo\n```\n"
    assert [b.mode for b in blocks(text)] == [None, "run"]


# -- stated durations have a measurement behind them ---------------------------------------

DURATION = re.compile(
    r"(\d+(?:\.\d+)?(?:\s*(?:-|\u2013|to)\s*\d+(?:\.\d+)?)?)\s*(ms|s|seconds?|min|minutes?|hours?)\b"
)
BOUND = re.compile(r"(at most|up to|within|timeout,?)\s*$")
UNITS = {"ms": "ms", "s": "s", "second": "s", "seconds": "s", "min": "min", "minute": "min"}
UNITS |= {"minutes": "min", "hour": "h", "hours": "h"}
MEASURED = ROOT / "docs" / "operations.md"
MEASURED_TITLE = "## Measured times"


def _figure(match: re.Match[str]) -> str:
    """A duration as compared: `164-224 s`, `164 to 224 seconds` and an en dash are one figure."""
    number = re.sub(r"\s*(?:-|\u2013|to)\s*", "-", match.group(1))
    return f"{number} {UNITS[match.group(2)]}"


def _prose(text: str) -> str:
    """The text a reader takes for statements: no code spans, no blocks but shell ones
    (their comments state times; other blocks show a program's output or code)."""
    kept, fence = [], None
    for line in text.splitlines():
        if line.startswith("```"):
            fence = None if fence is not None else line[3:].strip()
        elif fence is None or fence in ("sh", "shell", "bash"):
            kept.append(re.sub(r"`[^`]*`", "``", line))
    return "\n".join(kept)


def stated_durations(text: str) -> list[tuple[str, str]]:
    """Each duration stated that is not a bound: (figure, where it stands)."""
    prose = _prose(text)
    return [
        (_figure(match), " ".join(prose[max(0, match.start() - 60) : match.end()].split()))
        for match in DURATION.finditer(prose)
        if not BOUND.search(prose[max(0, match.start() - 20) : match.start()])
    ]


def measured_figures(text: str) -> tuple[set[str], list[str]]:
    """The figures of the "Measured times" table, and its rows that name no command."""
    section = (
        text.split(MEASURED_TITLE, 1)[1].split("\n## ", 1)[0] if MEASURED_TITLE in text else ""
    )
    rows = [line for line in section.splitlines() if line.startswith("|")][2:]  # no header
    figures: set[str] = set()
    commandless: list[str] = []
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        if len(cells) < 3 or not re.search(r"`[^`]+`", cells[1]):
            commandless.append(row)
            continue
        figures.update(_figure(m) for cell in cells[2:] for m in DURATION.finditer(cell))
    return figures, commandless


def unmeasured(readme: str, measured_page: str) -> list[str]:
    figures, commandless = measured_figures(measured_page)
    problems = [f"{MEASURED_TITLE} row names no command: {row}" for row in commandless]
    if not figures:
        problems.append(f"no {MEASURED_TITLE} table with figures")
    problems += [
        f"{figure} is stated but not measured ({MEASURED_TITLE}): ...{where}"
        for figure, where in stated_durations(readme)
        if figure not in figures
    ]
    return problems


def test_every_duration_the_readme_states_was_measured() -> None:
    assert unmeasured(README.read_text("utf-8"), MEASURED.read_text("utf-8")) == []


def test_the_duration_check_finds_a_time_nobody_measured() -> None:
    table = (
        f"{MEASURED_TITLE}\n\n| what | command | quiet | busy |\n|---|---|---|---|\n"
        "| start | `time make up` | 28 s (load 2) | 164\u2013224 s (load 5-30) |\n"
    )
    assert unmeasured("`make up` (28 s; 164-224 s busy); waits at most 5 s", table) == []
    assert len(unmeasured("`make up` takes about 20 s", table)) == 1
    assert len(unmeasured("```sh\nmake up   # 20 s\n```\n", table)) == 1
    assert unmeasured("```text\nover 38 s\n```\n", table) == []  # a program's output
    commandless = unmeasured("28 s", table.replace("`time make up`", "by hand"))
    assert any("names no command" in problem for problem in commandless), commandless
