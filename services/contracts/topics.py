"""The one place that names scalefold's Kafka topics.

Every event that can change a job's scheduler (resources, lifecycle,
requirements, configuration and the scheduler's own timer ticks) travels on one
topic, keyed by job id. The adaptive scheduler is a state machine whose output
depends on the order of its inputs, and Kafka orders records only within one
partition of one topic: separate topics per event kind would let a consumer
see a job's events in an order that no replay could reproduce.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from services.contracts import records

DEFAULT_PREFIX = "scalefold."
INFINITE = -1


class Cleanup(StrEnum):
    """Kafka's `cleanup.policy`."""

    DELETE = "delete"
    COMPACT = "compact"


@dataclass(frozen=True)
class TopicSpec:
    """A topic's shape: the part of its name after the prefix, and its settings."""

    suffix: str
    partitions: int
    key: str
    values: frozenset[str]
    cleanup: Cleanup = Cleanup.DELETE
    retention_ms: int = INFINITE
    doc: str = ""

    max_message_bytes: int | None = None
    segment_ms: int | None = None  # None: the broker's (7 days)
    compression: str | None = None  # the broker's `compression.type`; None: the producer's

    def config(self) -> dict[str, str]:
        """Topic-level configuration for the admin client."""
        config = {"cleanup.policy": str(self.cleanup), "retention.ms": str(self.retention_ms)}
        if self.max_message_bytes is not None:
            config["max.message.bytes"] = str(self.max_message_bytes)
        if self.segment_ms is not None:
            config["segment.ms"] = str(self.segment_ms)
        if self.compression is not None:
            config["compression.type"] = self.compression
        return config


@dataclass(frozen=True)
class Drift:
    """A setting an existing topic holds other than scalefold declares for it (a topic made
    by an older release keeps what that release declared: Kafka never changes it)."""

    topic: str
    key: str
    declared: str
    actual: str

    @property
    def keeps_more(self) -> bool:
        """The broker keeps the topic's records longer than declared: its disk grows."""
        if self.key == "cleanup.policy":  # compaction keeps each key's latest for ever
            return "delete" in self.declared.split(",") and "delete" not in self.actual.split(",")
        if self.key != "retention.ms":
            return False
        declared, actual = int(self.declared), int(self.actual)
        return declared != INFINITE and (actual == INFINITE or actual > declared)

    def __str__(self) -> str:
        return (
            f"topic {self.topic}: {self.key} is {_shown(self.key, self.actual)} on the "
            f"broker, scalefold declares {_shown(self.key, self.declared)}"
        )


def drifts(name: str, spec: TopicSpec, actual: dict[str, str]) -> list[Drift]:
    """Where the topic `name`'s settings on the broker (`actual`, as DescribeConfigs
    gives them) differ from what `spec` declares; a setting not described is not judged."""
    return [
        Drift(name, key, declared, actual[key])
        for key, declared in spec.config().items()
        if key in actual and actual[key] != declared
    ]


def _shown(key: str, value: str) -> str:
    if not key.endswith(".ms") or not value.lstrip("-").isdigit():
        return value
    ms = int(value)
    if ms == INFINITE:
        return "for ever (-1)"
    for unit, size in (("days", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1_000)):
        if ms >= size and ms % size == 0:
            return f"{ms // size} {unit} ({ms})"
    return f"{ms} ms"


DAY_MS = 24 * 3600 * 1000
WEEK_MS = 7 * DAY_MS
SEGMENT_MS = WEEK_MS
"""Kafka's default `segment.ms` (`log.roll.ms`), which scalefold's delete topics keep: a
record is deleted between its topic's retention and that plus a segment's time after it
was written (a segment goes when its newest record is past the retention)."""

JOB_EVENTS = TopicSpec(
    "job-events",
    partitions=6,
    key="jobId",
    values=records.INPUT_EVENTS,
    retention_ms=2 * WEEK_MS,
    doc="Every input of every job's scheduler, in the order the scheduler folds it; kept 14 "
    "days. The scheduler restarts from its changelogs and the actuator from its snapshot; "
    "`scalefold whatif`, a replay and a forecast fold a job from its first input while the "
    "topic holds it, and after that from its oldest snapshot on job-snapshots that the "
    "inputs still follow (docs/contracts.md says what a user loses).",
)

JOB_SNAPSHOTS = TopicSpec(
    "job-snapshots",
    partitions=6,
    key="jobId",
    values=frozenset({records.JOB_SNAPSHOT}),
    retention_ms=2 * WEEK_MS + SEGMENT_MS + DAY_MS,
    segment_ms=DAY_MS,
    compression="zstd",
    doc="Each job's scheduler state at the first input of every day of its clock, with the "
    "job-events offset it stands for; kept 22 days, longer than job-events keeps any "
    "record (its 14 days and a segment), so every input the log holds follows a snapshot "
    "or the job's first input. A segment a day: a snapshot goes a day after its retention. "
    "zstd on the broker: a state is JSON, ~4x smaller so (read by librdkafka only).",
)
RESCALES = TopicSpec(
    "rescales",
    partitions=6,
    key="jobId",
    values=frozenset({records.RESCALE}),
    retention_ms=WEEK_MS,
    doc="FLIP-495 rescale records: each update of an in-progress rescale and the final one. "
    "The history's tables keep every rescale for good, so the topic is their feed: kept 7 "
    "days, a week for a stopped history service to come back and read what it missed.",
)
DECISIONS = TopicSpec(
    "decisions",
    partitions=6,
    key="jobId",
    values=frozenset({records.SCHEDULER_DECISIONS}),
    retention_ms=WEEK_MS,
    doc="Each folded input's decisions and runtime requests, per job. The actuator rebuilds "
    "its cluster from its latest snapshot (actuator-snapshots, every hour by default) and "
    "what came after it, so a week's retention leaves it six days and more of slack.",
)
COMMANDS = TopicSpec(
    "commands",
    partitions=6,
    key="jobId",
    values=frozenset({records.SCALING_COMMAND}),
    retention_ms=WEEK_MS,
    doc="Scaling commands from the history service to the actuator; kept 7 days: the "
    "planner looks 48 hours back (`--plan-lookback`), so the ledger it reads at start still "
    "holds every command it could plan again, and a command a week old is not to be applied.",
)
COMMAND_OUTCOMES = TopicSpec(
    "command-outcomes",
    partitions=6,
    key="commandId",
    values=frozenset({records.COMMAND_OUTCOME}),
    retention_ms=WEEK_MS + SEGMENT_MS + DAY_MS,
    doc="One outcome per scaling command, from the actuator; kept 15 days: a command is gone "
    "from `commands` within its retention and a segment (14 days), so its outcome, which "
    "tells a restarted actuator it is done, outlives it.",
)
DEAD_LETTERS = TopicSpec(
    "dead-letters",
    partitions=1,
    key="source key",
    values=frozenset({records.DEAD_LETTER}),
    retention_ms=30 * DAY_MS,
    doc="Inputs a service could not use, with the reason; kept 30 days.",
)

ACTUATOR_SNAPSHOTS = TopicSpec(
    "actuator-snapshots",
    partitions=1,
    key="the cluster's name (embedded)",
    values=frozenset({records.ACTUATOR_SNAPSHOT}),
    cleanup=Cleanup.COMPACT,
    max_message_bytes=64 * 1024 * 1024,
    segment_ms=DAY_MS,
    doc="The actuator's embedded cluster as a rebuild from job-events and decisions up to "
    "the offsets it names computes it; compacted: the latest is where the next start reads "
    "on from. A model of 1,000 jobs is ~0.5 MiB (20,000: ~10), hence the larger records, "
    "and a segment a day (the active one is never compacted: ~24 snapshots, not 168).",
)

FLINK_RESCALES = TopicSpec(
    "flink-rescales",
    partitions=6,
    key="<cluster>.<Flink job id> (flink_job_key)",
    values=frozenset({records.FLINK_RESCALE}),
    doc="Rescales that real Flink clusters recorded (FLIP-495), each revision once, from the bridge.",
)

FLINK_BRIDGE_OFFSETS = TopicSpec(
    "flink-bridge-offsets",
    partitions=1,
    key="<cluster>.<Flink job id> (flink_job_key)",
    values=frozenset({records.FLINK_BRIDGE_OFFSET}),
    cleanup=Cleanup.COMPACT,
    doc="The Flink bridge's source offsets (Kafka Connect style): what it forwarded of each "
    "Flink job, written in one transaction with the flink-rescales records; compacted.",
)

FLINK_SIGNALS = TopicSpec(
    "flink-signals",
    partitions=6,
    key="<cluster>.<Flink job id> (flink_job_key)",
    values=frozenset({records.FLINK_WORKLOAD_SIGNAL}),
    retention_ms=WEEK_MS,
    doc="Samples of real Flink jobs' per-vertex workload metrics, from the bridge (at least "
    "once); the history keeps them as a table, so the topic is a buffer: kept 7 days.",
)

WORKLOAD = TopicSpec(
    "workload",
    partitions=6,
    key="record key (k<n>)",
    values=frozenset(),
    retention_ms=DAY_MS,
    doc="The workload job's input (deploy/flink/workload), text lines from `scalefold load`; "
    "not one of scalefold's contracts (no Avro), so not in ALL; kept a day.",
)

ALL: tuple[TopicSpec, ...] = (
    JOB_EVENTS,
    JOB_SNAPSHOTS,
    RESCALES,
    DECISIONS,
    COMMANDS,
    COMMAND_OUTCOMES,
    DEAD_LETTERS,
    ACTUATOR_SNAPSHOTS,
    FLINK_RESCALES,
    FLINK_BRIDGE_OFFSETS,
    FLINK_SIGNALS,
)


@dataclass(frozen=True)
class Access:
    """The topics one client reads and writes: what it checks at start, and its ACLs."""

    reads: tuple[TopicSpec, ...]
    writes: tuple[TopicSpec, ...]

    @property
    def specs(self) -> tuple[TopicSpec, ...]:
        return tuple(spec for spec in ALL if spec in self.reads or spec in self.writes)


ACCESS: dict[str, Access] = {
    # The scheduler writes its own TimerFired ticks onto job-events.
    "scheduler": Access(
        reads=(JOB_EVENTS,),
        writes=(JOB_EVENTS, JOB_SNAPSHOTS, RESCALES, DECISIONS, DEAD_LETTERS),
    ),
    # The history service reads the commands topic as its ledger of commands sent, and a
    # job's inputs, snapshots and Flink's rescales for a forecast.
    "history": Access(
        reads=(JOB_EVENTS, JOB_SNAPSHOTS, RESCALES, COMMANDS, FLINK_RESCALES, FLINK_SIGNALS),
        writes=(COMMANDS, DEAD_LETTERS),
    ),
    # The actuator rebuilds its cluster from its snapshot, job-events and decisions, and
    # reports on it.
    "actuator": Access(
        reads=(JOB_EVENTS, DECISIONS, COMMANDS, COMMAND_OUTCOMES, ACTUATOR_SNAPSHOTS),
        writes=(JOB_EVENTS, COMMAND_OUTCOMES, DEAD_LETTERS, ACTUATOR_SNAPSHOTS),
    ),
    # The Flink bridge: real Flink clusters' rescales and inputs; it resumes from its offsets.
    "bridge": Access(
        reads=(FLINK_BRIDGE_OFFSETS,),
        writes=(JOB_EVENTS, FLINK_RESCALES, FLINK_BRIDGE_OFFSETS, FLINK_SIGNALS, DEAD_LETTERS),
    ),
    # `scalefold produce`, `tail` and `topics`: an operator's tool.
    "cli": Access(reads=ALL, writes=(JOB_EVENTS,)),
}
"""Who uses which topic; a client's consumer groups (and the scheduler's Faust topics)
are named `<prefix><client>...` (`Topics.own`)."""


@dataclass(frozen=True)
class Topics:
    """Topic names under one prefix (one scalefold installation, or one test)."""

    prefix: str = DEFAULT_PREFIX

    def name(self, spec: TopicSpec) -> str:
        """The full topic name of `spec` under this prefix."""
        return f"{self.prefix}{spec.suffix}"

    @property
    def job_events(self) -> str:
        return self.name(JOB_EVENTS)

    @property
    def job_snapshots(self) -> str:
        return self.name(JOB_SNAPSHOTS)

    @property
    def rescales(self) -> str:
        return self.name(RESCALES)

    @property
    def decisions(self) -> str:
        return self.name(DECISIONS)

    @property
    def commands(self) -> str:
        return self.name(COMMANDS)

    @property
    def command_outcomes(self) -> str:
        return self.name(COMMAND_OUTCOMES)

    @property
    def dead_letters(self) -> str:
        return self.name(DEAD_LETTERS)

    @property
    def actuator_snapshots(self) -> str:
        return self.name(ACTUATOR_SNAPSHOTS)

    @property
    def flink_rescales(self) -> str:
        return self.name(FLINK_RESCALES)

    @property
    def flink_bridge_offsets(self) -> str:
        return self.name(FLINK_BRIDGE_OFFSETS)

    @property
    def flink_signals(self) -> str:
        return self.name(FLINK_SIGNALS)

    @property
    def workload(self) -> str:
        return self.name(WORKLOAD)

    def all(self) -> dict[str, TopicSpec]:
        """Every topic scalefold uses, by full name."""
        return {self.name(spec): spec for spec in ALL}

    def used_by(self, client: str) -> dict[str, TopicSpec]:
        """The topics `client` (a key of ACCESS) reads or writes, by full name."""
        return {self.name(spec): spec for spec in ACCESS[client].specs}

    def own(self, client: str) -> str:
        """The prefix of `client`'s consumer groups and private topics (Faust's changelogs)."""
        return f"{self.prefix}{client}"

    def spec_of(self, topic: str) -> TopicSpec | None:
        """The spec of a full topic name, or None if it is not one of ours."""
        return self.all().get(topic)


def flink_job_key(cluster: str, flink_job_id: str) -> str:
    """The key of a real Flink job on scalefold's topics, and the job id under which the
    scheduler predicts it: `<cluster>.<Flink job id>` (a cluster's name holds no dot)."""
    return f"{cluster}.{flink_job_id}"
