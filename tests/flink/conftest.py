"""One real Flink 2.3.0 session cluster for the whole test session (per xdist worker).

Its JobManager starts once, on free loopback ports, with the adaptive scheduler's waits
short (flinkconf.SHORT_WAITS: cooldown 1 s, stabilizations 1-2 s, heartbeat timeout
5 s, so a killed TaskManager is noticed in seconds); it is stopped, TaskManagers and
all, when the session ends. Each test gets it empty (`flink`): no TaskManager, no
running job. Every Flink test lives in tests/flink/, so that `--dist loadfile` gives a
worker whole files and the workers start at most one cluster each.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from services.localstack.flink import FlinkCluster
from services.localstack.flinkconf import SHORT_WAITS, FlinkConfig
from services.localstack.flinkdist import flink_home, sample_job
from services.localstack.layout import cache_dir
from services.localstack.ports import free_ports
from tests.flink.flink_support import FlinkTestCluster
from tests.patience import patient


@pytest.fixture(scope="session")
def flink_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FlinkTestCluster]:
    cache = cache_dir(os.environ)
    home = flink_home(cache)
    jar = sample_job(cache, home)
    cluster = FlinkCluster(tmp_path_factory.mktemp("flink"), home)
    rest_port, rpc_port = free_ports(2)
    cluster.configure(FlinkConfig(rest_port, rpc_port, waits=SHORT_WAITS))
    try:
        cluster.start_jobmanager()
        cluster.wait_rest(timeout=patient(120.0))
        yield FlinkTestCluster(cluster, jar)
    finally:
        cluster.stop(progress=lambda _: None)


@pytest.fixture
def flink(flink_session: FlinkTestCluster) -> Iterator[FlinkTestCluster]:
    """The session's cluster with no TaskManager and no running job, left so afterwards."""
    flink_session.reset()
    yield flink_session
    flink_session.reset()
