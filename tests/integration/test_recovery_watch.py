"""A worker whose recovery of the tables reads nothing leaves, to be started again, while
the broker answers; a broker away is waited for, as at any other time.

Faust only warns, for ever, when a recovery gets no changelog records; the worker then
never gets to work. A changelog whose last entry is a transaction's commit marker is
such a recovery, made on purpose: Faust (without exactly-once) waits for the offset of
the marker, which a consumer is never given.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from services.contracts import Settings
from services.contracts.kafka import producer_config
from services.localstack.broker import LocalBroker
from services.scheduler.adapters.app import EXIT_RECOVERY_STALLED
from tests.integration.robustness_support import fresh_settings, own_broker
from tests.integration.scheduler_support import SchedulerProcess
from tests.patience import give_up_at

pytestmark = pytest.mark.integration

RESTORING = "Restoring state from changelog topics"


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[LocalBroker]:
    with own_broker(tmp_path / "broker") as running:
        yield running


def worker_with_a_changelog(
    settings: Settings,
    data_dir: Path,
    records: int,
    transactional: bool = False,
    key_padding: int = 0,
) -> SchedulerProcess:
    """A worker (memory://: every start replays the whole changelog, with a 3 s stall
    timeout) whose jobs changelog holds `records` deletions of keys never set, written
    in one transaction if `transactional`; started once before, to declare the topics.

    Each key carries `key_padding` random bytes (as hex, so nothing compresses them):
    a consumer fetches up to 1 MiB per partition at a time, which holds some 60,000 bare
    deletions, the whole changelog of a test; padded keys keep most of it on the broker
    until the replay asks for it."""
    worker = SchedulerProcess(
        settings, data_dir, "--store", "memory://", "--recovery-stall-timeout", "3"
    )
    worker.start().wait_ready()
    worker.stop()
    config = producer_config(settings)
    if transactional:
        config["transactional.id"] = f"test-{uuid.uuid4().hex}"
    producer = Producer(config)
    if transactional:
        producer.init_transactions(30)
        producer.begin_transaction()
    changelog = f"{settings.topic_prefix}scheduler-jobs-changelog"
    for index in range(records):
        while True:
            try:
                key = b"job-%d-%s" % (index, os.urandom(key_padding).hex().encode())
                producer.produce(changelog, key=key, value=None, partition=index % 6)
                break
            except BufferError:  # the local queue is full: let deliveries drain it
                producer.poll(0.1)
    if transactional:
        producer.commit_transaction(60)
    assert producer.flush(60) == 0
    return worker


def wait_for_line(worker: SchedulerProcess, text: str, timeout: float = 120) -> None:
    deadline = give_up_at(timeout)
    while text not in worker.log.read_text(errors="replace"):
        assert worker.process is not None and worker.process.poll() is None, worker.tail()
        assert time.monotonic() < deadline, f"no {text!r} in the log:\n{worker.tail()}"
        time.sleep(0.05)


def test_a_recovery_that_reads_nothing_while_the_broker_answers_makes_the_worker_exit(
    broker: LocalBroker, tmp_path: Path
) -> None:
    settings = fresh_settings(broker)
    worker = worker_with_a_changelog(settings, tmp_path / "scheduler", 600, transactional=True)
    worker.start()
    assert worker.process is not None
    try:
        code = worker.process.wait(120)
    except subprocess.TimeoutExpired:
        worker.kill()
        raise AssertionError(f"the stalled worker did not leave:\n{worker.tail()}") from None
    assert code == EXIT_RECOVERY_STALLED, worker.tail()
    log = worker.log.read_text(errors="replace")
    assert RESTORING in log and "recovery stalled" in log, worker.tail()


def test_a_recovery_that_waits_for_a_broker_away_goes_on_when_it_is_back(
    broker: LocalBroker, tmp_path: Path
) -> None:
    """The broker frozen (SIGSTOP) inside a replay of 60,000 records of 1 KB each
    (ten fetches a partition), for longer than the stall timeout: the worker waits and
    says why, and gets ready once it is back."""
    settings = fresh_settings(broker)
    worker = worker_with_a_changelog(settings, tmp_path / "scheduler", 60_000, key_padding=500)
    worker.start()
    wait_for_line(worker, RESTORING)
    running = broker.status()
    assert running is not None
    os.kill(running.pid, signal.SIGSTOP)
    try:
        wait_for_line(worker, "the broker does not answer; waiting for it", timeout=60)
    finally:
        os.kill(running.pid, signal.SIGCONT)
    worker.wait_ready(180)
    assert "recovery stalled" not in worker.log.read_text(errors="replace")
    worker.stop()
