"""Rows grouped by a key column: the table's rows put together by key once, one (start,
length) slice per key.

The child tables' index (by rescale uuid) is a `Sliced` per data file; the job index
(`store.Jobs`, sorted by job and start) takes `slices_of` its sorted column. Both are
built when a table's version, or a data file, is first read
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
    def of(cls, table: pa.Table, key: str) -> Sliced:
        """Grouped by `key` (rows without one are left out), in the order keys first appear.

        Sorting the dictionary codes of the keys, integers, took a third of the time of
        sorting the strings (500,000 spans: 0.6 s, not 1.7 s, at load 25)."""
        if table.num_rows == 0:
            return cls(table, {})
        encoded = pc.dictionary_encode(table.column(key)).combine_chunks()
        order = pc.sort_indices(encoded.indices)  # stable: a key's rows keep their order
        codes = encoded.indices.take(order)
        names = encoded.dictionary.to_pylist()
        slices, at = {}, 0
        for entry in pc.value_counts(codes).to_pylist():  # in order: the codes are sorted
            if entry["values"] is not None:  # the nulls, sorted to the end
                slices[names[entry["values"]]] = (at, entry["counts"])
            at += entry["counts"]
        return cls(table.take(order), slices)

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
