"""The actuator's snapshots: its embedded cluster as a rebuild from the log computes it.

A restarted actuator rebuilds its cluster by folding the scheduler's `decisions` and
its own past events on `job-events` (cluster.py). A snapshot is that fold's result at
named positions of the two topics, so a start folds only what came after them, and
the two topics can take a retention. Pure values here; the Kafka side is replay.py.

Only the part of the cluster the log determines is kept: the timing, seed and spare
slots come from the command line of the actuator that restores it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgspec

from services.actuator.cluster import EmbeddedCluster, JobRuntime, provisioning_command

MODEL_FORMAT = "msgpack/2"
"""The encoding of `Model`; a snapshot in another one is not restored (the start folds
the log from its oldest record instead), but for `LEGACY_FORMAT`'s."""
LEGACY_FORMAT = "msgpack/1"
"""Before lost_unread: each job kept `named`, every TaskManager the decisions named."""
_UNTIL_RELEASED = 2**63 - 1

Position = tuple[str, int]
"""(topic, partition)"""


class Model(msgspec.Struct, frozen=True):
    """The fields of EmbeddedCluster that folding the log sets."""

    jobs: dict[str, JobRuntime]
    applied: dict[str, tuple[str, ...]]
    chosen: dict[str, tuple[str, ...]]
    answered: dict[str, str]
    own_checkpoints: dict[str, int]
    manual: dict[str, set[str]]
    paced_until: dict[str, int]
    provisioned: dict[str, dict[str, tuple[int, int]]]
    cooldowns: dict[str, int]
    released: dict[str, int]
    # Since msgpack/2's first snapshots (a missing field is an empty one: see `sweep`)
    log_ms: int = 0
    learned: dict[str, int] = msgspec.field(default_factory=dict)
    released_at: dict[str, int] = msgspec.field(default_factory=dict)


MODEL_FIELDS: tuple[str, ...] = Model.__struct_fields__
CONFIGURED_FIELDS = frozenset({"timing", "seed", "rng", "spare_slots", "memory_ms"})
"""EmbeddedCluster's fields that are the actuator's settings, not folded from the log."""

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Model)


@dataclass(frozen=True)
class Snapshot:
    taken_at: int
    positions: dict[Position, int]  # the next offset to read of each partition
    jobs: int
    model_format: str
    model: bytes


def capture(cluster: EmbeddedCluster, positions: dict[Position, int], taken_at: int) -> Snapshot:
    model = Model(**{name: getattr(cluster, name) for name in MODEL_FIELDS})
    return Snapshot(
        taken_at, dict(positions), len(cluster.jobs), MODEL_FORMAT, _encoder.encode(model)
    )


def restore(snapshot: Snapshot, cluster: EmbeddedCluster) -> None:
    """Set the folded part of `cluster` to the snapshot's (ValueError: not readable)."""
    try:
        if snapshot.model_format == MODEL_FORMAT:
            model = _decoder.decode(snapshot.model)
        elif snapshot.model_format == LEGACY_FORMAT:
            model = _from_legacy(snapshot.model)
        else:
            raise ValueError(
                f"model format {snapshot.model_format!r}, this actuator reads {MODEL_FORMAT!r}"
            )
    except (msgspec.DecodeError, msgspec.ValidationError) as error:
        raise ValueError(str(error)) from None
    for name in MODEL_FIELDS:
        setattr(cluster, name, getattr(model, name))


def _from_legacy(data: bytes) -> Model:
    """A LEGACY_FORMAT model: of the TaskManagers a job's decisions named, those it
    provisioned and that are lost may have a registration still to read back; when is
    not known, so they are kept as such until the job is released."""
    raw = msgspec.msgpack.decode(data)
    if not isinstance(raw, dict) or not isinstance(raw.get("jobs"), dict):
        raise msgspec.DecodeError("not a model")
    for job_id, job in raw["jobs"].items():
        if not isinstance(job, dict):
            raise msgspec.DecodeError(f"job {job_id!r} is not a record")
        held = job.get("task_managers") or {}
        job["lost_unread"] = {
            tm: _UNTIL_RELEASED
            for tm in job.pop("named", None) or ()
            if tm not in held and provisioning_command(job_id, tm)
        }
    return msgspec.convert(raw, Model)


def to_record(snapshot: Snapshot) -> dict[str, Any]:
    """The ActuatorSnapshot datum."""
    return {
        "takenAtMillis": snapshot.taken_at,
        "positions": [
            {"topic": topic, "partition": partition, "offset": offset}
            for (topic, partition), offset in sorted(snapshot.positions.items())
        ],
        "jobs": snapshot.jobs,
        "modelFormat": snapshot.model_format,
        "model": snapshot.model,
    }


def from_record(record: dict[str, Any]) -> Snapshot:
    return Snapshot(
        record["takenAtMillis"],
        {(p["topic"], p["partition"]): p["offset"] for p in record["positions"]},
        record["jobs"],
        record["modelFormat"],
        record["model"],
    )
