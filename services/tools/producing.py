"""`scalefold produce`'s imperative shell: send the events, then wait for their verdicts.

Before the first event is sent, a consumer is assigned to the ends of the decisions
and dead-letters topics, so every answer to what follows is read, whatever the
clocks say. While a paced log is sent it keeps reading (and prints a progress line
every `PROGRESS_S` for a long file); after the last event it waits at most
`--wait` seconds for the rest (verdicts.py matches them by partition and offset).

`scalefold cluster` reuses the Watch: it also follows job-events from their ends, for
the events the actuator tags with the request's id (a Kafka header), and judges those.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from services.contracts import Codec, DecodeError
from services.contracts.settings import Settings
from services.tools.verdicts import Judgement, Observed, Sent, judge, progress, summary

PROGRESS_S = 5.0
SWEEP_S = 2.0  # at most, to read the dead letters to their end once all answers are in
POLL_S = 0.2


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Watch:
    """A consumer of the scheduler's answers, from the ends the topics had at its start."""

    def __init__(
        self, settings: Settings, codec: Codec, observed: Observed, request: str | None = None
    ) -> None:
        from confluent_kafka import Consumer, TopicPartition

        from services.contracts.kafka import librdkafka_config

        topics = settings.topics
        self.codec, self.observed = codec, observed
        self.dead_letters, self.job_events = topics.dead_letters, topics.job_events
        # `scalefold cluster`: the job events the actuator tags with the request's id
        self.request = request.encode() if request else None
        self.tagged: list[Sent] = []
        self.consumer = Consumer(
            librdkafka_config(
                settings,
                **{
                    "group.id": f"{topics.own('cli')}-produce-{uuid.uuid4().hex[:8]}",
                    "enable.auto.commit": False,  # assigned, never a group member
                },
            )
        )
        self.next: dict[tuple[str, int], int] = {}  # (topic, partition) -> offset to read next
        followed = [topics.decisions, topics.dead_letters] + (
            [topics.job_events] if request else []
        )
        for name in followed:
            listed = self.consumer.list_topics(name, timeout=10).topics[name].partitions
            for partition in sorted(listed):
                self.next[(name, partition)] = self._end(name, partition)
        self.consumer.assign([TopicPartition(t, p, at) for (t, p), at in self.next.items()])

    def _end(self, topic: str, partition: int) -> int:
        from confluent_kafka import TopicPartition

        _, high = self.consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(high)

    def poll(self, timeout: float) -> None:
        """Read what has arrived (waiting at most `timeout` for the first record)."""
        for message in self.consumer.consume(500, timeout):
            topic, partition, offset = message.topic(), message.partition(), message.offset()
            if message.error() or topic is None or partition is None or offset is None:
                continue
            self.next[(topic, partition)] = offset + 1
            if topic == self.job_events:
                self._tagged(message, partition, offset)
                continue
            try:
                record = self.codec.decode(message.value() or b"").record
            except DecodeError:  # not ours to judge: the topic's own readers report it
                continue
            if topic == self.dead_letters:
                self.observed.dead_letter(record)
            else:
                self.observed.decisions(record)

    def _tagged(self, message: Any, partition: int, offset: int) -> None:
        """Keep a job event the actuator emitted for `request` (its header says so)."""
        from services.actuator.cluster import REQUEST_HEADER
        from services.contracts import records as r

        if (REQUEST_HEADER, self.request) not in (message.headers() or []):
            return
        try:
            decoded = self.codec.decode(message.value() or b"")
        except DecodeError:
            return
        job = str(decoded.record.get("jobId"))
        name = r.short_name(decoded.schema)
        self.tagged.append(Sent("the cluster", name, job, partition, offset))

    def sweep(self, deadline: float) -> None:
        """Read the dead letters up to the end they have now (see verdicts.py)."""
        ends = {key: self._end(*key) for key in self.next if key[0] == self.dead_letters}
        while time.monotonic() < deadline and any(self.next[k] < end for k, end in ends.items()):
            self.poll(POLL_S)

    def close(self) -> None:
        self.consumer.close()


def await_verdicts(watch: Watch, sent: list[Sent], wait_s: float) -> Judgement:
    """Wait at most `wait_s` for every event's verdict, saying so when it takes a while."""
    judgement = judge(sent, watch.observed)
    if judgement.open:
        say(
            f"waiting up to {wait_s:g} s for the scheduler's verdict on "
            f"{len(judgement.open)} of {len(sent)} event(s) (--no-wait skips this)"
        )
    deadline = time.monotonic() + wait_s
    while judgement.open and time.monotonic() < deadline:
        watch.poll(POLL_S)
        judgement = judge(sent, watch.observed)
    watch.sweep(time.monotonic() + SWEEP_S)
    return judge(sent, watch.observed)


def await_outcome(watch: Watch, expected: int, wait_s: float) -> Judgement:
    """`scalefold cluster`: wait at most `wait_s` until the `expected` events the actuator
    tagged with the request are on job-events and the scheduler has judged each."""
    deadline = time.monotonic() + wait_s
    judgement = judge(watch.tagged, watch.observed)
    while (len(watch.tagged) < expected or judgement.open) and time.monotonic() < deadline:
        watch.poll(POLL_S)
        judgement = judge(watch.tagged, watch.observed)
    watch.sweep(time.monotonic() + SWEEP_S)
    return judge(watch.tagged, watch.observed)


class Progress:
    """A line every `PROGRESS_S` while a long file is sent."""

    def __init__(self, total: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self.clock = total, clock
        self.next = clock() + PROGRESS_S

    def tick(self, sent: list[Sent], observed: Observed | None) -> None:
        if self.clock() < self.next:
            return
        self.next = self.clock() + PROGRESS_S
        judgement = judge(sent, observed) if observed else Judgement([], [], [])
        say(progress(len(sent), self.total, judgement))


def report(judgement: Judgement, wait_s: float) -> int:
    """Print the verdicts; 1 if the scheduler rejected any event."""
    for line in summary(judgement, wait_s):
        say(line)
    return 1 if judgement.rejected else 0


def send(
    settings: Settings,
    codec: Codec,
    records: list[tuple[str, dict[str, Any]]],
    *,
    origins: list[str],
    waits: list[float],
    wait_s: float | None,
) -> int:
    """Produce the records (paced by `waits` if given), then report their verdicts
    unless `wait_s` is None; the exit status."""
    topic = settings.topics.job_events
    observed = Observed(topic, frozenset(record["jobId"] for _, record in records))
    watch = open_watch(settings, codec, observed) if wait_s is not None else None
    try:
        sender = Sender(settings, records, origins)
        status = sender.run(codec, waits, watch)
        if watch is None or wait_s is None or not sender.sent:
            return status
        in_order = [sender.sent[number] for number in sorted(sender.sent)]
        return max(status, report(await_verdicts(watch, in_order, wait_s), wait_s))
    finally:
        if watch is not None:
            watch.close()


class Sender:
    """The producer's side: each record sent, and where Kafka put it (`sent`)."""

    def __init__(
        self, settings: Settings, records: list[tuple[str, dict[str, Any]]], origins: list[str]
    ) -> None:
        from confluent_kafka import Producer

        from services.contracts.kafka import producer_config

        self.settings, self.records, self.origins = settings, records, origins
        self.topic = settings.topics.job_events
        self.producer = Producer(producer_config(settings))
        self.sent: dict[int, Sent] = {}  # by the event's number in `records`
        self.failed: list[Any] = []

    def delivered(self, number: int) -> Callable[[Any, Any], None]:
        from services.contracts import records as r
        from services.contracts.access import raise_refusal

        def done(error: Any, message: Any) -> None:
            if error is not None:
                self.failed.append(error)
                raise_refusal(error, self.settings, f"write to {self.topic}")
                return
            name, record = self.records[number]
            self.sent[number] = Sent(
                self.origins[number],
                r.short_name(name),
                record["jobId"],
                message.partition(),
                message.offset(),
            )

        return done

    def run(self, codec: Codec, waits: list[float], watch: Watch | None) -> int:
        """Send every record, paced by `waits` if given; 1 if any was not delivered."""
        from services.contracts.kafka import flush

        ticker = Progress(len(self.records))
        if waits and waits[-1] > PROGRESS_S:  # a paced log takes its time: say how long
            say(f"sending {len(self.records)} event(s) as their times come, over {waits[-1]:.0f} s")
        started = time.monotonic()
        for number, (name, record) in enumerate(self.records):
            if waits:  # paced: send when the event's time comes, reading answers meanwhile
                _wait_until(self.producer, watch, started + waits[number])
            self.producer.produce(
                self.topic,
                key=record["jobId"].encode(),
                value=codec.encode(name, record),
                on_delivery=self.delivered(number),
            )
            self.producer.poll(0)
            if waits:
                flush(self.producer, 30)
            ticker.tick(list(self.sent.values()), watch.observed if watch else None)
        left = flush(self.producer, 30)
        say(f"produced {len(self.records) - left - len(self.failed)} event(s) to {self.topic}")
        if self.failed:
            say(f"scalefold produce: {len(self.failed)} not delivered: {self.failed[0].str()}")
        return 0 if left == 0 and not self.failed else 1


def open_watch(
    settings: Settings, codec: Codec, observed: Observed, request: str | None = None
) -> Watch | None:
    """A Watch, or None (said in one line) when the verdicts cannot be read: the events
    are worth sending all the same."""
    from confluent_kafka import KafkaException

    try:
        return Watch(settings, codec, observed, request)
    except KafkaException as error:
        say(f"cannot read the scheduler's verdicts ({error.args[0].str()}); not waiting for them")
        return None


def _wait_until(producer: Any, watch: Watch | None, moment: float) -> None:
    """Serve the producer's callbacks (and read answers) until the clock reaches `moment`."""
    while (left := moment - time.monotonic()) > 0:
        producer.poll(0)
        if watch is not None:
            watch.poll(min(left, POLL_S))
        else:
            producer.poll(min(left, POLL_S))
