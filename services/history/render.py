"""Query results as text: an aligned table, CSV or JSON Lines. Pure functions."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

FORMATS = ("table", "csv", "json")
MAX_CELL = 60


def _plain(value: Any) -> Any:
    """A JSON-ready form of a Spark value (Row, map, timestamp, decimal, bytes)."""
    if hasattr(value, "asDict"):
        value = value.asDict()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    scalars: dict[type, Any] = {
        datetime: lambda v: v.isoformat(
            sep=" ", timespec="milliseconds" if v.microsecond else "seconds"
        ),
        date: lambda v: v.isoformat(),
        Decimal: float,
        bytes: lambda v: v.hex(),
        bytearray: lambda v: bytes(v).hex(),
    }
    convert = scalars.get(type(value))
    if convert is not None:
        return convert(value)
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def text(value: Any, null: str = "NULL") -> str:
    """One value as text: short floats, lower-case booleans, JSON for nested values."""
    if value is None:
        return null
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:.3f}".rstrip("0").rstrip(".") if math.isfinite(value) else str(value)
    plain = _plain(value)
    return plain if isinstance(plain, str) else json.dumps(plain, separators=(",", ":"))


def cell(value: Any) -> str:
    """`text`, cut to a readable width for tables."""
    full = text(value)
    return full if len(full) <= MAX_CELL else full[: MAX_CELL - 1] + "…"


def table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """An aligned text table with a header rule; numbers right-aligned."""
    cells = [[cell(v) for v in row] for row in rows]
    widths = [max([len(c), *(len(r[i]) for r in cells)]) for i, c in enumerate(columns)]
    numeric = [
        all(isinstance(row[i], int | float | Decimal) or row[i] is None for row in rows) and rows
        for i in range(len(columns))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(w) if numeric[i] else v.ljust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ]
        return " | ".join(parts).rstrip()

    rule = "-+-".join("-" * w for w in widths)
    body = [line(r) for r in cells]
    footer = f"({len(rows)} row{'s' if len(rows) != 1 else ''})"
    return "\n".join([line(list(columns)), rule, *body, footer])


def csv_text(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([repr(v) if isinstance(v, float) else text(v, null="") for v in row])
    return out.getvalue().rstrip("\n")


def json_lines(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """One JSON object per row (JSON Lines), for jq and friends."""
    return "\n".join(
        json.dumps({c: _plain(v) for c, v in zip(columns, row, strict=True)}) for row in rows
    )


def render(fmt: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    if fmt == "table":
        return table(columns, rows)
    if fmt == "csv":
        return csv_text(columns, rows)
    if fmt == "json":
        return json_lines(columns, rows)
    raise ValueError(f"unknown format {fmt!r}; use one of {', '.join(FORMATS)}")


def utc(ms: int | None) -> str:
    """An epoch-millisecond instant as UTC to the second (`-` for none), as tables show it."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")
