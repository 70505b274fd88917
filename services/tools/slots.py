"""The slots each job held against what its requirements need, from the scheduler's decisions.

The invariant the closed loop keeps (issue 46): no job holds more TaskManager slots than
its latest requirements need plus the configured spare because of what scalefold
provisioned. The `decisions` topic says, per job and in order, every TaskManager the
scheduler counted (RESOURCES_CHANGED, registered or lost, with its slots) and each need
it declared (the DECLARE_RESOURCES request's desired slots). `SlotLedger` folds them; a
registration of a TaskManager a command started (its id names the command: the embedded
cluster's `<job>-cmd-provision-...`, a local Flink's `tm-provision-...`) that takes the
job above its need plus the spare is a breach. A job also holding more after requirements
were lowered is not one: those slots are the release's business (the planner releases
idle slots after its grace). Pure; the demo and the tests read the topic into it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PROVISIONED = "provision-"
"""What the id of a TaskManager a PROVISION command started holds (its command's id)."""


@dataclass
class JobSlots:
    held: dict[str, int] = field(default_factory=dict)
    """TaskManager id -> slots, as the scheduler counts them."""
    need: int | None = None
    peak: int = 0

    @property
    def total(self) -> int:
        return sum(self.held.values())


@dataclass(frozen=True)
class Breach:
    job_id: str
    task_manager: str
    held: int
    need: int
    at_ms: int

    def __str__(self) -> str:
        return (
            f"job {self.job_id} held {self.held} slots with {self.task_manager}, "
            f"provisioned beyond its need of {self.need}"
        )


@dataclass
class SlotLedger:
    """Every job's slots and need, folded from SchedulerDecisions records (module doc)."""

    spare: int = 0
    jobs: dict[str, JobSlots] = field(default_factory=dict)
    breaches: list[Breach] = field(default_factory=list)

    def fold(self, record: Mapping[str, Any]) -> None:
        """One decoded `SchedulerDecisions` record."""
        job = self.jobs.setdefault(record["jobId"], JobSlots())
        for item in record["items"]:
            details = dict(item.get("details") or {})
            if item["kind"] == "DECLARE_RESOURCES" and "desired_slots" in details:
                job.need = int(details["desired_slots"])
            elif item["kind"] == "RESOURCES_CHANGED" and "taskManager" in details:
                self._changed(record["jobId"], job, details, int(item["timestamp"]))

    def _changed(self, job_id: str, job: JobSlots, details: dict[str, str], at: int) -> None:
        tm = details["taskManager"]
        if details.get("change") == "lost":
            job.held.pop(tm, None)
            return
        job.held[tm] = int(details.get("taskManagerSlots") or 1)
        job.peak = max(job.peak, job.total)
        if PROVISIONED in tm and job.need is not None and job.total > job.need + self.spare:
            self.breaches.append(Breach(job_id, tm, job.total, job.need, at))

    def over(self) -> dict[str, tuple[int, int]]:
        """Jobs that hold more now than their need plus the spare: job -> (held, need)."""
        return {
            job_id: (job.total, job.need)
            for job_id, job in self.jobs.items()
            if job.need is not None and job.total > job.need + self.spare
        }
