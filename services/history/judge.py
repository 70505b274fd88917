"""The history service's judge of a real Flink's pairs: keeps `flink_verdicts`
(verdicts.py, module doc) as the pairs change."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from services.contracts.ambiguity import Finder
from services.contracts.settings import Settings
from services.history import pairing
from services.history.flink_tables import LATEST_TABLE
from services.history.lake import Lake, Row
from services.history.verdict import verdict
from services.history.verdicts import RECHECK_MS, TABLE, arrow_schema, ask, rows

log = logging.getLogger(__name__)


def _mark(pairs: Sequence[Mapping[str, Any]]) -> tuple[Any, ...]:
    """What a job's judgement depends on, of its pairs."""
    return tuple(
        (
            p["pair_index"],
            p["paired"],
            p["settled"],
            p["flink_rescale_uuid"],
            p["predicted_rescale_uuid"],
            p["all_fields_agree"],
        )
        for p in sorted(pairs, key=lambda pair: int(pair["pair_index"]))
    )


class Judge:
    """Keeps `flink_verdicts` (see the module doc); `tick` is called from a thread of the
    history service, with the time."""

    def __init__(self, data_dir: Path, settings: Settings, finder: Finder | None) -> None:
        self._data_dir = data_dir
        self._settings = settings
        self._finder = finder
        self._marks: dict[str, tuple[Any, ...]] = {}
        self._due: dict[str, int] = {}
        self._rows: dict[str, list[Row]] = {}

    def tick(self, now_ms: int) -> bool:
        """Judge the jobs whose pairs changed, or whose recheck is due; True if the table
        was written."""
        lake = Lake(self._data_dir)
        if not lake.committed(LATEST_TABLE):
            return False
        found = pairing.compare(lake, None, verdicts=False)
        by_job: dict[str, list[Row]] = {}
        for pair in found.pairs:
            by_job.setdefault(pair["job_key"], []).append(pair)
        written = False
        for job, pairs in sorted(by_job.items()):
            mark = _mark(pairs)
            changed = self._marks.get(job) != mark
            if not changed and now_ms < self._due.get(job, now_ms + 1):
                continue
            findings, unknown = ask(self._finder, self._settings, job)
            if findings is None:
                log.info("which pairs of %s are ambiguous is not known: %s", job, unknown)
            judged = verdict(
                pairs,
                findings.pairs if findings else (),
                found.names,
                findings.resolution_ms if findings else None,
            )
            self._rows[job] = rows(pairs, judged, findings is not None, now_ms)
            self._marks[job] = mark
            if changed:
                self._due[job] = now_ms + RECHECK_MS
            else:
                self._due.pop(job, None)
            written = True
        if written:
            self._write()
        return written

    def _write(self) -> None:
        import pyarrow as pa
        from deltalake import write_deltalake

        every = [row for job in sorted(self._rows) for row in self._rows[job]]
        table = pa.Table.from_pylist(every, schema=arrow_schema())
        path = Lake(self._data_dir).table_dir(TABLE)
        write_deltalake(str(path), table, mode="overwrite", schema_mode="overwrite")
