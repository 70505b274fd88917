"""Start the scheduler service: check the configuration, create the topics, run the worker."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
from typing import Any

from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts.disk import wait_for_room
from services.contracts.kafka import connect, librdkafka_config, redacted, retry_transient
from services.contracts.preflight import prepare
from services.scheduler.adapters import heap
from services.scheduler.adapters.app import ServiceSettings, create_service, table_dir
from services.scheduler.adapters.datadir import (
    EXIT_DATA_DIR,
    DataDirError,
    claim_data_dir,
    drop_damaged_tables,
    keep_tables_of,
    with_address,
    worker_identity,
)
from services.scheduler.core import MODE as CORE_MODE
from services.scheduler.core.config import ConfigError
from services.scheduler.core.fold import config_of

log = logging.getLogger("scalefold.scheduler")

AUTO_INSTANCE_ID = "auto"
"""--group-instance-id's default: static membership under an id kept in --data-dir
when the worker holds that directory alone (rocksdb://), a new member otherwise."""


def faust_topics(app: Any) -> list[str]:
    """The topics Faust makes for itself: its tables' changelogs, its leader topic."""
    changelogs = [table.changelog_topic_name for table in app.tables.values()]
    return [*changelogs, f"{app.conf.id}-__assignor-__leader"]  # faust.assignor.LeaderAssignor


def expected_missing_topic(record: logging.LogRecord) -> bool:
    """aiokafka logs ERROR "Topic ... not found in cluster metadata" when its metadata
    arrives before a topic just created (a changelog at a fresh start) has propagated;
    it retries by itself, so this is DEBUG (modified in place: filters may do that)."""
    if record.levelno == logging.ERROR and "not found in cluster metadata" in record.msg:
        record.levelno, record.levelname = logging.DEBUG, "DEBUG"
        return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
    return True


def cluster_id(kafka: Settings) -> str:
    """The Kafka cluster's id (KIP-78), which a broker keeps for its life."""
    return str(
        retry_transient(lambda: connect(kafka).list_topics(timeout=10).cluster_id, "the cluster id")
    )


def run_service(settings: ServiceSettings, log_level: str = "info") -> int:
    import faust

    try:
        config_of(settings.defaults, (), False)
    except ConfigError as error:
        print(f"scalefold scheduler: invalid configuration: {error}", file=sys.stderr)
        return 2
    try:
        lock = claim_data_dir(settings)
    except DataDirError as error:
        print(f"scalefold scheduler: {error}", file=sys.stderr)
        return EXIT_DATA_DIR
    kafka = settings.kafka
    log.info("connecting to %s", redacted(librdkafka_config(kafka))["bootstrap.servers"])
    if lock is not None:
        wait_for_room(table_dir(settings), log)
        keep_tables_of(settings, cluster_id(kafka))
        drop_damaged_tables(settings)
    instance_id = settings.group_instance_id
    if instance_id == AUTO_INSTANCE_ID:
        instance_id = worker_identity(settings) if lock is not None else None
    elif instance_id:
        instance_id = with_address(instance_id, settings)  # an id of the user's, as auto's
    settings = dataclasses.replace(settings, group_instance_id=instance_id)
    if settings.group_instance_id:
        log.info("consumer group member %s (static membership)", settings.group_instance_id)
    service = create_service(settings, Codec(SchemaRegistry.load(kafka.schemas_dir)))
    created = prepare(kafka, "scheduler", faust_topics(service.app))
    if created:
        log.info("created topics %s", ", ".join(created))
    log.info(
        "starting scheduler %s (core %s; defaults: %s)",
        settings.app_id,
        CORE_MODE,
        ", ".join(f"{k}={v}" for k, v in settings.defaults) or "Flink's",
    )
    heap.start_from(os.environ)  # a diagnosis, when asked for (heap.py)
    worker = faust.Worker(service.app, loglevel=log_level, quiet=True, override_logging=False)
    if not worker.stdout.isatty():  # its spinner writes cursor escapes even into a log file
        worker.spinner = None
    logging.getLogger("aiokafka.cluster").addFilter(expected_missing_topic)
    try:
        worker.execute_from_commandline()
    finally:
        if lock is not None:
            lock.close()
    return 0
