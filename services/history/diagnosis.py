"""What a failure of the history's queries or compactions means, and what to do about it.

A query that fails is started again (queries.Queries.revive), a compaction tried again
later (upkeep.Upkeep): the service goes on. Where the failure is damage to its own files
(a full disk, a data file someone deleted), Spark's or delta-rs' error is a page of Java;
`diagnosis` turns it into one line that names the path and says what to do.
"""

from __future__ import annotations

import re
from pathlib import Path

from services.contracts.disk import NO_SPACE

_PARQUET = re.compile(r"(?<![\w.-])(?:file:)?(/[^\s'\",\]]+\.parquet)")
"""An absolute path of a Parquet file (a relative one, as delta-rs also prints, is not one)."""
_GONE = ("FileNotFoundException", "DELTA_FILE_NOT_FOUND", "No such file or directory", "not found")


def diagnosis(error: object, data_dir: Path) -> str | None:
    """What a failure of a query or a compaction means and what to do, for the damage
    this module knows; None for any other."""
    text = str(error)
    if NO_SPACE in text:
        return (
            f"the disk holding {data_dir} is full: free space on it (or start `history run` "
            "with a --data-dir that has room); nothing is lost meanwhile: the failed batch "
            "runs again from its checkpoint, and Kafka keeps its records"
        )
    found = _PARQUET.search(text)
    if found and any(marker in text for marker in _GONE):
        path = found.group(1)
        return (
            f"a data file of the history is gone: {path}; restart the history service: at "
            "start it removes missing files from their table and reads their rows again "
            "from Kafka"
        )
    return None
