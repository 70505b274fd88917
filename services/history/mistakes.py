"""A mistake answered in one line: what the reading verbs say when a query cannot run.

Spark's own message for bad SQL runs to tens of lines (the parsed plan, `== SQL ==`
with a caret, the JVM's stack); a user needs its first sentence and where in the
query it went wrong. An unknown name gets the views that do exist, and, when the
name is one of the Delta tables' (the README's Python example reads
`rescales_latest`), which view shows that table's rows. Pure functions: the error
comes in as its parts, the line goes out as text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from services.history.tables import LATEST_TABLE, TABLES

STACK_MARK = "JVM stacktrace:"
POSITION = re.compile(r"\(?line (\d+),? pos (\d+)\)?")
START_HINT = (
    "`make up` keeps the local stack's history in .run/local/history; --data-dir names another"
)

TABLE_VIEWS: Mapping[str, tuple[str, str]] = {
    LATEST_TABLE: ("each rescale's latest revision", "rescales"),
    **{name: ("every received revision", f"raw_{name}") for name in TABLES},
}
"""Delta table name -> (what its rows are, the view that shows them)."""


class SparkError(Protocol):
    """What pyspark's errors (Spark Connect's and a local session's) tell about themselves."""

    def getCondition(self) -> str | None: ...  # noqa: N802 (pyspark's names)

    def getMessageParameters(self) -> dict[str, str] | None: ...  # noqa: N802


def first_line(message: str) -> str:
    """The message's first non-empty line, before any plan or stack."""
    head = message.split(STACK_MARK, 1)[0]
    return next((line.strip() for line in head.splitlines() if line.strip()), "").rstrip(";")


def position(message: str) -> str | None:
    """`line L, pos P` as Spark reports it somewhere in the message, if it does."""
    found = POSITION.search(message.split(STACK_MARK, 1)[0])
    return f"line {found[1]}, pos {found[2]}" if found else None


def table_hint(name: str, tables_dir: Path) -> str:
    """What a Delta table's name stands for in SQL; empty for other names."""
    bare = name.strip("`").rsplit(".", 1)[-1].strip("`")
    if bare not in TABLE_VIEWS:
        return ""
    holds, view = TABLE_VIEWS[bare]
    return (
        f"{bare} is a Delta table (files under {tables_dir / bare}: {holds}), "
        f"not a view: query the view {view}; "
    )


def spark_error(error: SparkError, views: Sequence[str], tables_dir: Path) -> str:
    """One line for a query Spark refused: its message's first sentence and the position.

    `str(error)`, not `getMessage()`: a local session's getMessage() is the message
    without the position, which only the JVM's own text (str) carries."""
    message = str(error)
    where = position(message)
    condition = error.getCondition() or ""
    if condition.startswith("TABLE_OR_VIEW_NOT_FOUND"):
        name = (error.getMessageParameters() or {}).get("relationName", "?")
        at = f" ({where})" if where else ""
        hint = table_hint(name, tables_dir)
        return f"no table or view {name}{at}; {hint}the views: {', '.join(views)}"
    line = first_line(message)
    if where and where.replace(",", "") not in line.replace(",", ""):
        line = f"{line} ({where})"
    return line


def no_rescales(
    job: str, data_dir: Path | str, jobs: Sequence[str], shown: int = 10, kind: str = "job"
) -> str:
    """A job id with no rescales in the history (`kind`: what the id names, e.g. `Flink
    job`); the ones that have some, to spot a typo."""
    named = f"{kind} {job}"
    if not jobs:
        return f"no rescales of {named} in {data_dir} (it holds no rescale yet)"
    more = ", ..." if len(jobs) > shown else ""
    return f"no rescales of {named} in {data_dir} (jobs with rescales: {', '.join(jobs[:shown])}{more})"


def no_history(reason: str) -> str:
    """A history directory that is not there, and where the stack keeps its own."""
    return f"{reason} ({START_HINT})"
