"""Rows grouped by a key column: the table sorted by it once, one (start, length) slice per key.

The job index (`store.Jobs`, by job id) and the child tables' index (by rescale uuid)
are both this. They are built when a table's version, or a data file, is first read
(committed Delta files never change), so a request looks its rows up with a dictionary
hit and a `take`, instead of scanning the whole table with a filter.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

Row = dict[str, Any]


def slices_of(column: pa.ChunkedArray | pa.Array) -> dict[str, tuple[int, int]]:
    """key -> (first position, how many) of a column sorted by key."""
    slices, at = {}, 0
    # value_counts lists the values in order of first appearance: the sorted order
    for entry in pc.value_counts(column).to_pylist():
        slices[entry["values"]] = (at, entry["counts"])
        at += entry["counts"]
    return slices


@dataclass(frozen=True)
class Sliced:
    """A table sorted by `key` (then `then`), and where each key's rows are."""

    table: pa.Table
    slices: Mapping[str, tuple[int, int]]

    @classmethod
    def of(cls, table: pa.Table, key: str, then: Sequence[tuple[str, str]] = ()) -> Sliced:
        if table.num_rows == 0:
            return cls(table, {})
        ordered = table.sort_by([(key, "ascending"), *then])
        return cls(ordered, slices_of(ordered.column(key)))

    def positions(self, keys: Iterable[str]) -> list[int]:
        """The positions of every row of these keys (a key not here has none)."""
        found: list[int] = []
        for key in keys:
            where = self.slices.get(key)
            if where is not None:
                found.extend(range(where[0], where[0] + where[1]))
        return found


def rows_of(parts: Sequence[Sliced], keys: Sequence[str]) -> list[Row]:
    """The rows of every part whose key is one of `keys`: one `take` per part holding any."""
    found: list[Row] = []
    for part in parts:
        positions = part.positions(keys)
        if positions:
            found += part.table.take(pa.array(positions, pa.int64())).to_pylist()
    return found
