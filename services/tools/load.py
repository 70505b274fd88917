"""`scalefold load`: a rate trace replayed onto the workload job's topic.

A trace is a rate over time, records a second, given as points (seconds from the start,
rate) joined by straight lines: a step is two points at one instant, a ramp two points
apart; the rate after the last point is the last rate, and the trace ends there. A file
holds one point a line (`SECONDS RATE`, `#` comments); four shapes are built in, each
scaled to `--peak` and `--duration`: `steps` (a quarter, the whole, a half, a quarter of
the peak), `ramp` (a tenth up to the peak), `sine` (two periods between a tenth and the
peak: days, compressed) and `burst` (a third of the peak, the peak for a tenth of the
time in the middle).

The records are text lines `k<n> <sequence> <epoch ms>`, padded to `--size` bytes and
keyed by `k<n>` (`--keys` keys, in turn), the input of deploy/flink/workload. The size
matters to the backlog: what Flink's network buffers and its source's queue hold of a
burst (several thousand records of tens of bytes) is not in Kafka, so not in the
source's `pendingRecords` either. The producer sends, every 50 ms,
what the trace's integral says is due by then: a late tick sends more, so the count
follows the trace, not the machine's timing. The trace's arithmetic is pure; `run` is
the shell.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from services.contracts import Settings

SHAPES = ("steps", "ramp", "sine", "burst")
TICK_S = 0.05


class TraceError(ValueError):
    """A trace that cannot be read; says where."""


@dataclass(frozen=True)
class Trace:
    """Points (seconds, records a second), by time, joined by straight lines."""

    points: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if not self.points:
            raise TraceError("a trace needs at least one point")
        times = [t for t, _ in self.points]
        if times != sorted(times) or times[0] < 0:
            raise TraceError("a trace's times must start at 0 or later and never go back")
        if any(rate < 0 or not math.isfinite(rate) for _, rate in self.points):
            raise TraceError("a trace's rates must be finite and 0 or more")

    @property
    def duration(self) -> float:
        return self.points[-1][0]

    def rate(self, at: float) -> float:
        """The rate at `at` seconds (the last point's at an instant two points share)."""
        points = self.points
        if at < points[0][0]:
            return points[0][1]
        for (t0, r0), (t1, r1) in pairwise(points):
            if t0 <= at < t1:
                return r0 + (r1 - r0) * (at - t0) / (t1 - t0)
        return points[-1][1]

    def records_by(self, at: float) -> float:
        """How many records the trace has sent by `at` seconds: its integral from 0."""
        points = ((0.0, self.points[0][1]), *self.points)
        total = 0.0
        for (t0, r0), (t1, r1) in pairwise(points):
            if at <= t0:
                return total
            end = min(at, t1)
            if t1 > t0:
                r_end = r0 + (r1 - r0) * (end - t0) / (t1 - t0)
                total += (r0 + r_end) / 2 * (end - t0)
        if at > points[-1][0]:
            total += points[-1][1] * (at - points[-1][0])
        return total


def parse(text: str, where: str = "the trace") -> Trace:
    """A trace file's points (`SECONDS RATE` a line, `#` comments)."""
    points: list[tuple[float, float]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        try:
            if len(words) != 2:
                raise ValueError("two numbers expected")
            points.append((float(words[0]), float(words[1])))
        except ValueError as error:
            raise TraceError(f"{where}, line {number}: {line.strip()!r}: {error}") from None
    try:
        return Trace(tuple(points))
    except TraceError as error:
        raise TraceError(f"{where}: {error}") from None


def shape(name: str, peak: float, duration: float) -> Trace:
    """A built-in trace (the module doc), scaled to `peak` records a second and `duration`
    seconds."""
    d, p = duration, peak
    if name == "steps":
        levels = (0.25, 1.0, 0.5, 0.25)
        points = []
        for index, level in enumerate(levels):
            points += [(d * index / 4, p * level), (d * (index + 1) / 4, p * level)]
        return Trace(tuple(points))
    if name == "ramp":
        return Trace(((0.0, p * 0.1), (d, p)))
    if name == "sine":
        samples = 96
        low, high = p * 0.1, p
        return Trace(
            tuple(
                (
                    d * i / samples,
                    low + (high - low) * (1 - math.cos(4 * math.pi * i / samples)) / 2,
                )
                for i in range(samples + 1)
            )
        )
    if name == "burst":
        base = p / 3
        return Trace(
            (
                (0.0, base),
                (d * 0.45, base),
                (d * 0.45, p),
                (d * 0.55, p),
                (d * 0.55, base),
                (d, base),
            )
        )
    raise TraceError(f"no built-in trace {name!r} (built in: {', '.join(SHAPES)})")


def load_trace(spec: str, peak: float, duration: float) -> Trace:
    """`spec`: a built-in shape's name, else a trace file's path."""
    if spec in SHAPES:
        return shape(spec, peak, duration)
    path = Path(spec)
    if not path.is_file():
        raise TraceError(f"{spec}: neither a trace file nor a built-in ({', '.join(SHAPES)})")
    return parse(path.read_text(), str(path))


def record(sequence: int, keys: int, now_ms: int, size: int = 0) -> tuple[bytes, bytes]:
    """The `sequence`th record: its key and its line, padded with `x` to `size` bytes."""
    key = f"k{sequence % keys}"
    line = f"{key} {sequence} {now_ms}"
    padding = size - len(line) - 1
    return key.encode(), (f"{line} {'x' * padding}" if padding > 0 else line).encode()


def run(
    settings: Settings,
    trace: Trace,
    topic: str,
    keys: int,
    say: Callable[[str], None],
    *,
    size: int = 0,
    every_s: float = 10.0,
    stop: Callable[[], bool] = lambda: False,
) -> int:
    """Produce `trace` onto `topic` (or its part until `stop()` says so); the number of
    records sent, each acknowledged by the broker."""
    from confluent_kafka import Producer

    from services.contracts.kafka import ensure_topics, producer_config
    from services.contracts.topics import WORKLOAD

    ensure_topics(settings, {topic: WORKLOAD})
    producer = Producer(producer_config(settings, **{"linger.ms": 20}))
    started = time.monotonic()
    sent, said = 0, started
    while True:
        elapsed = min(time.monotonic() - started, trace.duration)
        due = int(trace.records_by(elapsed)) - sent
        now_ms = int(time.time() * 1000)
        for sequence in range(sent, sent + due):
            key, value = record(sequence, keys, now_ms, size)
            _send(producer, topic, key, value)
        sent += due
        producer.poll(0)
        if time.monotonic() - said >= every_s:
            said = time.monotonic()
            say(f"{elapsed:6.0f} s  rate {trace.rate(elapsed):8.1f}/s  sent {sent}")
        if elapsed >= trace.duration or stop():
            break
        time.sleep(TICK_S)
    remaining = producer.flush(60)
    if remaining:
        raise RuntimeError(f"{remaining} records not acknowledged by the broker within 60 s")
    return sent


def _send(producer: object, topic: str, key: bytes, value: bytes) -> None:
    while True:
        try:
            producer.produce(topic, key=key, value=value)  # type: ignore[attr-defined]
            return
        except BufferError:
            producer.poll(0.05)  # type: ignore[attr-defined]


def points_text(trace: Trace) -> str:
    """The trace as a file holds it (what `--print` shows)."""
    return "".join(f"{t:g} {r:g}\n" for t, r in trace.points)
