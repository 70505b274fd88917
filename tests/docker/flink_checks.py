"""The compose stacks' real Flink, read as a user reads it: the JobManager's REST API and
the history's rescale REST API (history-api), plain or TLS alike through FlinkRest.
The sample job's vertices go by their name's first word: Source, Bucket, Sum."""

from __future__ import annotations

from typing import Any

from services.contracts.flinkrest import FlinkNotFoundError, FlinkRest
from tests.docker.stack import poll


def vertex_name(name: str) -> str:
    """A vertex's name's first word: Source (Flink's "Source: Numbers"), Bucket, Sum."""
    return name.split(" ", maxsplit=1)[0].rstrip(":")


def running_at(flink: FlinkRest, jid: str, wanted: int) -> dict[str, int]:
    """Each vertex's parallelism once Flink shows Bucket and Sum at `wanted` and every
    subtask running."""

    def look() -> dict[str, int]:
        job = flink.job(jid)
        counts = job.get("status-counts") or {}
        if job["state"] != "RUNNING" or counts.get("RUNNING", 0) != sum(counts.values()):
            return {}
        return {vertex_name(v["name"]): v["parallelism"] for v in job["vertices"]}

    def done(shown: dict[str, int]) -> bool:
        return shown.get("Bucket") == wanted and shown.get("Sum") == wanted

    shown = poll(look, done, timeout=300)
    assert done(shown), f"Flink shows {shown}, not Bucket and Sum at {wanted}"
    return shown


def kept_rescale(flink: FlinkRest, api: FlinkRest, jid: str, trigger: str) -> dict[str, Any]:
    """The job's COMPLETED rescale of `trigger` with its details, once the history's
    `flink_rescales` holds it (read through `api`); and that the JobManager recorded the
    same rescale."""

    def look() -> dict[str, Any] | None:
        try:
            rows = api.get_json(f"/jobs/{jid}/rescales/history?limit=1000")
        except FlinkNotFoundError:
            return None  # not in the tables yet
        for row in rows:
            if (row["triggerCause"], row["terminalState"]) == (trigger, "COMPLETED"):
                return api.rescale_details(jid, row["rescaleUuid"])
        return None

    found = poll(look, bool, timeout=600, pause=3)
    assert found, f"no COMPLETED {trigger} rescale of {jid} in flink_rescales"
    recorded = flink.rescale_details(jid, found["rescaleUuid"])
    assert (recorded["triggerCause"], recorded["terminalState"]) == (trigger, "COMPLETED")
    return found


def post_parallelism(details: dict[str, Any]) -> dict[str, int]:
    """A rescale's parallelism after it, by vertex."""
    return {
        vertex_name(v["jobVertexName"]): v["postRescaleParallelism"]
        for v in details["vertices"].values()
    }
