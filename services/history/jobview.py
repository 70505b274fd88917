"""One job's rescales as the planner sees them: its vocabulary, shared by planner.py and rules.py.

`Rescale` is the latest revision of one rescale, in the planner's columns
(`PLANNER_COLUMNS`, which every source's `planner_rows` gives: sources.py); `JobView`
sorts one job's into what the rules read; a rule's `Decision` names the facts it read.
Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.contracts.commands import ScalingAction

PROVISION = ScalingAction.PROVISION_TASK_MANAGERS
RELEASE = ScalingAction.RELEASE_TASK_MANAGERS
RAISE_COOLDOWN = ScalingAction.RAISE_COOLDOWN
PREFIXES = {PROVISION: "provision", RELEASE: "release", RAISE_COOLDOWN: "cooldown"}

WAITING_FOR_RESOURCES = "WaitingForResources"
COMPLETED = "COMPLETED"
DEFAULT_COOLDOWN_MS = 30_000
"""Flink's default `executing.cooldown-after-rescaling`, when the settings do not say."""
MIN_RAISED_COOLDOWN_MS = 60_000
OBSERVED_CLUSTER = "scalefold.observed-cluster"
"""The job configuration key of a job observed on a real Flink (jobconfig.OBSERVED_CLUSTER)."""


@dataclass(frozen=True)
class PlannerConfig:
    provision_grace_ms: int = 30_000
    release_grace_ms: int = 120_000
    max_slots_per_job: int = 32
    provision_reactive: bool = False
    flap_threshold: int = 3
    max_cooldown_ms: int = 600_000
    flap_window_ms: int = 3_600_000
    commanded_clusters: frozenset[str] = frozenset()
    """Real Flink clusters whose observed jobs get commands (their actuator applies them)."""
    max_staleness_ms: int = 10_000
    """No decision from rows older than this (module doc)."""


@dataclass(frozen=True)
class Rescale:
    """The latest revision of one rescale: the `rescales` view's columns the planner reads."""

    job_id: str
    rescale_uuid: str
    updated_at_ms: int
    start_timestamp_ms: int
    end_timestamp_ms: int | None
    terminal_state: str | None
    available_slots: int | None
    reactive_mode: bool | None
    cooldown_ms: int | None
    total_desired_slots: int | None
    total_minimal_required_slots: int | None
    total_post_rescale_slots: int | None
    current_state: str | None
    current_state_enter_ms: int | None
    current_state_open: bool
    scheduler_settings: Mapping[str, str] | None = None
    revision: int = 0
    kafka_partition: int = 0
    kafka_offset: int = 0

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> Rescale:
        """From a collected row (`Row.asDict()`); extra columns are ignored, missing
        ones take their default."""
        values: dict[str, Any] = {name: row[name] for name in PLANNER_COLUMNS if name in row}
        if values.get("scheduler_settings") is not None:  # a map arrives as pairs from Arrow
            values["scheduler_settings"] = dict(values["scheduler_settings"])
        return cls(**values)

    @property
    def order(self) -> tuple[int, int, int]:
        """What "later" means between two revisions of a rescale (views.LATEST_ORDER)."""
        return (self.revision or 0, self.kafka_offset or 0, self.kafka_partition or 0)

    @property
    def in_progress(self) -> bool:
        return self.terminal_state is None

    @property
    def observed(self) -> bool:
        """Whether the job runs on a real Flink (predicted from what the bridge observed)."""
        return OBSERVED_CLUSTER in (self.scheduler_settings or {})

    @property
    def cluster(self) -> str | None:
        """The real Flink cluster the job runs on, or None."""
        return (self.scheduler_settings or {}).get(OBSERVED_CLUSTER)


PLANNER_COLUMNS = tuple(Rescale.__dataclass_fields__)
"""The columns the planner reads of a rescale (every source's `planner_rows`)."""


@dataclass(frozen=True)
class Decision:
    """What a rule decided, before it becomes a command: the facts it read are `on`."""

    action: ScalingAction
    amount: int
    reason: str
    evidence: tuple[Rescale, ...]
    on: Rescale
    """The revision the decision rests on (its basis)."""
    facts: tuple[object, ...] = ()


@dataclass(frozen=True)
class JobView:
    """One job's rescales as the rules see them."""

    in_progress: list[Rescale]
    latest_terminated: Rescale | None
    completed: list[Rescale]
    newest: Rescale

    @classmethod
    def of(cls, rescales: list[Rescale]) -> JobView:
        ordered = sorted(rescales, key=lambda r: (r.start_timestamp_ms, r.rescale_uuid))
        terminated = [r for r in ordered if not r.in_progress]
        latest = max(
            terminated,
            key=lambda r: (r.end_timestamp_ms or 0, r.start_timestamp_ms, r.rescale_uuid),
            default=None,
        )
        completed = sorted(
            (
                r
                for r in terminated
                if r.terminal_state == COMPLETED and r.end_timestamp_ms is not None
            ),
            key=lambda r: (r.end_timestamp_ms or 0, r.start_timestamp_ms, r.rescale_uuid),
        )
        newest = max(ordered, key=lambda r: (r.updated_at_ms, r.start_timestamp_ms))
        return cls([r for r in ordered if r.in_progress], latest, completed, newest)

    def kept(self, window_ms: int) -> list[Rescale]:
        """What the rules read of the job: its rescales in progress, its latest terminated
        one and its COMPLETED ones of the flapping window (`window_ms` back from the latest
        one's end: aggregates.completed_in_window). The state keeps no more: planstate.py."""
        anchor = max((r.end_timestamp_ms or 0 for r in self.completed), default=0)
        recent = [r for r in self.completed if (r.end_timestamp_ms or 0) >= anchor - window_ms]
        chosen = {r.rescale_uuid: r for r in [*self.in_progress, *recent]}
        if self.latest_terminated is not None:
            chosen[self.latest_terminated.rescale_uuid] = self.latest_terminated
        return list(chosen.values())
