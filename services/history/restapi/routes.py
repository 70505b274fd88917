"""Requests to answers: Flink's FLIP-487 paths over the durable history, and the web page's.

`route` is the whole API: a method, a path and its query in; a status, a content
type, a body and headers out. It reads the tables only through `History` (store.py).

Paths (Flink 2.3's, under the same names), read-only:

    GET /jobs                                      every job with rescales (scalefold's listing)
    GET /jobs/:jobid/rescales/overview             counts, latest completed/failed/ignored
    GET /jobs/:jobid/rescales/history              newest first; ?limit=N&offset=M pages it
    GET /jobs/:jobid/rescales/summary              duration statistics; ?window=N (Flink's)
    GET /jobs/:jobid/rescales/details/:rescaleuuid vertices, slots, scheduler-state spans
    GET /jobs/:jobid/rescales/config               the job's adaptive-scheduler settings

`?source=scalefold|flink` chooses between scalefold's predictions and Flink's own records
(kept by the bridge); without it, Flink's records when the job has any, else scalefold's.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, quote, unquote

from services.history.restapi import flinkjson
from services.history.restapi.fleet import figures
from services.history.restapi.store import Jobs, Row, Source

SCALEFOLD, FLINK = "scalefold", "flink"
MAX_LIMIT = 10_000
JSON_TYPE = "application/json; charset=UTF-8"
HTML_TYPE = "text/html; charset=utf-8"


@dataclass(frozen=True)
class Answer:
    status: int
    content_type: str
    body: bytes
    headers: Mapping[str, str] = field(default_factory=dict)


class BadRequestError(Exception):
    """A parameter the API cannot take: 400."""


class NotFoundError(Exception):
    """An unknown job, rescale or path: 404."""


def json_answer(value: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Answer:
    body = json.dumps(value, separators=(",", ":"), allow_nan=False).encode()
    return Answer(status, JSON_TYPE, body, headers or {})


def error_answer(status: int, message: str) -> Answer:
    return json_answer(flinkjson.error(message), status)


@dataclass(frozen=True)
class History:
    """The sources the API answers from, by name."""

    sources: Mapping[str, Source]

    def job(self, job_id: str, query: Mapping[str, str]) -> tuple[str, Jobs, list[Row]]:
        """(source name, that source's jobs, the job's rows); NotFoundError if it has none."""
        wanted = query.get("source")
        if wanted is not None and wanted not in (SCALEFOLD, FLINK):
            raise BadRequestError(f"source must be '{SCALEFOLD}' or '{FLINK}', not {wanted!r}")
        order = [wanted] if wanted else [FLINK, SCALEFOLD]
        for name in order:
            source = self.sources.get(name)
            jobs = source.jobs() if source is not None else None
            rows = jobs.rows(job_id) if jobs is not None else None
            if jobs is not None and rows is not None:
                return name, jobs, rows
        where = f"{wanted}'s" if wanted else "the"
        raise NotFoundError(f"Job {job_id} not found: it has no rescale in {where} history")


def _int(query: Mapping[str, str], name: str, default: int, lowest: int, highest: int) -> int:
    text = query.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        raise BadRequestError(f"{name} must be an integer, not {text!r}") from None
    if not lowest <= value <= highest:
        raise BadRequestError(f"{name} must be between {lowest} and {highest}, not {value}")
    return value


def parse_query(text: str) -> dict[str, str]:
    """The query's parameters; a repeated one is a 400 (which one would be meant?)."""
    parsed = parse_qs(text, keep_blank_values=True)
    repeated = [name for name, values in parsed.items() if len(values) > 1]
    if repeated:
        raise BadRequestError(f"parameter {repeated[0]} given more than once")
    return {name: values[0] for name, values in parsed.items()}


def _listed(name: str, jobs: Jobs) -> list[dict[str, Any]]:
    """One source's entries of `/jobs` (`fleet.figures`, once per table version)."""
    return [
        {
            "id": f.job_id,
            "source": name,
            "rescalesCounts": {
                "ignored": f.ignored,
                "inProgress": f.in_progress,
                "completed": f.completed,
                "failed": f.failed,
            },
            "latestRescaleStartTimestampInMillis": f.latest["start_timestamp_ms"],
        }
        for f in figures(jobs)
    ]


def jobs_listing(history: History) -> dict[str, Any]:
    """`/jobs`: every job of every source with its rescale counts and latest start."""
    listed = []
    for name in (SCALEFOLD, FLINK):
        source = history.sources.get(name)
        if source is not None:
            listed += _listed(name, source.jobs())
    return {"jobs": listed}


def _history(history: History, job_id: str, query: Mapping[str, str]) -> Answer:
    source, _, rows = history.job(job_id, query)
    cap = flinkjson.history_size(_settings(history, rows))
    limit = _int(query, "limit", cap, 1, MAX_LIMIT)
    offset = _int(query, "offset", 0, 0, 1 << 31)
    headers = {"X-Total-Count": str(len(rows)), "X-Scalefold-Source": source}
    if offset + limit < len(rows):
        following = (
            f"/jobs/{quote(job_id, safe='')}/rescales/history?limit={limit}&offset={offset + limit}"
        )
        headers["Link"] = f'<{following}>; rel="next"'
    return json_answer(flinkjson.history(rows, limit, offset), headers=headers)


def _details(history: History, job_id: str, uuid: str, query: Mapping[str, str]) -> Answer:
    name, _, rows = history.job(job_id, query)
    row = next((r for r in rows if r["rescale_uuid"] == uuid), None)
    if row is None:
        raise NotFoundError(f"Rescale {uuid} of job {job_id} not found in {name}'s history")
    kids = history.sources[name].details([row])[uuid]
    return json_answer(flinkjson.details(row, kids["vertices"], kids["slots"], kids["states"]))


def _simple(history: History, job_id: str, endpoint: str, query: Mapping[str, str]) -> Answer:
    _, _, rows = history.job(job_id, query)
    if endpoint == "overview":
        return json_answer(flinkjson.overview(rows))
    if endpoint == "summary":
        window = _int(query, "window", 0, 1, 1 << 31) if "window" in query else None
        return json_answer(flinkjson.summary(rows, window))
    return json_answer(flinkjson.config(_settings(history, rows)))


def _settings(history: History, rows: Sequence[Row]) -> dict[str, str]:
    """The job's adaptive-scheduler settings: its newest record's. Flink's records carry
    none: then those of its prediction (`job_key`), which the bridge took from Flink."""
    settings = flinkjson.settings_of(rows[0])
    key = rows[0].get("job_key")
    scalefold = history.sources.get(SCALEFOLD)
    if settings or not key or scalefold is None:
        return settings
    predicted = scalefold.jobs().rows(key)
    return flinkjson.settings_of(predicted[0]) if predicted else {}


Handler = Callable[[History, Sequence[str], Mapping[str, str]], Answer]


def api_route(history: History, parts: Sequence[str], query: Mapping[str, str]) -> Answer | None:
    """The FLIP-487 paths; None when `parts` is none of them."""
    if parts == ["jobs"]:
        return json_answer(jobs_listing(history))
    if len(parts) < 3 or parts[0] != "jobs" or parts[2] != "rescales":
        return None
    job_id, rest = parts[1], parts[3:]
    if rest == ["history"]:
        return _history(history, job_id, query)
    if len(rest) == 1 and rest[0] in ("overview", "summary", "config"):
        return _simple(history, job_id, rest[0], query)
    if len(rest) == 2 and rest[0] == "details":
        return _details(history, job_id, rest[1], query)
    return None


def route(
    history: History,
    method: str,
    path: str,
    query_text: str,
    web: Handler | None = None,
) -> Answer:
    """The answer to one request; `web` answers the web page's paths (`/web/...`)."""
    if method not in ("GET", "HEAD"):
        return error_answer(405, f"{method} is not allowed: this API is read-only")
    parts = [unquote(p) for p in path.split("/") if p]
    try:
        query = parse_query(query_text)
        if parts and parts[0] == "web" and web is not None:
            return web(history, parts[1:], query)
        if not parts:
            return Answer(302, HTML_TYPE, b"", {"Location": "/web/"})
        answer = api_route(history, parts, query)
        if answer is None:
            raise NotFoundError(f"Not found: {path}")
        return answer
    except BadRequestError as bad:
        return error_answer(400, str(bad))
    except NotFoundError as missing:
        return error_answer(404, str(missing))
