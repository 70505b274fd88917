"""The web page: the fleet, one job's rescales, one rescale's details. Server-rendered HTML.

No scripts and no build step: plain HTML and CSS rendered here, the job's timeline
the existing SVG chart (`timeline.render_html`) in a frame. Paths under `/web/`:

    /web/                              the fleet: jobs, counts by outcome, flapping, latest
    /web/jobs/:jobid                   its rescales (newest first) and, for a real Flink's
                                       job, Flink's records beside scalefold's predictions
    /web/jobs/:jobid/timeline          the timeline chart of its last 30 rescales
    /web/jobs/:jobid/rescales/:uuid    vertices, slots, scheduler-state spans with exceptions

`?source=` as in the API.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from services.history import planner
from services.history.aggregates import FLAP_WINDOW_MS
from services.history.overview import human_ms
from services.history.restapi import compare
from services.history.restapi.routes import (
    FLINK,
    HTML_TYPE,
    SCALEFOLD,
    Answer,
    BadRequestError,
    History,
    NotFoundError,
    _int,
)
from services.history.restapi.store import Row
from services.history.timeline import render_html, timeline_rows

TIMELINE_RESCALES = 30


def page(history: History, parts: Sequence[str], query: Mapping[str, str]) -> Answer:
    """The web page's answer for `/web/<parts>`."""
    try:
        if not parts:
            return _html("Rescales of the fleet", fleet(history))
        if parts[0] == "jobs" and len(parts) >= 2:
            job_id, rest = parts[1], parts[2:]
            if not rest:
                return _html(f"Rescales of job {job_id}", job_page(history, job_id, query))
            if rest == ["timeline"]:
                return _timeline(history, job_id, query)
            if len(rest) == 2 and rest[0] == "rescales":
                return _html(f"Rescale {rest[1]}", rescale_page(history, job_id, rest[1], query))
        raise NotFoundError(f"no page at /web/{'/'.join(parts)}")
    except NotFoundError as missing:
        return _html("Not found", f"<p class=error>{_e(str(missing))}</p>", 404)
    except BadRequestError as bad:
        return _html("Bad request", f"<p class=error>{_e(str(bad))}</p>", 400)


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value))


def _time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")


def _job_link(job_id: str, source: str) -> str:
    return f"/web/jobs/{quote(job_id, safe='')}?source={source}"


def _outcome(row: Row) -> str:
    state = row["terminal_state"]
    if state is None:
        return '<span class="outcome in_progress">IN PROGRESS</span>'
    return f'<span class="outcome {_e(state.lower())}">{_e(state)}</span> {_e(row["terminated_reason"])}'


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], css: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    return f'<table class="{css}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def flapping_score(rows: Sequence[Row]) -> int:
    """The planner's (and `job_summary`'s) flapping score of a job's latest revisions."""
    if not rows or "total_post_rescale_slots" not in rows[0]:
        return 0
    fields = planner.Rescale.__dataclass_fields__
    view = planner.JobView.of(
        [planner.Rescale.from_row({k: r.get(k) for k in fields}) for r in rows]
    )
    return planner.flapping(view, FLAP_WINDOW_MS)[0]


def fleet(history: History) -> str:
    lines = []
    for name in (SCALEFOLD, FLINK):
        source = history.sources.get(name)
        if source is None:
            continue
        jobs = source.jobs()
        for job_id in jobs.slices:
            rows = jobs.rows(job_id) or []
            states = [r["terminal_state"] for r in rows]
            latest = rows[0]
            lines.append(
                [
                    f'<a href="{_job_link(job_id, name)}">{_e(job_id)}</a>',
                    _e(name),
                    str(len(rows)),
                    *(str(states.count(s)) for s in ("COMPLETED", "FAILED", "IGNORED", None)),
                    str(flapping_score(rows)),
                    f"{_e(latest['trigger_cause'])} &rarr; {_outcome(latest)}",
                    _time(latest["start_timestamp_ms"]),
                ]
            )
    header = (
        "job",
        "source",
        "rescales",
        "completed",
        "failed",
        "ignored",
        "in progress",
        "flapping",
        "latest rescale",
        "its start (UTC)",
    )
    note = "<p>Flapping: direction reversals of the job's slots within the hour of its latest completed rescale.</p>"
    return f"<p>{len(lines)} jobs.</p>" + _table(header, lines, "fleet") + note


def _parallelism(kids: Mapping[str, Sequence[Row]]) -> str:
    parts = [
        f"{_e(v['job_vertex_name'] or v['job_vertex_id'])} {_e(v['pre_rescale_parallelism'] if v['pre_rescale_parallelism'] is not None else '-')}&rarr;{_e(v['post_rescale_parallelism'] if v['post_rescale_parallelism'] is not None else '-')}"
        for v in sorted(kids["vertices"], key=lambda v: v["vertex_index"])
    ]
    return "<br>".join(parts)


def job_page(history: History, job_id: str, query: Mapping[str, str]) -> str:
    name, _, rows = history.job(job_id, query)
    limit = _int(query, "limit", 100, 1, 10_000)
    offset = _int(query, "offset", 0, 0, 1 << 31)
    shown = rows[offset : offset + limit]
    kids = history.sources[name].details(shown)
    lines = [
        [
            f'<a href="/web/jobs/{quote(job_id, safe="")}/rescales/{quote(r["rescale_uuid"], safe="")}?source={name}">{_e(r["rescale_uuid"])}</a>',
            _e(r["trigger_cause"]),
            _outcome(r),
            _time(r["start_timestamp_ms"]),
            _e(human_ms(r["duration_ms"])),
            _parallelism(kids[r["rescale_uuid"]]),
        ]
        for r in shown
    ]
    counts = [r["terminal_state"] for r in rows]
    summary = ", ".join(
        f"{counts.count(s)} {label}"
        for s, label in (
            ("COMPLETED", "completed"),
            ("FAILED", "failed"),
            ("IGNORED", "ignored"),
            (None, "in progress"),
        )
    )
    frame = f"/web/jobs/{quote(job_id, safe='')}/timeline?source={name}"
    parts = [
        f"<p>Source: <b>{_e(name)}</b>. {len(rows)} rescales: {summary}. "
        f"Showing {offset + 1}&ndash;{offset + len(shown)}, newest first. "
        f'<a href="/jobs/{quote(job_id, safe="")}/rescales/history?source={name}">JSON</a></p>',
        f'<iframe class="timeline" src="{frame}" title="timeline"></iframe>',
        _table(
            (
                "rescale",
                "trigger",
                "outcome",
                "start (UTC)",
                "duration",
                "parallelism before → after",
            ),
            lines,
            "rescales",
        ),
    ]
    parts.append(compare.section(history, name, job_id, rows))
    return "\n".join(parts)


def rescale_page(history: History, job_id: str, uuid: str, query: Mapping[str, str]) -> str:
    name, _, rows = history.job(job_id, query)
    row = next((r for r in rows if r["rescale_uuid"] == uuid), None)
    if row is None:
        raise NotFoundError(f"Rescale {uuid} of job {job_id} not found in {name}'s history")
    kids = history.sources[name].details([row])[uuid]
    facts = [
        ["job", f'<a href="{_job_link(job_id, name)}">{_e(job_id)}</a> ({_e(name)})'],
        ["trigger", _e(row["trigger_cause"])],
        ["outcome", _outcome(row)],
        ["start (UTC)", _time(row["start_timestamp_ms"])],
        ["end (UTC)", _time(row["end_timestamp_ms"])],
        ["duration", _e(human_ms(row["duration_ms"]))],
        ["attempt", _e(row["rescale_attempt_id"])],
    ]
    vertices = [
        [
            _e(v["job_vertex_id"]),
            _e(v["job_vertex_name"]),
            _e(v["slot_sharing_group_name"]),
            *(
                _e(v[k])
                for k in (
                    "desired_parallelism",
                    "sufficient_parallelism",
                    "pre_rescale_parallelism",
                    "post_rescale_parallelism",
                )
            ),
        ]
        for v in sorted(kids["vertices"], key=lambda v: v["vertex_index"])
    ]
    slots = [
        [
            _e(s["slot_sharing_group_name"]),
            _e(s["slot_sharing_group_id"]),
            *(
                _e(s[k])
                for k in (
                    "desired_slots",
                    "minimal_required_slots",
                    "pre_rescale_slots",
                    "post_rescale_slots",
                )
            ),
        ]
        for s in sorted(kids["slots"], key=lambda s: s["slot_index"])
    ]
    spans = [
        [
            f'<span class="state">{_e(s["state"])}</span>',
            _time(s["enter_timestamp_ms"]),
            _time(s["leave_timestamp_ms"]) if s["leave_timestamp_ms"] is not None else "(open)",
            _e(human_ms(s["duration_ms"])),
            f'<pre class="exception">{_e(s["stringified_exception"])}</pre>'
            if s["stringified_exception"]
            else "",
        ]
        for s in sorted(kids["states"], key=lambda s: s["span_index"])
    ]
    return "\n".join(
        [
            _table(("", ""), facts, "facts"),
            "<h2>Vertices</h2>",
            _table(
                (
                    "vertex id",
                    "name",
                    "slot-sharing group",
                    "desired",
                    "sufficient",
                    "before",
                    "after",
                ),
                vertices,
                "vertices",
            ),
            "<h2>Slots</h2>",
            _table(
                ("slot-sharing group", "id", "desired", "minimal required", "before", "after"),
                slots,
                "slots",
            ),
            "<h2>Scheduler states</h2>",
            _table(
                ("state", "enter (UTC)", "leave (UTC)", "duration", "exception"), spans, "states"
            ),
            f'<p><a href="/jobs/{quote(job_id, safe="")}/rescales/details/{quote(uuid, safe="")}?source={name}">JSON</a></p>',
        ]
    )


def _timeline(history: History, job_id: str, query: Mapping[str, str]) -> Answer:
    name, _, rows = history.job(job_id, query)
    shown = rows[:TIMELINE_RESCALES]
    kids = history.sources[name].details(shown)
    spans: list[dict[str, Any]] = []
    for r in shown:
        for s in kids[r["rescale_uuid"]]["states"] or [
            {"span_index": 0, "state": None, "enter_timestamp_ms": None, "leave_timestamp_ms": None}
        ]:
            spans.append(
                {
                    **{
                        k: r.get(k)
                        for k in (
                            "rescale_uuid",
                            "start_timestamp_ms",
                            "trigger_cause",
                            "terminal_state",
                            "terminated_reason",
                        )
                    },
                    "updated_at_ms": r.get("updated_at_ms")
                    or r.get("end_timestamp_ms")
                    or r["start_timestamp_ms"],
                    **{
                        k: s[k]
                        for k in ("span_index", "state", "enter_timestamp_ms", "leave_timestamp_ms")
                    },
                }
            )
    spans.sort(key=lambda s: (s["start_timestamp_ms"], s["rescale_uuid"], s["span_index"]))
    chart = render_html(timeline_rows(spans), f"Rescales of job {job_id} ({name})", relative=False)
    return Answer(200, HTML_TYPE, chart.encode())


def _html(title: str, body: str, status: int = 200) -> Answer:
    page_text = _PAGE.format(title=_e(title), body=body)
    return Answer(status, HTML_TYPE, page_text.encode())


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 20px 28px; color: #222; }}
nav a {{ margin-right: 16px; }}
table {{ border-collapse: collapse; margin: 8px 0 18px; }}
th, td {{ border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }}
th {{ background: #f3f3f3; }}
.outcome {{ font-weight: 600; }}
.completed {{ color: #2e7d32; }} .failed {{ color: #c62828; }} .ignored {{ color: #8d6e00; }}
.in_progress {{ color: #1565c0; }}
.disagrees {{ background: #ffebee; color: #b71c1c; font-weight: 600; }}
.agrees {{ color: #2e7d32; }}
pre.exception {{ max-width: 800px; max-height: 160px; overflow: auto; margin: 0;
  font-size: 11px; background: #fff3f3; padding: 4px; }}
iframe.timeline {{ width: 100%; height: 420px; border: 1px solid #ddd; }}
.error {{ color: #b71c1c; font-weight: 600; }}
</style></head>
<body><nav><a href="/web/">Fleet</a><a href="/jobs">/jobs (JSON)</a></nav>
<h1>{title}</h1>
{body}
</body></html>
"""
