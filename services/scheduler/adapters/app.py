"""The scheduler service: a Faust app, built by a factory from typed settings.

One agent consumes the job-events topic as raw bytes, in batches. For each
batch it folds every message through the core (`Processor`), sends every
output, waits until Kafka has acknowledged all of them, and only then writes
the jobs' new states to the changelog-backed table, waiting for those
acknowledgements too before the batch's input offsets may be committed.
Outputs and changelog records alike go through one librdkafka producer
(`Output`): Faust's own aiokafka producer costs a Python-level send per record. So a
crash can lose no output and no state: after a restart, messages whose state
was not stored are folded again and their outputs re-sent byte for byte, and
messages whose state was stored are recognised by their offset and skipped.

Faust could leave holes in what it delivers: at the end of a recovery it
dropped the first messages it fetched (`fastpath.SeekFirstRecovery` closes
that race). A job's events must all be folded, in order, so the worker still
keeps, per partition, the offset through which every message is folded and
stored (a second table, written once the batch's states are acknowledged),
checks that what Faust delivers follows on from it, and reads any skipped
range from Kafka itself before going on.

Timers: after each fold the job's earliest due timer is noted; a periodic task
writes a `TimerFired` event for it onto the job-events topic once the wall
clock passes its due time, so the log stays the complete source of truth. A
job observed on a real Flink is left out: the bridge moves its clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import ssl
import sys
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import faust
from faust.serializers import codecs
from faust.types import TP

from services.contracts import Codec, Settings
from services.contracts import records as r
from services.contracts.access import KafkaAccessError, KafkaUnreachableError
from services.contracts.disk import NO_SPACE
from services.contracts.kafka import (
    connect,
    librdkafka_config,
    producer_config,
    retry_transient,
)
from services.contracts.topics import DAY_MS, JOB_EVENTS
from services.scheduler.adapters import fastpath
from services.scheduler.adapters.assignor import DeclaredPartitionAssignor
from services.scheduler.adapters.metrics import Metrics
from services.scheduler.adapters.processor import (
    Incoming,
    Outgoing,
    Processor,
    Stored,
    store_bytes,
    stored_from_bytes,
)
from services.scheduler.core.fold import Defaults

log = logging.getLogger("scalefold.scheduler")

STORED_CODEC = "scalefold-stored-job"
OFFSET_CODEC = "scalefold-offset"
EXIT_BATCH_FAILED = 70  # EX_SOFTWARE
EXIT_RECOVERY_STALLED = 75  # EX_TEMPFAIL: started again, it recovers afresh


@dataclass(frozen=True)
class ServiceSettings:
    """Everything `scalefold scheduler` is configured with; read once at the entry point."""

    kafka: Settings
    defaults: Defaults = ()
    web_host: str = "127.0.0.1"
    web_port: int = 6066
    data_dir: Path = Path(".run/scheduler")
    batch_size: int = 500
    batch_window_s: float = 0.005  # each batch cycle waits it out: latency at low rates
    session_timeout_s: float = 10.0
    tick_interval_s: float = 0.2
    replication_factor: int = 1
    # the tables on local disk (rocksdict), so a restart replays only the changelogs'
    # tail; "memory://" replays them whole (docs/scheduler-service.md)
    store: str = "rocksdb://"
    # Kafka's group.instance.id (static membership, KIP-345): a worker restarted with
    # the same id takes its partitions back at once instead of after the session
    # timeout; None: a new member at every start (run.py picks the default)
    group_instance_id: str | None = None
    # decoded job states kept in memory (several KB each); beyond it, the least
    # recently used are read from the table again when their jobs next have events
    state_cache_jobs: int = 100_000
    # a recovery that reads nothing for this long while the broker answers: the worker
    # exits to be started again (0: never)
    recovery_stall_timeout_s: float = 120.0
    # how often (on each job's own clock) a job's state goes to job-snapshots
    snapshot_interval_ms: int = DAY_MS

    @property
    def app_id(self) -> str:
        return f"{self.kafka.topic_prefix}scheduler"


class _StoredCodec(codecs.Codec):
    """A job's stored state as the table's bytes.

    A table write encodes its value twice, for the changelog record
    (`AwaitedTable.on_key_set`) and for Faust's store, one after the other; the
    last state encoded is remembered, so the second is not encoded again (a
    `Stored` is immutable: the same object, the same bytes). A state cold in the
    CPU's caches takes 6-12 µs to encode (docs/benchmarks.md)."""

    _last: tuple[Stored, bytes] | None = None

    def _dumps(self, obj: Any) -> bytes:
        last = self._last
        if last is not None and last[0] is obj:
            return last[1]
        data = store_bytes(obj)
        self._last = (obj, data)
        return data

    def _loads(self, s: bytes) -> Any:
        return stored_from_bytes(s)


class _OffsetCodec(codecs.Codec):
    def _dumps(self, obj: Any) -> bytes:
        return str(obj).encode()

    def _loads(self, s: bytes) -> Any:
        return int(s)


codecs.register(STORED_CODEC, _StoredCodec())
codecs.register(OFFSET_CODEC, _OffsetCodec())


class AwaitedTable(faust.Table):  # type: ignore[type-arg]
    """A table whose changelog records the service writes itself, through its
    librdkafka producer (`Output`), so that the agent can wait until the broker
    has acknowledged them before its batch's offsets may be committed.

    Faust writes a table's changelog through its own aiokafka producer, one
    Python-level send, future and callback per record, its batches built in
    Python; in a profile of the service that was a fifth of its CPU (see
    docs/scheduler-service.md). librdkafka batches and sends in C. The records
    are the ones Faust would write (same topic, partition, key and value bytes),
    so Faust's recovery reads them as its own; with a RocksDB store the offset
    of the last acknowledged record is kept in the store as Faust does.

    The changelog partition for a key is the job-events partition it belongs
    to: Faust takes it from the event being processed; the agent works on
    batches, so it tells the table each key's partition instead.
    """

    def __init__(self, *args: Any, value_codec: str, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # Keys are strings as UTF-8; values use our own codecs, never JSON.
        # (Faust derives serializers from types and would call Stored.from_data.)
        self.key_serializer = "raw"
        self.value_serializer = value_codec
        self.partition_of: dict[str, int] = {}
        self.output: Output | None = None  # set by create_service
        self._sent: list[tuple[int, int]] = []  # (partition, offset) acknowledged, not yet noted

    def partition_for_key(self, key: Any) -> int | None:
        return self.partition_of[key]

    def _new_store_by_url(self, url: Any) -> Any:
        if str(url).startswith("rocksdb:"):
            return _PartitionedRocksStore(
                url,
                self.app,
                self,
                table_name=self.name,
                key_type=self.key_type,
                key_serializer=self.key_serializer,
                value_serializer=self.value_serializer,
                value_type=self.value_type,
                loop=self.loop,
                options=self.options,
            )
        return super()._new_store_by_url(url)

    def on_key_set(self, key: Any, value: Any) -> None:
        assert self.output is not None, "the table's output is set by create_service"
        self.output.send(
            self.changelog_topic_name,
            str(key).encode(),
            codecs.dumps(self.value_serializer, value),
            partition=self.partition_of[key],
            on_delivery=self._delivered,
        )
        self._sensor_on_set(self, key, value)

    def on_key_del(self, key: Any) -> None:
        """A released job: a tombstone on its changelog partition (Faust's recovery
        then deletes the key too), acknowledged like any other changelog record."""
        assert self.output is not None, "the table's output is set by create_service"
        self.output.send(
            self.changelog_topic_name,
            str(key).encode(),
            None,
            partition=self.partition_of[key],
            on_delivery=self._delivered,
        )
        self._sensor_on_del(self, key)

    def _delivered(self, error: Any, message: Any) -> None:
        # Called by librdkafka's flush, off the event loop: only note it here.
        if error is None:
            self._sent.append((message.partition(), message.offset()))
        else:
            assert self.output is not None
            self.output.errors.append(f"{message.topic()}: {error}")

    def batched(self) -> contextlib.AbstractContextManager[None]:
        """Writes made inside reach the store together at the end: with `rocksdb://`
        one `WriteBatch` per partition instead of a put per state (the cheaper
        write, docs/scheduler-service.md); with `memory://` each lands at once."""
        batched = getattr(self.data, "batched", None)
        return contextlib.nullcontext() if batched is None else batched()

    async def acknowledged(self) -> None:
        """Wait until the broker has acknowledged every changelog record written so far."""
        assert self.output is not None
        await self.output.delivered()
        sent, self._sent = self._sent, []
        last: dict[int, int] = {}
        for partition, offset in sent:
            last[partition] = max(offset, last.get(partition, -1))
        for partition, offset in last.items():
            # What Faust's own changelog callback does (at-least-once): a RocksDB
            # store remembers it, so a restart replays only the changelog's tail.
            self.data.set_persisted_offset(TP(self.changelog_topic_name, partition), offset)


def _rocks_store_class() -> type:
    from faust.stores.rocksdb import Store
    from rocksdict import WriteBatch

    class PartitionedRocksStore(Store):
        """Faust's RocksDB store, told each key's partition by the table.

        Faust's store takes a written key's partition from the event being
        processed; the agent writes a batch's states after the batch, so the
        table's `partition_of` names it instead."""

        _pending: dict[int, WriteBatch] | None = None  # partition -> puts not yet written

        def _set(self, key: bytes, value: bytes | None) -> None:
            partition: int = cast(AwaitedTable, self.table).partition_of[key.decode()]
            self._key_index[key] = partition
            if self._pending is None:
                self._db_for_partition(partition).put(key, value)
                return
            batch = self._pending.get(partition)
            if batch is None:
                batch = self._pending[partition] = WriteBatch(raw_mode=True)
            batch.put(key, value)

        @contextlib.contextmanager
        def batched(self) -> Iterator[None]:
            """The puts made inside go to RocksDB at the end, one `WriteBatch` per
            partition, as Faust's changelog recovery writes (`apply_changelog_batch`).
            Nothing reads the store meanwhile (the caller does not await inside)."""
            self._pending = {}
            try:
                yield
            finally:
                pending, self._pending = self._pending, None
                for partition, batch in pending.items():
                    self._db_for_partition(partition).write(batch)

        def _del(self, key: bytes) -> None:
            partition: int = cast(AwaitedTable, self.table).partition_of[key.decode()]
            self._key_index.pop(key, None)
            if self._pending is None:
                self._db_for_partition(partition).delete(key)
                return
            batch = self._pending.get(partition)
            if batch is None:
                batch = self._pending[partition] = WriteBatch(raw_mode=True)
            batch.delete(key)

        def _get(self, key: bytes) -> bytes | None:
            self._refuse_read_in_batch()
            value: bytes | None = super()._get(key)
            return value

        def _contains(self, key: bytes) -> bool:
            self._refuse_read_in_batch()
            return bool(super()._contains(key))

        def memory(self) -> dict[str, int]:
            """RocksDB's own memory in bytes, summed over the table's open partitions."""
            totals = dict.fromkeys(ROCKSDB_MEMORY, 0)
            for db in self._dbs.values():
                for kind, name in ROCKSDB_MEMORY.items():
                    totals[kind] += db.property_int_value(name) or 0
            return totals

        def _refuse_read_in_batch(self) -> None:
            if self._pending is not None:  # RocksDB would answer without the pending puts
                raise RuntimeError("the store is read while its puts wait in a batch")

    return PartitionedRocksStore


def _PartitionedRocksStore(*args: Any, **kwargs: Any) -> Any:  # noqa: N802
    return _rocks_store_class()(*args, **kwargs)


class HoleReader:
    """Reads a range of a partition directly from Kafka, for the messages Faust skipped."""

    def __init__(self, kafka: Settings) -> None:
        self.kafka = kafka
        self._consumer: Any = None

    def _client(self) -> Any:
        if self._consumer is None:
            self._consumer = self._new_consumer()
        return self._consumer

    def _new_consumer(self) -> Any:
        from confluent_kafka import Consumer

        options: dict[str, Any] = {
            "group.id": f"{self.kafka.topic_prefix}scheduler-holes",  # never joined
            "enable.auto.commit": False,
        }
        return Consumer(librdkafka_config(self.kafka, **options))

    def first_offset(self, topic: str, partition: int) -> int:
        """The partition's earliest offset still in the log."""
        from confluent_kafka import TopicPartition

        low, _ = retry_transient(
            lambda: self._client().get_watermark_offsets(TopicPartition(topic, partition), 30),
            f"first offset of {topic}[{partition}]",
            timeout=600,
        )
        return int(low)

    def last_value(self, topic: str, partition: int) -> str:
        """A partition's last record as text, its offset and value (blocking; for the log)."""
        from confluent_kafka import TopicPartition

        low, end = self._client().get_watermark_offsets(TopicPartition(topic, partition), 30)
        if end <= low:
            return "none (empty)"
        last = self.read(topic, partition, end - 1, end)[0]
        return f"at offset {last.offset}: {last.value!r}"

    def read(self, topic: str, partition: int, start: int, end: int) -> list[Incoming]:
        """The messages at offsets start..end-1 (blocking; run it off the event loop).

        Each read has a consumer of its own, closed after it: nothing another read
        fetched ahead (librdkafka prefetches whole batches) can reach this one, and
        a message of another partition or outside the range is never taken for one
        of it. A read that waits (the broker away) says so every `HOLE_LOG_S`."""
        from confluent_kafka import TopicPartition

        consumer = self._new_consumer()
        found: list[Incoming] = []
        began = time.monotonic()
        deadline, report = began + 600, began + HOLE_LOG_S  # the broker may be away a while
        try:
            consumer.assign([TopicPartition(topic, partition, start)])
            while (not found or found[-1].offset < end - 1) and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if time.monotonic() > report:
                    report += HOLE_LOG_S
                    log.warning(
                        "still reading offsets %d..%d of %s[%d] after %.0f s: %d of %d read",
                        start, end - 1, topic, partition, time.monotonic() - began,
                        len(found), end - start,
                    )  # fmt: skip
                if message is None or message.error() or not _within(message, topic, partition):
                    continue
                offset = message.offset()
                if start <= offset < end and (not found or offset > found[-1].offset):
                    found.append(Incoming(topic, partition, offset, message.key(), message.value()))
        finally:
            consumer.close()
        if not found or found[-1].offset < end - 1:
            raise RuntimeError(f"could not read offsets {start}..{end - 1} of {topic}[{partition}]")
        return found


HOLE_LOG_S = 30.0


def _within(message: Any, topic: str, partition: int) -> bool:
    return bool(message.topic() == topic and message.partition() == partition)


class Output:
    """The service's librdkafka producer, for its outputs and its tables' changelog
    records: records are handed over without waiting and `delivered()` waits, off
    the event loop, until the broker has acknowledged them all.

    Messages wait for the broker as long as it is away (`message.timeout.ms` 0:
    no local timeout), so a broker restart only delays the outputs. A dead
    letter the broker refuses for good is logged and counted, and the service
    goes on; any other output it refuses is fatal (`OutputError`).
    """

    def __init__(self, kafka: Settings, dead_letter_topic: str) -> None:
        self.kafka = kafka
        self.dead_letter_topic = dead_letter_topic
        self.errors: list[str] = []
        self.dead_letters_failed = 0

    @functools.cached_property
    def producer(self) -> Any:
        """Made at the first output, after the preflight: a client refused there never
        opens one (a librdkafka handle, its threads calling the Python `logger`, left
        to the interpreter's exit once crashed a refused scheduler with SIGSEGV)."""
        from confluent_kafka import Producer

        return Producer(
            producer_config(self.kafka, **{"linger.ms": 2, "message.timeout.ms": 0, "logger": log})
        )

    def send(
        self,
        topic: str,
        key: bytes,
        value: bytes | None,  # None: a tombstone (a released job's changelog record)
        partition: int = -1,  # librdkafka's "unassigned": its partitioner picks
        on_delivery: Any = None,
    ) -> None:
        callback = on_delivery or self._delivered
        while True:
            try:
                self.producer.produce(
                    topic, value=value, key=key, partition=partition, on_delivery=callback
                )
                return
            except BufferError:  # the local queue is full: let librdkafka send some
                self.producer.poll(0.05)

    def _delivered(self, error: Any, message: Any) -> None:
        if error is None:
            return
        if message.topic() == self.dead_letter_topic:
            self.dead_letters_failed += 1
            log.error(
                "a dead letter (key %r) could not be written, dropped: %s", message.key(), error
            )
        else:
            self.errors.append(f"{message.topic()}: {error}")

    async def delivered(self) -> None:
        loop = asyncio.get_running_loop()
        waited = 0.0
        while remaining := await loop.run_in_executor(None, self.producer.flush, 10.0):
            waited += 10.0
            log.warning("%d outputs still wait for the broker after %.0f s", remaining, waited)
        if self.errors:
            raise OutputError(f"the broker refused outputs: {self.errors[:3]}")


class OutputError(RuntimeError):
    """The broker refused an output for good: the batch cannot be completed."""


@dataclass
class SchedulerService:
    settings: ServiceSettings
    codec: Codec
    app: faust.App
    table: AwaitedTable  # job id -> Stored
    folded: AwaitedTable  # job-events partition -> offset through which all is folded and stored
    processor: Processor
    output: Output
    metrics: Metrics = field(default_factory=Metrics)
    due: dict[str, int] = field(default_factory=dict)  # job -> earliest timer not yet ticked
    ready: bool = False
    holes: HoleReader | None = None
    next_offset: dict[int, int] = field(default_factory=dict)  # partition -> offset to fold next
    # The jobs' states as last read or written, so that the table is read and
    # decoded once per job, not once per batch; the `settings.state_cache_jobs`
    # most recently used (the table holds them all); emptied when partitions are
    # revoked (another worker may fold them meanwhile).
    states: OrderedDict[str, Stored] = field(default_factory=OrderedDict)
    generation: int = 0  # counts revocations: a rescan in progress stops at the next one

    async def process_batch(self, events: list[Any]) -> None:
        staged: dict[str, Stored | None] = {}  # None: the job's state is released
        outgoing: list[Outgoing] = []
        messages = [
            Incoming(m.topic, m.partition, m.offset, m.key, m.value)
            for m in (event.message for event in events)
        ]
        for incoming in await self._in_order(messages):
            job_id = self.processor.job_of(incoming)
            stored = (
                staged.get(job_id)
                if job_id in staged
                else (self._stored(job_id) if job_id else None)
            )
            started = time.perf_counter()
            outcome = self.processor.process(incoming, stored)
            self._count(outcome, time.perf_counter() - started)
            outgoing.extend(outcome.outgoing)
            if outcome.job_id is not None and (outcome.stored is not None or outcome.released):
                staged[outcome.job_id] = outcome.stored
                self.table.partition_of[outcome.job_id] = incoming.partition
        # Handed to librdkafka together after the fold, not one by one between folds:
        # a record enqueued on a partition whose queue the broker thread has
        # drained wakes that thread with a write() to its wake-up pipe, one system
        # call per record when they come ~0.2 ms apart (see docs/scheduler-service.md).
        for out in outgoing:
            self.output.send(out.topic, out.key, out.value)
        await self.output.delivered()  # every output acknowledged before any state is stored
        with self.table.batched():
            for job_id, stored in staged.items():
                if stored is not None:
                    self.table[job_id] = stored
                    self._keep(job_id, stored)
                    self._note_due(job_id, stored)
        await self.table.acknowledged()
        for partition in {m.partition for m in messages}:
            key = str(partition)
            self.folded.partition_of[key] = partition
            self.folded[key] = self.next_offset[partition] - 1
        await self.folded.acknowledged()  # the batch's offsets are committed after this
        await self._release([job_id for job_id, stored in staged.items() if stored is None])

    def _stored(self, job_id: str) -> Stored | None:
        stored = self.states.get(job_id)
        if stored is not None:
            self.states.move_to_end(job_id)
            return stored
        stored = self.table.get(job_id)
        if stored is not None:
            self._keep(job_id, stored)
        return stored

    async def _release(self, jobs: list[str]) -> None:
        """Delete finished jobs' states (processor.Outcome.released): from the table,
        whose changelog gets a tombstone, and from what the worker keeps of them.

        Only once the batch's offsets are in the `folded` table: a crash before
        then folds the batch again onto the state as it was, and a crash after
        the offsets but before the tombstone leaves the state as it was too (its
        release timer fires again at the restart's rescan). Either way no event
        of the job is folded into a job that is gone."""
        if not jobs:
            return
        for job_id in jobs:
            with contextlib.suppress(KeyError):  # a job created and released in this batch
                del self.table[job_id]
            self.states.pop(job_id, None)
            self.due.pop(job_id, None)
        await self.table.acknowledged()
        for job_id in jobs:  # its tombstone is written: nothing of the job is kept
            self.table.partition_of.pop(job_id, None)
        self.metrics.jobs_released += len(jobs)

    def _keep(self, job_id: str, stored: Stored) -> None:
        """Remember a state the table holds too; forget the least recently used
        beyond the bound (only after the table has it: `states` is never the only copy)."""
        states = self.states
        states[job_id] = stored
        states.move_to_end(job_id)
        while len(states) > self.settings.state_cache_jobs:
            states.popitem(last=False)

    async def _in_order(self, messages: list[Incoming]) -> list[Incoming]:
        """The messages to fold: every partition's skipped offsets read in, and
        the messages already folded and stored (Faust's committed offset lags the
        `folded` table's after a crash) left out. The per-job offset guard alone
        would not do: a released job has no state left to remember its offset by,
        so its old events would fold into a new job."""
        result: list[Incoming] = []
        for message in messages:
            expected = await self._expected(message.topic, message.partition)
            if message.offset < expected:
                self.metrics.events_in += 1
                self.metrics.events_skipped += 1
                continue
            if message.offset > expected:
                log.warning(
                    "Faust skipped offsets %d..%d of %s[%d]; reading them from Kafka (%s)",
                    expected,
                    message.offset - 1,
                    message.topic,
                    message.partition,
                    await self._why_skipped(message.topic, message.partition),
                )
                assert self.holes is not None
                loop = asyncio.get_running_loop()
                missing = await loop.run_in_executor(
                    None,
                    self.holes.read,
                    message.topic,
                    message.partition,
                    expected,
                    message.offset,
                )
                self.metrics.holes_filled += len(missing)
                result.extend(missing)
            result.append(message)
            self.next_offset[message.partition] = max(expected, message.offset + 1)
        return result

    async def _why_skipped(self, topic: str, partition: int) -> str:
        """For the log, where Faust delivers past the expected offset: the group's
        committed offset as Faust's consumer holds it, what the `folded` table holds,
        and the last record of its changelog read from Kafka. A committed offset ahead
        of a changelog that agrees with the table means a commit got ahead of the
        folding; a changelog ahead of the table, a replay that missed its tail."""
        committed = getattr(self.app.consumer, "_committed_offset", {})  # Faust's, private
        try:
            assert self.holes is not None
            loop = asyncio.get_running_loop()
            changelog = await loop.run_in_executor(
                None, self.holes.last_value, self.folded.changelog_topic_name, partition
            )
        except Exception as error:  # a diagnostic is never a reason to stop
            changelog = f"unread: {type(error).__name__}: {error}"
        return (
            f"the group's committed offset {committed.get(TP(topic, partition))}; "
            f"the folded table says through {self.folded.get(str(partition))}, "
            f"its changelog's last record {changelog}"
        )

    async def _expected(self, topic: str, partition: int) -> int:
        """The next offset to fold: after the last folded one, or after the one
        through which all was stored; for a partition never folded, its earliest."""
        if partition not in self.next_offset:
            folded = self.folded.get(str(partition))
            if folded is not None:
                self.next_offset[partition] = folded + 1
            else:
                assert self.holes is not None
                loop = asyncio.get_running_loop()
                first = await loop.run_in_executor(None, self.holes.first_offset, topic, partition)
                self.next_offset[partition] = first
        return self.next_offset[partition]

    def _count(self, outcome: Any, seconds: float) -> None:
        metrics = self.metrics
        metrics.events_in += 1
        metrics.events_skipped += int(outcome.skipped)
        metrics.rescale_records_out += outcome.rescale_records
        metrics.decisions_out += outcome.decisions
        metrics.dead_letters += outcome.dead_letters
        if not outcome.skipped:
            metrics.observe_fold(seconds)

    def _note_due(self, job_id: str, stored: Stored) -> None:
        due = stored.job.wall_clock_due()
        if due is None:
            self.due.pop(job_id, None)
        else:
            self.due[job_id] = due

    async def tick(self) -> None:
        """Write TimerFired for every job whose earliest timer is due on the wall clock."""
        now = int(time.time() * 1000)
        ripe = [(job_id, due) for job_id, due in self.due.items() if due <= now]
        for job_id, due in ripe:
            value = self.codec.encode(r.TIMER_FIRED, {"jobId": job_id, "timestamp": due})
            self.output.send(self.settings.kafka.topics.job_events, job_id.encode(), value)
            if self.due.get(job_id) == due:  # a batch may have noted a new due time meanwhile
                del self.due[job_id]
            self.metrics.timer_ticks_sent += 1

    async def rescan(self) -> None:
        """After a (re)start, find the jobs with pending timers in the recovered table.

        With a RocksDB-backed table every state is read and decoded here (for
        20,000 jobs, seconds): it goes in slices, giving the event loop back
        between them, so the worker folds meanwhile; a revocation stops it (the
        next assignment starts it again)."""
        generation = self.generation
        started = time.monotonic()
        jobs = list(self.table.keys())
        for index, job_id in enumerate(jobs):
            if index % 100 == 0:
                await asyncio.sleep(0)
                if self.generation != generation:
                    return
            stored = self._stored(job_id)
            if stored is not None:
                self._note_due(job_id, stored)
        log.info("timers rescanned: %d jobs in %.1f s", len(jobs), time.monotonic() - started)


def table_dir(settings: ServiceSettings, app_id: str | None = None) -> Path:
    """Faust's data directory for one app: `--data-dir/<app id>`.

    Faust names a table's RocksDB files by the table alone (`v1/tables/jobs-0.db`),
    and a table's keys are whatever its file holds: an app of another topic prefix
    started on the same --data-dir would take the first app's jobs for its own.
    One directory per app id keeps them apart (Faust's own default is `<app id>-data`)."""
    return settings.data_dir / (app_id or settings.app_id)


def create_app(
    settings: ServiceSettings, app_id: str | None = None, stock: bool = False
) -> faust.App:
    """The Faust app with the service's settings (also used by the bench's bare agent).

    It is `fastpath.App`: Faust with a cheaper per-message hand-over from its
    consumer to its streams (see fastpath.py), whose partition assignment never drops
    a topic it declared (assignor.py); `stock` gives plain `faust.App`."""
    kafka = settings.kafka
    datadir = table_dir(settings, app_id)
    datadir.mkdir(parents=True, exist_ok=True)
    extra: dict[str, Any] = {}
    if not stock and settings.recovery_stall_timeout_s > 0:
        watch = fastpath.RecoveryWatch(settings.recovery_stall_timeout_s)
        extra["recovery_watch"] = watch
        extra["on_recovery_stalled"] = functools.partial(_recovery_stalled, kafka, watch)
    if not stock:
        extra["PartitionAssignor"] = DeclaredPartitionAssignor
    app_class = faust.App if stock else fastpath.App
    return app_class(
        app_id or settings.app_id,
        broker=[f"kafka://{server}" for server in kafka.bootstrap_servers.split(",")],
        broker_credentials=_credentials(kafka),
        store=settings.store,
        datadir=str(datadir),
        topic_partitions=JOB_EVENTS.partitions,
        topic_replication_factor=settings.replication_factor,
        topic_allow_declare=True,
        table_standby_replicas=0,
        broker_session_timeout=settings.session_timeout_s,
        broker_heartbeat_interval=max(0.5, settings.session_timeout_s / 6),
        consumer_group_instance_id=settings.group_instance_id,
        consumer_auto_offset_reset="earliest",
        producer_acks=-1,
        web_enabled=True,
        web_bind=settings.web_host,
        web_host=settings.web_host,
        web_port=settings.web_port,
        loghandlers=[],
        **extra,
    )


def job_events_topic(app: faust.App, kafka: Settings) -> faust.TopicT:
    """The job-events topic as raw bytes: keys and values are decoded by the processor."""
    return app.topic(
        kafka.topics.job_events,
        key_serializer="raw",
        value_serializer="raw",
        partitions=JOB_EVENTS.partitions,
    )


def create_service(settings: ServiceSettings, codec: Codec) -> SchedulerService:
    """Build the Faust app, its table, agent, timer task and web pages."""
    kafka = settings.kafka
    app = create_app(settings)
    table = _awaited_table(
        app,
        "jobs",
        STORED_CODEC,
        "Each job's adaptive-scheduler state and its last event's offset.",
    )
    folded = _awaited_table(
        app,
        "folded",
        OFFSET_CODEC,
        "Per job-events partition, the offset through which all is folded.",
    )
    topic = job_events_topic(app, kafka)
    processor = Processor(
        codec, kafka.topics, settings.defaults, snapshot_interval_ms=settings.snapshot_interval_ms
    )
    output = Output(kafka, kafka.topics.dead_letters)
    table.output = folded.output = output
    service = SchedulerService(settings, codec, app, table, folded, processor, output)
    service.holes = HoleReader(kafka)
    _wire(service, topic)
    return service


ROCKSDB_OPTIONS = {
    "write_buffer_size": 4 * 2**20,
    "max_write_buffer_number": 2,
    "target_file_size_base": 4 * 2**20,
    "block_cache_size": 8 * 2**20,
}
"""Each table partition's RocksDB sizes. Faust's defaults (a 64 MiB write buffer, up to 3,
and a 2 GiB block cache, per partition: 12 databases here) let a worker grow with every
state it writes until its memtables flush: +10 MiB a simulated day at 1,000 jobs in the
month benchmark (docs/operations.md), flushing only after ~45 days at ~0.8 GiB. A job's
state is a few KB, and the worker keeps the ones it uses decoded (`--state-cache`), so
small buffers and a small cache cost it nothing it reads often."""


ROCKSDB_MEMORY = {
    "block_cache": "rocksdb.block-cache-usage",
    "memtables": "rocksdb.cur-size-all-mem-tables",
    "table_readers": "rocksdb.estimate-table-readers-mem",
}
"""What `/metrics` reports of each table's RocksDB memory (per kind: RocksDB's property).
Each is bounded by ROCKSDB_OPTIONS per partition, except the table readers (index and
filter blocks), which grow with the data stored."""


def _awaited_table(app: faust.App, name: str, value_codec: str, help_text: str) -> AwaitedTable:
    table = AwaitedTable(
        app,
        name=name,
        partitions=JOB_EVENTS.partitions,
        key_type=str,
        beacon=app.tables.beacon,
        help=help_text,
        value_codec=value_codec,
        options=dict(ROCKSDB_OPTIONS),  # Faust pops keys from it: a copy per table
    )
    return cast(AwaitedTable, app.tables.add(table))


def _wire(service: SchedulerService, topic: faust.TopicT) -> None:
    app, settings = service.app, service.settings

    @app.agent(topic, name="fold-job-events")
    async def fold(stream: Any) -> None:  # faust's stubs lack take_events
        async for events in stream.take_events(settings.batch_size, within=settings.batch_window_s):
            try:
                await service.process_batch(list(events))
            except BaseException:
                # Faust would acknowledge the batch and restart the agent, skipping it.
                # Stop at once instead, committing nothing: the restarted worker folds
                # the batch again from the last committed offset.
                _stop_without_commit("a batch could not be processed")

    @app.timer(settings.tick_interval_s)  # type: ignore[untyped-decorator]
    async def ticks() -> None:
        recovery = cast(Any, app.tables).recovery
        if not service.ready and recovery.completed.is_set() and not app.rebalancing:
            service.ready = True
            log.info(
                "scheduler ready: %d jobs in the table, consuming %s, web on http://%s:%d",
                len(service.table),
                settings.kafka.topics.job_events,
                settings.web_host,
                settings.web_port,
            )
            await service.rescan()
        if service.ready:
            await service.tick()
            try:
                await service.output.delivered()
            except OutputError:
                _stop_without_commit("timer ticks could not be written")

    @app.page("/health")
    async def health(web: Any, request: Any) -> Any:
        ready = service.ready and not app.rebalancing
        body = {
            "status": "ready" if ready else "starting",
            "jobs": len(service.states),
            "eventsIn": service.metrics.events_in,
        }
        return web.json(body, status=200 if ready else 503)

    @app.page("/metrics")
    async def metrics(web: Any, request: Any) -> Any:
        service.metrics.dead_letters_failed = service.output.dead_letters_failed
        stores = {}
        for table in (service.table, service.folded):
            memory = getattr(table.data, "memory", None)  # a RocksDB store's (not memory://)
            if memory is not None:
                stores[table.name] = memory()
        text = service.metrics.prometheus(len(service.states), stores)
        return web.text(text, content_type="text/plain")

    @app.on_partitions_revoked.connect  # type: ignore[arg-type]
    async def revoked(app_: Any, revoked: Any, **_: Any) -> None:
        service.ready = False  # rescan the table once recovery of the new assignment completes
        service.next_offset.clear()  # other workers may have folded these partitions meanwhile
        service.states.clear()
        service.generation += 1


async def _recovery_stalled(
    kafka: Settings, watch: fastpath.RecoveryWatch, stalled_s: float, remaining: int
) -> None:
    """Exit, to be started again, if the broker answers; else wait for it (as always)."""
    loop = asyncio.get_running_loop()
    if not await loop.run_in_executor(None, _broker_answers, kafka):
        log.warning(
            "recovery: %d changelog records still to read, none read for %.0f s, and the "
            "broker does not answer; waiting for it",
            remaining,
            stalled_s,
        )
        watch.restart()
        return
    log.critical(
        "recovery stalled: %d changelog records still to read and none read for %.0f s "
        "while the broker answers; exiting (code %d) so that the worker is started again "
        "and recovers afresh",
        remaining,
        stalled_s,
        EXIT_RECOVERY_STALLED,
    )
    logging.shutdown()
    os._exit(EXIT_RECOVERY_STALLED)


def _broker_answers(kafka: Settings) -> bool:
    """Whether the broker answers a metadata request within 10 s (blocking); a refusal
    is an answer too."""
    try:
        connect(kafka, timeout=10.0)
    except KafkaUnreachableError:
        return False
    except KafkaAccessError:
        return True
    return True


def _stop_without_commit(what: str) -> None:
    failure = sys.exc_info()[1]
    if failure is not None and NO_SPACE in str(failure):
        # RocksDB's write of the batch: one line says it all (contracts/disk.py)
        log.critical(
            "%s: the disk of --data-dir is full (%s); stopping without commit: started "
            "again, the worker waits for room and folds the batch again",
            what,
            str(failure).splitlines()[0],
        )
    else:
        log.critical("%s; stopping without commit", what, exc_info=True)
    logging.shutdown()
    os._exit(EXIT_BATCH_FAILED)


def _credentials(kafka: Settings) -> faust.types.auth.CredentialsArg | None:
    security = kafka.security
    context = None
    if security.uses_tls:
        context = ssl.create_default_context(cafile=security.ssl_ca_location)
        if security.ssl_certificate_location:
            context.load_cert_chain(
                security.ssl_certificate_location,
                security.ssl_key_location,
                security.ssl_key_password.reveal() if security.ssl_key_password else None,
            )
    if security.uses_sasl:
        assert security.sasl_password is not None
        return faust.SASLCredentials(
            username=security.sasl_username,
            password=security.sasl_password.reveal(),
            mechanism=security.sasl_mechanism,
            ssl_context=context,
        )
    return faust.SSLCredentials(context) if context is not None else None
