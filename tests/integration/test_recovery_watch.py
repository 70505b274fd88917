"""A worker whose recovery of the tables reads nothing leaves, to be started again.

Faust only warns, for ever, when a recovery gets no changelog records; the worker then
never gets to work. Here the broker is frozen (SIGSTOP) while a worker replays a long
changelog: the recovery stops making progress, and the worker must exit with
EXIT_RECOVERY_STALLED within its `--recovery-stall-timeout`, saying why.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer

from services.contracts.kafka import producer_config
from services.scheduler.adapters.app import EXIT_RECOVERY_STALLED
from tests.integration.robustness_support import fresh_settings, own_broker
from tests.integration.scheduler_support import SchedulerProcess

pytestmark = pytest.mark.integration

CHANGELOG_RECORDS = 400_000  # a recovery of some seconds: the broker is frozen inside it
RESTORING = "Restoring state from changelog topics"


def test_a_recovery_that_reads_nothing_makes_the_worker_exit_to_be_started_again(
    tmp_path: Path,
) -> None:
    with own_broker(tmp_path / "broker") as broker:
        settings = fresh_settings(broker)
        worker = SchedulerProcess(
            settings,
            tmp_path / "scheduler",
            "--store",
            "memory://",  # every start replays the whole changelog
            "--recovery-stall-timeout",
            "3",
        )
        worker.start().wait_ready()  # Faust declares the changelog topics
        worker.stop()

        # Deletions of keys never set: a long replay that leaves the table empty.
        producer = Producer(producer_config(settings))
        changelog = f"{settings.topic_prefix}scheduler-jobs-changelog"
        for index in range(CHANGELOG_RECORDS):
            while True:
                try:
                    producer.produce(
                        changelog, key=b"job-%d" % index, value=None, partition=index % 6
                    )
                    break
                except BufferError:  # the local queue is full: let deliveries drain it
                    producer.poll(0.1)
        assert producer.flush(60) == 0

        worker.start()
        deadline = time.monotonic() + 120
        while RESTORING not in worker.log.read_text(errors="replace"):
            assert worker.process is not None and worker.process.poll() is None, worker.tail()
            assert time.monotonic() < deadline, f"no recovery began:\n{worker.tail()}"
            time.sleep(0.05)
        running = broker.status()
        assert running is not None
        os.kill(running.pid, signal.SIGSTOP)
        try:
            assert worker.process is not None
            try:
                code = worker.process.wait(90)
            except subprocess.TimeoutExpired:
                worker.kill()
                raise AssertionError(
                    f"the stalled worker did not leave:\n{worker.tail()}"
                ) from None
        finally:
            os.kill(running.pid, signal.SIGCONT)
        assert code == EXIT_RECOVERY_STALLED, worker.tail()
        assert "recovery stalled" in worker.tail(), worker.tail()
