"""Start the scheduler service: check the configuration, create the topics, run the worker."""

from __future__ import annotations

import logging
import sys

from services.contracts import Codec, SchemaRegistry
from services.contracts.kafka import ensure_topics, librdkafka_config, redacted
from services.scheduler.adapters.app import ServiceSettings, create_service
from services.scheduler.core.config import ConfigError
from services.scheduler.core.fold import config_of

log = logging.getLogger("scalefold.scheduler")


def run_service(settings: ServiceSettings, log_level: str = "info") -> int:
    import faust

    try:
        config_of(settings.defaults, (), False)
    except ConfigError as error:
        print(f"scalefold scheduler: invalid configuration: {error}", file=sys.stderr)
        return 2
    kafka = settings.kafka
    log.info("connecting to %s", redacted(librdkafka_config(kafka))["bootstrap.servers"])
    created = ensure_topics(kafka, kafka.topics.all())
    if created:
        log.info("created topics %s", ", ".join(created))
    service = create_service(settings, Codec(SchemaRegistry.load(kafka.schemas_dir)))
    log.info(
        "starting scheduler %s (defaults: %s)",
        settings.app_id,
        ", ".join(f"{k}={v}" for k, v in settings.defaults) or "Flink's",
    )
    worker = faust.Worker(service.app, loglevel=log_level, quiet=True, override_logging=False)
    worker.execute_from_commandline()
    return 0
