"""docker-compose.yml is complete and binds nothing beyond loopback on the host."""

from __future__ import annotations

from pathlib import Path

import yaml

from services.contracts.topics import Topics

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())


def test_every_service_is_defined_and_buildable() -> None:
    services = COMPOSE["services"]
    assert {"kafka", "topics", "scheduler", "history", "actuator"} <= set(services)
    for name in ("topics", "scheduler", "history", "actuator"):
        dockerfile = services[name]["build"]["dockerfile"]
        assert (ROOT / dockerfile).is_file(), f"{name}: {dockerfile} is missing"


def test_published_ports_bind_loopback_only() -> None:
    for name, service in COMPOSE["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} on every interface"


def test_the_broker_image_matches_the_local_stack_version() -> None:
    pom = (ROOT / "deploy" / "local" / "kafka" / "pom.xml").read_text()
    image = COMPOSE["services"]["kafka"]["image"]
    assert image.startswith("apache/kafka:")
    assert f"<kafka.version>{image.split(':')[1]}</kafka.version>" in pom


def test_services_reach_the_broker_inside_the_network() -> None:
    kafka = COMPOSE["services"]["kafka"]["environment"]
    assert "INTERNAL://kafka:19092" in kafka["KAFKA_ADVERTISED_LISTENERS"]
    assert (
        COMPOSE["services"]["topics"]["environment"]["SCALEFOLD_BOOTSTRAP_SERVERS"] == "kafka:19092"
    )
    assert Topics().job_events == "scalefold.job-events"
