"""The planner's view of every job, folded from the rescale records as they arrive. Pure.

`PlannerState` keeps, per job, the latest revision of each rescale the rules read
(jobview.JobView.kept: those in progress, the latest terminated one, the COMPLETED ones
of the flapping window), apart for scalefold's own records and for those a real Flink
recorded (the `flink-rescales` topic, under the job key scalefold predicts the job by).
A revision replaces an earlier one of its rescale only when it is later (revision, then
Kafka offset: views.LATEST_ORDER), so folding a record twice, or an old one after a new
one, changes nothing: the state can be rebuilt from the latest tables and the records
after them in any overlap (planning.py). A job none of whose records changed for
`lookback_ms` is forgotten (its history stays in the tables).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from services.history.jobview import JobView, Rescale


@dataclass
class JobRecords:
    """One job's latest revisions, by rescale uuid: scalefold's and Flink's."""

    ours: dict[str, Rescale] = field(default_factory=dict)
    flink: dict[str, Rescale] = field(default_factory=dict)

    def newest_update(self) -> int:
        return max(
            (r.updated_at_ms for r in [*self.ours.values(), *self.flink.values()]), default=0
        )


@dataclass
class PlannerState:
    """Every job's records as the planner reads them (module doc)."""

    flap_window_ms: int
    lookback_ms: int
    jobs: dict[str, JobRecords] = field(default_factory=dict)
    version: int = 0
    """Counts the changes: the planner decides again only after one (or as time passes)."""

    def fold(self, rescales: Iterable[Rescale], *, flink: bool = False) -> int:
        """Fold records in (Flink's with `flink`); returns how many changed the state."""
        changed: set[str] = set()
        for rescale in rescales:
            records = self.jobs.setdefault(rescale.job_id, JobRecords())
            kept = records.flink if flink else records.ours
            before = kept.get(rescale.rescale_uuid)
            if before is None or rescale.order > before.order:
                kept[rescale.rescale_uuid] = rescale
                changed.add(rescale.job_id)
        for job_id in changed:
            self._prune(self.jobs[job_id])
        self.version += bool(changed)
        return len(changed)

    def _prune(self, records: JobRecords) -> None:
        for kept in (records.ours, records.flink):
            if kept:
                chosen = JobView.of(list(kept.values())).kept(self.flap_window_ms)
                for uuid in set(kept) - {r.rescale_uuid for r in chosen}:
                    del kept[uuid]

    def forget_idle(self, now_ms: int) -> list[str]:
        """Forget the jobs no record of which changed for `lookback_ms`; their ids."""
        idle = [j for j, r in self.jobs.items() if now_ms - r.newest_update() > self.lookback_ms]
        for job_id in idle:
            del self.jobs[job_id]
        self.version += bool(idle)
        return idle

    def ours(self) -> list[Rescale]:
        return [r for records in self.jobs.values() for r in records.ours.values()]

    def flink(self) -> list[Rescale]:
        return [r for records in self.jobs.values() for r in records.flink.values()]
