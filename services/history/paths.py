"""Every path under a history's data directory (`--data-dir`), and nothing else.

    DATA_DIR/
      tables/<table>/              the Delta tables (sources.py names them)
      checkpoints/<query>/         each streaming query's checkpoint (queries.py)
      checkpoints/tables.resume.json   where the per-table queries of an earlier scalefold
                                   left off (resume.py)
      run.lock                     held by the one `history run` of the directory
      sql.url, jdbc.url, rest.url  the addresses a running service serves (while it runs)
      metrics.prom                 the dead letters' counts (letters.py)
      spark.log                    the JVM's own log, when run by hand on a terminal
      jdbc/                        the JDBC server's scratch (metastore, warehouse, derby.log)

Readers (lake.py, the REST API, `history sql`) and the service alike take their paths
from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SQL_URL = "sql.url"
JDBC_URL = "jdbc.url"
REST_URL = "rest.url"


@dataclass(frozen=True)
class Layout:
    """One history's data directory."""

    data_dir: Path

    @property
    def tables(self) -> Path:
        return self.data_dir / "tables"

    def table(self, name: str) -> Path:
        return self.tables / name

    def checkpoint(self, name: str) -> Path:
        return self.data_dir / "checkpoints" / name

    @property
    def resume_file(self) -> Path:
        """Where the per-table queries of an earlier scalefold left off (resume.py)."""
        return self.checkpoint("tables.resume.json")

    @property
    def lock(self) -> Path:
        return self.data_dir / "run.lock"

    def url_file(self, name: str) -> Path:
        """`sql.url`, `jdbc.url` or `rest.url`: an address the running service serves."""
        return self.data_dir / name

    @property
    def metrics(self) -> Path:
        return self.data_dir / "metrics.prom"

    @property
    def spark_log(self) -> Path:
        return self.data_dir / "spark.log"

    @property
    def jdbc_scratch(self) -> Path:
        return self.data_dir / "jdbc"
