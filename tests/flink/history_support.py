"""A running history service over a topic prefix of its own, read back without Spark.

`FlinkHistory` is what tests/flink/conftest.py's `flink_history` fixture yields: one
`scalefold history run` (a process, as a user starts it; its log in `log`) over the
topics of `settings`, writing its Delta tables under `data_dir`. Its own tables are read
with the JVM-free reader services/history/lake.py, so what a test asserts is what the
service committed: the view `flink_rescales` is the table `flink_rescales_latest`, and
every message received is a row of the raw table `flink_rescales`.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.contracts.settings import Settings
from services.history.flink_tables import LATEST_TABLE, RAW_TABLE
from services.history.lake import Lake, quoted
from tests.history.support import HistoryProcess
from tests.patience import give_up_at

OPTIONS = (
    "--no-sql-endpoint",  # read from the Delta tables (lake.py); no Spark Connect, no JDBC
    "--no-commands",  # the observed jobs are never commanded; nothing else to plan
    "--optimize-minutes",
    "0",
    "--rest-port",
    "0",  # the rescale REST API beside it, its address in DATA_DIR/rest.url
)


@dataclass
class FlinkHistory:
    """The service, where it writes, and its committed rows."""

    settings: Settings
    data_dir: Path
    log: Path
    process: HistoryProcess

    @classmethod
    def start(cls, settings: Settings, directory: Path) -> FlinkHistory:
        """Started, not waited for: Spark's start (10-60 s) overlaps the scenario's."""
        data_dir, log = directory / "history", directory / "history.log"
        return cls(settings, data_dir, log, HistoryProcess(settings, data_dir, log, *OPTIONS))

    def stop(self) -> None:
        with contextlib.suppress(AssertionError):  # killed, with its log, if it hangs
            self.process.terminate()
            self.process.wait(90.0)

    def rest_url(self, seconds: float = 240.0) -> str:
        """The REST API's address, once the service serves it (after Spark's start)."""
        path = self.data_dir / "rest.url"
        deadline = give_up_at(seconds)
        while time.monotonic() < deadline:
            self.process.running()
            with contextlib.suppress(OSError):
                if url := path.read_text().strip():
                    return url
            time.sleep(0.5)
        raise AssertionError(f"history run wrote no {path} in {seconds} s:\n{self.process.tail()}")

    def rescales(self, cluster: str, job_id: str) -> list[dict[str, Any]]:
        """The job's rows of the view `flink_rescales` (committed), oldest first."""
        return self._rows(LATEST_TABLE, cluster, job_id, "*")

    def revisions(self, cluster: str, job_id: str) -> list[dict[str, Any]]:
        """Every message of the job the service received (the raw table): its rescale,
        revision and Kafka position."""
        columns = "rescale_uuid, revision, kafka_partition, kafka_offset"
        return self._rows(RAW_TABLE, cluster, job_id, columns)

    def _rows(self, table: str, cluster: str, job_id: str, columns: str) -> list[dict[str, Any]]:
        self.process.running()
        if not self.data_dir.is_dir():
            return []
        lake = Lake(self.data_dir)
        if not lake.committed(table):
            return []
        where = f"cluster = {quoted(cluster)} AND job_id = {quoted(job_id)}"
        return lake.rows(
            f"SELECT {columns} FROM t WHERE {where} "
            "ORDER BY start_timestamp_ms, rescale_attempt_id, rescale_uuid"
            if columns == "*"
            else f"SELECT {columns} FROM t WHERE {where} ORDER BY rescale_uuid, revision",
            {"t": table},
        )
