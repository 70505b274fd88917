"""How ids order in every record and output: naturally, `tm-2` before `tm-10`.

TaskManager and slot ids (`tm-10`, `tm-10#3`) are names with numbers in them;
plain string order puts `tm-10` before `tm-2`. Every service sorts them with
`natural_key`, so a record, a decision's slot list and the actuator's cluster
state all list them the way a person counts.
"""

from __future__ import annotations

import re
from functools import lru_cache

_DIGITS = re.compile(r"(\d+)")


# Cached: the scheduler sorts the same few slot ids on every allocation. Bounded by what
# a worker's live jobs use, not by every id it ever saw: full, 65,536 entries held 27 MiB,
# which a fleet whose TaskManagers come and go filled at ~3,000 new ids a day (the
# month benchmark's scheduler, +2 MiB a day); 8,192 hold ~3.4 MiB.
@lru_cache(maxsize=1 << 13)
def natural_key(text: str) -> tuple[tuple[str | int, ...], str]:
    """A sort key comparing the digit runs of `text` as numbers.

    `re.split` with a capturing group puts text at even and digits at odd
    positions, so two keys always compare text with text and numbers with
    numbers. The text itself breaks ties (`tm-01` and `tm-1`), so the order is
    total and stable across processes.
    """
    parts = _DIGITS.split(text)
    return tuple(int(p) if i % 2 else p for i, p in enumerate(parts)), text
