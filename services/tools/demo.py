"""The end-to-end demo behind `make demo`.

For now it shows the foundation working: a real broker, the topics, and a job's
input events travelling as Avro single-object records.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from typing import TYPE_CHECKING, Any

from services.contracts import Codec, SchemaRegistry
from services.contracts import records as r
from services.contracts.kafka import ensure_topics, librdkafka_config, producer_config
from services.localstack.layout import RUN_ROOT

if TYPE_CHECKING:
    from services.cli import Context

JOB = "demo-job"


def demo_events(start_ms: int) -> list[tuple[str, dict[str, Any]]]:
    """A job submitted, two TaskManagers joining, a requirement update, a checkpoint."""
    vertex = {"slotSharingGroupName": "default", "maxParallelism": None}
    return [
        (
            r.JOB_SUBMITTED,
            {
                "jobId": JOB,
                "timestamp": start_ms,
                "jobName": "clickstream-enrichment",
                "vertices": [
                    {
                        **vertex,
                        "id": "source",
                        "name": "Kafka Source",
                        "slotSharingGroupId": "ssg-1",
                        "parallelism": 4,
                    },
                    {
                        **vertex,
                        "id": "enrich",
                        "name": "Enrich",
                        "slotSharingGroupId": "ssg-1",
                        "parallelism": 4,
                    },
                ],
                "checkpointIntervalMillis": 10_000,
                "configuration": {},
            },
        ),
        (
            r.TASK_MANAGER_REGISTERED,
            {
                "jobId": JOB,
                "timestamp": start_ms + 1_000,
                "taskManagerId": "tm-1",
                "slots": 2,
                "slotProfile": None,
            },
        ),
        (
            r.TASK_MANAGER_REGISTERED,
            {
                "jobId": JOB,
                "timestamp": start_ms + 5_000,
                "taskManagerId": "tm-2",
                "slots": 2,
                "slotProfile": None,
            },
        ),
        (
            r.RESOURCE_REQUIREMENTS_UPDATED,
            {
                "jobId": JOB,
                "timestamp": start_ms + 20_000,
                "requirements": [
                    {"vertexId": "source", "lowerBound": 1, "upperBound": 2},
                    {"vertexId": "enrich", "lowerBound": 1, "upperBound": 4},
                ],
            },
        ),
        (
            r.JOB_LIFECYCLE_EVENT,
            {
                "jobId": JOB,
                "timestamp": start_ms + 30_000,
                "kind": "CHECKPOINT_COMPLETED",
                "checkpointId": 1,
            },
        ),
    ]


def run_demo(context: Context) -> int:
    from confluent_kafka import Consumer, Producer

    from services.localstack.broker import LocalBroker
    from services.localstack.jars import kafka_jars

    say = _say
    broker = LocalBroker(RUN_ROOT / "demo", kafka_jars(context.cache_dir, progress=say))
    try:
        bootstrap = broker.start(fresh=True, progress=say)
        settings = context.settings.with_overrides(bootstrap_servers=bootstrap)
        topics = settings.topics
        ensure_topics(settings, topics.all())
        say(f"topics ready: {', '.join(topics.all())}")
        codec = Codec(SchemaRegistry.load(settings.schemas_dir))

        producer = Producer(producer_config(settings))
        events = demo_events(start_ms=int(time.time() * 1000))
        for name, record in events:
            producer.produce(
                topics.job_events, key=record["jobId"].encode(), value=codec.encode(name, record)
            )
        producer.flush(30)
        say(f"produced {len(events)} Avro events to {topics.job_events}")

        consumer = Consumer(
            librdkafka_config(
                settings,
                **{
                    "group.id": f"demo-{uuid.uuid4()}",
                    "auto.offset.reset": "earliest",
                    "enable.auto.commit": False,
                },
            )
        )
        consumer.subscribe([topics.job_events])
        received = 0
        deadline = time.monotonic() + 60
        while received < len(events) and time.monotonic() < deadline:
            message = consumer.poll(1.0)
            if message is None or message.error():
                continue
            decoded = codec.decode(message.value() or b"", expected=r.INPUT_EVENTS)
            received += 1
            print(
                f"p{message.partition()}@{message.offset():<3} {r.short_name(decoded.schema):28} "
                f"v{decoded.writer_version}  {json.dumps(decoded.record, sort_keys=True)}"
            )
        consumer.close()
        say(f"consumed {received} of {len(events)} events back, decoded")
        return 0 if received == len(events) else 1
    finally:
        broker.stop(progress=say)


def _say(message: str) -> None:
    print(f"[scalefold] {message}", file=sys.stderr, flush=True)
