"""docker-compose.yml brings up a working broker with scalefold's topics (needs Docker).

pytest-docker runs `docker compose up` on the project's compose file. Where no
Docker engine is reachable (as on scalefold's own CI machines) the module skips,
and the same checks run against the locally started broker in tests/integration.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _engine_problem() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    try:
        info = subprocess.run(
            ["docker", "info"], capture_output=True, text=True, timeout=15, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"`docker info` failed: {error}"
    if info.returncode != 0:
        return "no Docker engine is reachable (`docker info` failed)"
    compose = subprocess.run(
        ["docker", "compose", "version"], capture_output=True, timeout=15, check=False
    )
    if compose.returncode != 0:
        return "the docker compose plugin is missing"
    return None


PROBLEM = _engine_problem()
pytestmark = [pytest.mark.docker, pytest.mark.skipif(PROBLEM is not None, reason=str(PROBLEM))]


@pytest.fixture(scope="session")
def docker_compose_file() -> str:
    return str(ROOT / "docker-compose.yml")


@pytest.fixture(scope="session")
def docker_compose_project_name() -> str:
    return "scalefold-test"


@pytest.fixture(scope="session")
def compose_bootstrap(docker_services, docker_ip) -> str:  # type: ignore[no-untyped-def]
    from confluent_kafka.admin import AdminClient

    bootstrap = f"{docker_ip}:9092"

    def topics_created() -> bool:
        try:
            topics = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=3).topics
        except Exception:
            return False
        return "scalefold.job-events" in topics

    docker_services.wait_until_responsive(timeout=180.0, pause=2.0, check=topics_created)
    return bootstrap


def test_compose_broker_has_every_scalefold_topic(compose_bootstrap: str) -> None:
    from confluent_kafka.admin import AdminClient

    from services.contracts.topics import Topics

    existing = AdminClient({"bootstrap.servers": compose_bootstrap}).list_topics(timeout=10).topics
    for name, spec in Topics().all().items():
        assert len(existing[name].partitions) == spec.partitions


def test_avro_round_trip_through_the_compose_broker(compose_bootstrap: str) -> None:
    from services.contracts import Codec, SchemaRegistry, Settings
    from tests.kafka_support import consume, count_at_least, produce

    settings = Settings(bootstrap_servers=compose_bootstrap)
    codec = Codec(SchemaRegistry.load())
    value = codec.encode("scalefold.events.TimerFired", {"jobId": "compose", "timestamp": 1})
    produce(settings, settings.topics.job_events, [(b"compose", value)])
    received = consume(settings, settings.topics.job_events, count_at_least(1))
    assert any(codec.decode(m.value).record["jobId"] == "compose" for m in received)
