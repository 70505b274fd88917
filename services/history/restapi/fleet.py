"""Per-job figures of the whole fleet from one version's latest-revision table, column-wise.

Counts by outcome, the newest rescale, and the flapping score of `aggregates.py` (the
`job_summary` view's): direction reversals of the total post-rescale slots along a job's
COMPLETED rescales ordered by end time, within the hour that ends at its latest COMPLETED
one. pyarrow does the grouping; Python walks only the columns the score needs, so the
fleet of 100,000 rescales costs a fraction of turning every row into a dict.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from services.history.aggregates import FLAP_WINDOW_MS
from services.history.restapi.store import Jobs

OUTCOMES = ("COMPLETED", "FAILED", "IGNORED")


@dataclass(frozen=True)
class JobFigures:
    job_id: str
    total: int
    completed: int
    failed: int
    ignored: int
    in_progress: int
    flapping: int
    latest: dict[str, Any]
    """The job's newest rescale (by start): its latest revision's row."""


def reversals(slots: list[int]) -> int:
    """How often a sequence of slot totals changed direction (up <-> down)."""
    moves = [d for d in ((b > a) - (b < a) for a, b in pairwise(slots)) if d != 0]
    return sum(1 for a, b in pairwise(moves) if a != b)


def flapping_scores(table: pa.Table, window_ms: int = FLAP_WINDOW_MS) -> dict[str, int]:
    """job_id -> flapping score, for the jobs with COMPLETED rescales."""
    done = table.filter(
        pc.and_(
            pc.equal(table.column("terminal_state"), "COMPLETED"),
            pc.is_valid(table.column("end_timestamp_ms")),
        )
    ).select(
        [
            "job_id",
            "end_timestamp_ms",
            "start_timestamp_ms",
            "rescale_uuid",
            "total_post_rescale_slots",
        ]
    )
    by_job: dict[str, list[tuple[int, int, str, int | None]]] = {}
    columns = [done.column(i).to_pylist() for i in range(done.num_columns)]
    for job, end, start, uuid, slots in zip(*columns, strict=True):
        by_job.setdefault(job, []).append((end, start, uuid, slots))
    scores = {}
    for job, rescales in by_job.items():
        anchor = max(r[0] for r in rescales)
        window = sorted(r for r in rescales if r[0] >= anchor - window_ms)
        scores[job] = reversals([r[3] for r in window if r[3] is not None])
    return scores


def figures(jobs: Jobs) -> list[JobFigures]:
    """Every job's figures, in the order of `jobs.slices`; computed once per version."""
    if "figures" in jobs.memo:
        found: list[JobFigures] = jobs.memo["figures"]
        return found
    table = jobs.table
    if table.num_rows == 0:
        jobs.memo["figures"] = []
        return []
    state = table.column("terminal_state")
    flags = {s.lower(): pc.cast(pc.equal(state, s), pa.int64()) for s in OUTCOMES}
    flags["in_progress"] = pc.cast(pc.is_null(state), pa.int64())
    counted = pa.table(
        {"job_id": table.column("job_id"), **{k: pc.fill_null(v, 0) for k, v in flags.items()}}
    )
    sums = counted.group_by("job_id").aggregate([(k, "sum") for k in flags])
    per_job = {
        job: dict(zip(flags, values, strict=True))
        for job, *values in zip(
            *(sums.column(c).to_pylist() for c in ["job_id", *(f"{k}_sum" for k in flags)]),
            strict=True,
        )
    }
    firsts = table.take(
        pa.array([start for start, _ in jobs.slices.values()], pa.int64())
    ).to_pylist()
    scores = flapping_scores(table)
    result = [
        JobFigures(
            job_id=job_id,
            total=length,
            **per_job[job_id],
            flapping=scores.get(job_id, 0),
            latest=first,
        )
        for (job_id, (_, length)), first in zip(jobs.slices.items(), firsts, strict=True)
    ]
    jobs.memo["figures"] = result
    return result
