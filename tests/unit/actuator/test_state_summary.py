"""`scalefold cluster state` summarizes a big cluster in a few lines."""

from __future__ import annotations

from services.tools.cluster import summary


def test_a_big_cluster_is_summarized_in_a_few_lines() -> None:
    snapshot = {
        f"job-{n}": {"status": "RUNNING", "taskManagers": {"tm-1": 1}, "checkpoints": n}
        for n in range(20_000)
    }
    lines = summary(snapshot, limit=3)
    assert lines[0] == "20000 jobs (20000 RUNNING), 20000 TaskManagers"
    assert len(lines) == 5 and "19997 more" in lines[-1]
