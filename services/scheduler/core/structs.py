"""msgspec's Struct helpers, bound once for the compiled core.

Compiled, a name imported from an interpreted module (msgspec's `replace`) is looked up in
the module's globals at every use; a `Final` name of a compiled module is a C static,
read directly from every compiled module (`bench.fold_loop` counts the difference).
"""

from __future__ import annotations

from typing import Final

import msgspec

replace: Final = msgspec.structs.replace
"""A copy of a Struct with some fields changed: the fold's copy-on-write."""

fields: Final = msgspec.structs.astuple
"""A Struct's fields in the order its class declares them, read in one C call. Compiled, each
attribute read of a Struct is a generic lookup (about 140 instructions): reading most of a
Struct's fields costs less this way."""
