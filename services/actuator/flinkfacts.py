"""What a real Flink 2.3 cluster shows of a job now, as the facts a command's check reads
(evidence.py). Pure: the Flink backend passes in the REST answers.

- The need: Flink's own rule (`SlotSharingSlotAllocator#calculateRequiredSlots`, which
  scalefold's allocator ports): the sum over slot-sharing groups of the largest
  `upperBound` of their vertices, from `/jobs/:jid/resource-requirements` (FLIP-291's
  bounds per job vertex) and `/jobs/:jid` (each vertex's `slotSharingGroupId`, which
  Flink 2.3 lists beside its `parallelism`).
- Held: the slots of every TaskManager `/taskmanagers` lists. A session cluster's slots
  serve all its jobs; scalefold commands one job per cluster (the local stack runs it so:
  `local up --flink`, `demo --flink`), so the cluster's registered slots are the job's.
  A cluster running several commanded jobs would see each job hold them all: its
  provisions superseded too early, never too late (the invariant holds).
- Starting: TaskManagers the launcher runs that `/taskmanagers` does not list yet, each
  of the launcher's slots. The command's own TaskManagers (`tm-<commandId>-<n>`, started
  before a crash) count neither way: a redone command is checked as it was first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.actuator.evidence import JobFacts


def needed_slots(job: Mapping[str, Any], requirements: Mapping[str, Any]) -> int | None:
    """Σ over slot-sharing groups of the max upper bound of their vertices; None when a
    vertex has no group or no requirement (an answer of another shape)."""
    groups: dict[str, int] = {}
    for vertex in job.get("vertices") or []:
        group, wanted = vertex.get("slotSharingGroupId"), requirements.get(str(vertex.get("id")))
        if group is None or not isinstance(wanted, Mapping):
            return None
        upper = int(wanted["parallelism"]["upperBound"])
        groups[str(group)] = max(groups.get(str(group), 0), upper)
    return sum(groups.values()) if groups else None


def at_desired(job: Mapping[str, Any], requirements: Mapping[str, Any]) -> bool:
    """Whether every vertex runs at its upper bound."""
    vertices = job.get("vertices") or []
    return bool(vertices) and all(
        int(v.get("parallelism", 0))
        == int(requirements.get(str(v.get("id")), {}).get("parallelism", {}).get("upperBound", -1))
        for v in vertices
    )


def flink_facts(
    cluster: str,
    jid: str,
    job: Mapping[str, Any],
    requirements: Mapping[str, Any],
    listed: Sequence[Mapping[str, Any]],
    *,
    running: Sequence[str],
    slots_per_taskmanager: int,
    own_prefix: str,
) -> JobFacts:
    """The facts of Flink job `jid` on `cluster`: `job` is `/jobs/:jid`, `listed` `/taskmanagers`,
    `running` the launcher's TaskManagers, `own_prefix` the command's TaskManagers' ids."""
    registered = [tm for tm in listed if not str(tm.get("id")).startswith(own_prefix)]
    ids = {str(tm.get("id")) for tm in listed}
    starting = [tm for tm in running if tm not in ids and not tm.startswith(own_prefix)]
    state = str(job.get("state"))
    runs = f"{state} at its desired parallelism" if at_desired(job, requirements) else state
    return JobFacts(
        held_slots=sum(int(tm.get("slotsNumber", 0)) for tm in registered),
        starting_slots=len(starting) * slots_per_taskmanager,
        needed_slots=needed_slots(job, requirements),
        holder=f"Flink cluster {cluster} (job {jid} {runs})",
    )
