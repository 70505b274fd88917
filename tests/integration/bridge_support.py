"""For the bridge's tests: a local HTTP server that answers like Flink 2.3.0 (its captured
answers), or badly on purpose, and a reader of a topic to its end."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from services.contracts import Codec
from services.contracts.codec import Decoded
from services.contracts.events import Event, from_record
from services.contracts.kafka import librdkafka_config
from services.contracts.settings import Settings
from tests.patience import give_up_at

ANSWERS = Path(__file__).parents[1] / "unit" / "bridge" / "answers"
JID = "cc408c8079b82a80a401c5ac85881e95"
FIRST, SECOND = "afc103edd691c5267ae684fefa3ae972", "f92913c3d29ca43b741b9115e1b16e4a"


def captured(name: str) -> Any:
    return json.loads((ANSWERS / name).read_text())


def flink_answers(jid: str = JID) -> dict[str, tuple[int, bytes]]:
    """Path -> (status, body) of one job on a cluster, as the real Flink answered."""
    job = f"/jobs/{jid}"

    def ok(name: str) -> tuple[int, bytes]:
        return 200, (ANSWERS / name).read_bytes().replace(JID.encode(), jid.encode())

    overview = {"jobs": [{"jid": jid, "name": "scalefold-sample", "state": "RUNNING"}]}
    return {
        "/jobs/overview": (200, json.dumps(overview).encode()),
        "/taskmanagers": ok("taskmanagers.json"),
        job: ok("job.json"),
        f"{job}/resource-requirements": ok("resource-requirements.json"),
        f"{job}/rescales/config": ok("rescales-config.json"),
        f"{job}/config": ok("job-config.json"),
        f"{job}/checkpoints/config": (404, b'{"errors": ["Checkpointing is not enabled"]}'),
        f"{job}/exceptions": ok("exceptions.json"),
        f"{job}/rescales/history": ok("rescales-history.json"),
        f"{job}/rescales/details/{FIRST}": ok(f"rescales-details-{FIRST}.json"),
        f"{job}/rescales/details/{SECOND}": ok(f"rescales-details-{SECOND}.json"),
    }


class FakeFlink:
    """Serves `answers` (path -> (status, body)); anything else is Flink's 404."""

    def __init__(self, answers: dict[str, tuple[int, bytes]], port: int = 0) -> None:
        self.answers = answers
        self.requests = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.requests += 1
                status, body = fake.answers.get(
                    self.path, (404, b'{"errors": ["NotFoundException: Job not found"]}')
                )
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextmanager
def fake_flink(answers: dict[str, tuple[int, bytes]], port: int = 0) -> Iterator[FakeFlink]:
    server = FakeFlink(answers, port)
    try:
        yield server
    finally:
        server.stop()


def read_all(settings: Settings, topic: str, codec: Codec) -> list[tuple[str, dict[str, Any]]]:
    """Every committed record of `topic`, (key, decoded record), partition by partition."""
    return [(key, decoded.record) for key, decoded in read_decoded(settings, topic, codec)]


def read_events(settings: Settings, codec: Codec) -> list[Event]:
    """The input events on job-events, partition by partition."""
    found = read_decoded(settings, settings.topics.job_events, codec)
    return [from_record(decoded.schema, decoded.record) for _, decoded in found]


def read_decoded(settings: Settings, topic: str, codec: Codec) -> list[tuple[str, Decoded]]:
    """Every committed record of `topic`, decoded, partition by partition."""
    consumer = Consumer(
        librdkafka_config(
            settings,
            **{
                "group.id": "test-bridge-reader",
                "enable.auto.commit": False,
                "isolation.level": "read_committed",
                "enable.partition.eof": True,
            },
        )
    )
    partitions = list(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    found: list[tuple[str, Decoded]] = []
    at_end: set[int] = set()
    deadline = give_up_at(30)
    try:
        while len(at_end) < len(partitions):
            assert time.monotonic() < deadline, f"{topic} not read to its end"
            message = consumer.poll(0.5)
            if message is None:
                continue
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    at_end.add(message.partition() or 0)
                continue
            found.append(((message.key() or b"").decode(), codec.decode(message.value() or b"")))
    finally:
        consumer.close()
    return found
