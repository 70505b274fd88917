"""docker-compose.yml is complete and binds nothing beyond loopback on the host."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
DOCKERFILE = (ROOT / "deploy" / "docker" / "Dockerfile").read_text()


def test_every_service_is_defined_and_its_image_built_from_the_one_dockerfile() -> None:
    services = COMPOSE["services"]
    assert {
        "kafka",
        "topics",
        "scheduler",
        "actuator",
        "spark-master",
        "spark-worker",
        "history",
    } <= set(services)
    builders = {name: s["build"] for name, s in services.items() if "build" in s}
    images = {s["image"] for s in services.values()}
    assert {s["image"] for name, s in services.items() if name in builders} == images
    for build in builders.values():
        assert (ROOT / build["dockerfile"]).is_file()
        assert f"AS {build['target']}" in DOCKERFILE


def test_published_ports_bind_loopback_only() -> None:
    for name, service in COMPOSE["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"


def test_every_long_running_service_has_a_health_check() -> None:
    for name, service in COMPOSE["services"].items():
        if name in ("topics", "cli"):
            continue
        assert service.get("healthcheck", {}).get("test"), f"{name} has no health check"


def test_the_official_broker_image_matches_the_local_stack_version() -> None:
    pom = (ROOT / "deploy" / "local" / "kafka" / "pom.xml").read_text()
    match = re.search(r"ARG KAFKA_IMAGE=apache/kafka:(\S+)", DOCKERFILE)
    assert match is not None
    assert f"<kafka.version>{match.group(1)}</kafka.version>" in pom


def test_services_reach_the_broker_inside_the_network() -> None:
    kafka = COMPOSE["services"]["kafka"]["environment"]
    assert "INTERNAL://kafka:19092" in kafka["KAFKA_ADVERTISED_LISTENERS"]
    bootstrap = COMPOSE["services"]["topics"]["environment"]["SCALEFOLD_BOOTSTRAP_SERVERS"]
    assert bootstrap == "${SCALEFOLD_BOOTSTRAP_SERVERS:-kafka:19092}"
