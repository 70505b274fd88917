"""One real Flink 2.3.0 session cluster for the whole test session (per xdist worker).

Its JobManager starts once, on free loopback ports, with the adaptive scheduler's waits
short (flinkconf.SHORT_WAITS: cooldown 1 s, stabilizations 1-2 s, heartbeat timeout
5 s, so a killed TaskManager is noticed in seconds); it is stopped, TaskManagers and
all, when the session ends. Each test gets it empty (`flink`): no TaskManager, no
running job. Every Flink test lives in tests/flink/, so that `--dist loadfile` gives a
worker whole files and the workers start at most one cluster each.

`flink_history` is a history service for the worker's Flink tests that want to read
what the history keeps (the differential suite, the REST API's conformance): started
the first time a test asks for it, stopped when the session ends.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from services.contracts.settings import Settings
from tests.flink.flink_support import FlinkTestCluster, session_cluster
from tests.flink.history_support import FlinkHistory
from tests.integration.conftest import broker_settings  # noqa: F401  (a fixture)
from tests.kafka_support import unique_settings


@pytest.fixture(scope="session")
def flink_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlinkTestCluster]:
    with session_cluster(tmp_path_factory.mktemp("flink")) as cluster:
        yield cluster


@pytest.fixture
def flink(flink_session: FlinkTestCluster) -> Iterator[FlinkTestCluster]:
    """The session's cluster with no TaskManager and no running job, left so afterwards."""
    flink_session.reset()
    yield flink_session
    flink_session.reset()


@pytest.fixture(scope="session")
def flink_history(
    broker_settings: Settings,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[FlinkHistory]:
    """A running `scalefold history run` for this worker's session, over topics of its own.

    Yields a `FlinkHistory` (tests/flink/history_support.py):
    - `settings`: the Kafka settings whose topics it reads (a topic prefix of its own,
      the topics created). A test gives these settings to whatever it wants kept, e.g.
      the bridge's Sink over the session's Flink cluster: its `flink-rescales` become
      the tables `flink_rescales` (every message) and `flink_rescales_latest` (the view
      `flink_rescales`), and `rescales` the scheduler's own records.
    - `data_dir`: its DATA_DIR (tables/, checkpoints/); `rescales(cluster, job_id)` and
      `revisions(cluster, job_id)` read the committed tables with services/history/
      lake.py (no Spark in the test's process).
    - `rest_url()`: the rescale REST API (`history serve`'s routes) it serves beside the
      job, waited for (it comes after Spark's start, 10-60 s).
    - `log`: the service's output.
    It runs with --no-sql-endpoint, --no-commands and no OPTIMIZE: one Spark driver
    (local[2]) whose idle micro-batches cost little. Tests share it, so each reads only
    its own jobs' rows (Flink job ids are unique).
    """
    history = FlinkHistory.start(
        unique_settings(broker_settings), tmp_path_factory.mktemp("flink-history")
    )
    try:
        yield history
    finally:
        history.stop()
