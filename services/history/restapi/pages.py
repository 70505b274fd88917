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

from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote

from services.history.overview import human_ms
from services.history.restapi import compare
from services.history.restapi.fleet import JobFigures, figures
from services.history.restapi.markup import esc, page_answer, table, utc
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
            return page_answer("Rescales of the fleet", fleet(history))
        if parts[0] == "jobs" and len(parts) >= 2:
            job_id, rest = parts[1], parts[2:]
            if not rest:
                return page_answer(f"Rescales of job {job_id}", job_page(history, job_id, query))
            if rest == ["timeline"]:
                return _timeline(history, job_id, query)
            if len(rest) == 2 and rest[0] == "rescales":
                return page_answer(
                    f"Rescale {rest[1]}", rescale_page(history, job_id, rest[1], query)
                )
        raise NotFoundError(f"no page at /web/{'/'.join(parts)}")
    except NotFoundError as missing:
        return page_answer("Not found", f"<p class=error>{esc(str(missing))}</p>", 404)
    except BadRequestError as bad:
        return page_answer("Bad request", f"<p class=error>{esc(str(bad))}</p>", 400)


def _job_link(job_id: str, source: str) -> str:
    return f"/web/jobs/{quote(job_id, safe='')}?source={source}"


def _outcome(row: Row) -> str:
    state = row["terminal_state"]
    if state is None:
        return '<span class="outcome in_progress">IN PROGRESS</span>'
    return f'<span class="outcome {esc(state.lower())}">{esc(state)}</span> {esc(row["terminated_reason"])}'


def _counts(f: JobFigures) -> list[str]:
    return [str(n) for n in (f.total, f.completed, f.failed, f.ignored, f.in_progress, f.flapping)]


def _latest(f: JobFigures) -> list[str]:
    return [
        f"{esc(f.latest['trigger_cause'])} &rarr; {_outcome(f.latest)}",
        utc(f.latest["start_timestamp_ms"]),
    ]


def _fleet_line(f: JobFigures, name: str) -> list[str]:
    job = f'<a href="{_job_link(f.job_id, name)}">{esc(f.job_id)}</a>'
    return [job, esc(name), *_counts(f), *_latest(f), "-"]


def _flink_line(history: History, f: JobFigures, predicted: JobFigures | None) -> list[str]:
    """A real Flink's job and scalefold's prediction of it in one row: each count as
    Flink's / the prediction's, and how many settled pairs agree in every field."""
    latest = f.latest
    named = (latest.get("cluster"), latest.get("job_name"))
    about = " &middot; ".join(esc(v) for v in named if v)
    job = f'<a href="{_job_link(f.job_id, FLINK)}">{esc(f.job_id)}</a>'
    if about:
        job += f"<br><small>{about}</small>"
    if predicted is None:
        return [job, "flink", *_counts(f), *_latest(f), "no prediction"]
    link = f'<a href="{_job_link(predicted.job_id, SCALEFOLD)}">prediction</a>'
    counts = [f"{a} / {b}" for a, b in zip(_counts(f), _counts(predicted), strict=True)]
    rows = history.sources[FLINK].jobs().rows(f.job_id) or []
    mine = [r for r in rows if r.get("cluster") == latest.get("cluster")]
    agreed = compare.agreement(history, f.job_id, mine)
    shown = "-" if not agreed or not agreed[1] else f"{agreed[0]} of {agreed[1]} pairs"
    if agreed and agreed[2]:
        shown += f" ({agreed[2]} ambiguous)"
    return [job, f"flink / {link}", *counts, *_latest(f), shown]


def fleet(history: History) -> str:
    ours = history.sources.get(SCALEFOLD)
    theirs = history.sources.get(FLINK)
    predicted = {f.job_id: f for f in figures(ours.jobs())} if ours is not None else {}
    flink = figures(theirs.jobs()) if theirs is not None else []
    paired = {f.latest.get("job_key") for f in flink}
    lines = [_fleet_line(f, SCALEFOLD) for f in predicted.values() if f.job_id not in paired]
    lines += [_flink_line(history, f, predicted.get(f.latest.get("job_key") or "")) for f in flink]
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
        "agreement",
    )
    note = (
        "<p>Flapping: direction reversals of the job's slots within the hour of its latest "
        "completed rescale. A real Flink's job and scalefold's prediction of it share a row: "
        "each count is Flink's / the prediction's; agreement: settled pairs equal in trigger, "
        "outcome, parallelism and scheduler states.</p>"
    )
    return f"<p>{len(lines)} jobs.</p>" + table(header, lines, "fleet") + note


def _parallelism(kids: Mapping[str, Sequence[Row]]) -> str:
    parts = [
        f"{esc(v['job_vertex_name'] or v['job_vertex_id'])} {esc(v['pre_rescale_parallelism'] if v['pre_rescale_parallelism'] is not None else '-')}&rarr;{esc(v['post_rescale_parallelism'] if v['post_rescale_parallelism'] is not None else '-')}"
        for v in sorted(kids["vertices"], key=lambda v: v["vertex_index"])
    ]
    return "<br>".join(parts)


def job_page(history: History, job_id: str, query: Mapping[str, str]) -> str:
    name, _, rows = history.job(job_id, query)
    limit = _int(query, "limit", 100, 1, 10_000)
    offset = _int(query, "offset", 0, 0, 1 << 31)
    shown = rows[offset : offset + limit]
    kids = history.sources[name].details(shown, ("vertices",))
    lines = [
        [
            f'<a href="/web/jobs/{quote(job_id, safe="")}/rescales/{quote(r["rescale_uuid"], safe="")}?source={name}">{esc(r["rescale_uuid"])}</a>',
            esc(r["trigger_cause"]),
            _outcome(r),
            utc(r["start_timestamp_ms"]),
            esc(human_ms(r["duration_ms"])),
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
        f"<p>Source: <b>{esc(name)}</b>. {len(rows)} rescales: {summary}. "
        f"Showing {offset + 1}&ndash;{offset + len(shown)}, newest first. "
        f'<a href="/jobs/{quote(job_id, safe="")}/rescales/history?source={name}">JSON</a></p>',
        f'<iframe class="timeline" src="{frame}" title="timeline"></iframe>',
        table(
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
    if name == "flink" and rows:
        parts.append(_decisions(history, rows[0].get("job_key") or ""))
    return "\n".join(parts)


SHOWN_DECISIONS = 20


def _decisions(history: History, job_key: str) -> str:
    """The autoscaler's newest steps of a real Flink's job (`scaling_decisions`); "" if none."""
    found = history.sources["flink"].decisions(job_key, SHOWN_DECISIONS)
    if not found:
        return ""
    lines = [
        [
            utc(d["decided_at_ms"]),
            f"<b>{esc(d['outcome'])}</b>",
            esc(d["reason"]),
            "<br>".join(
                f"{esc(v['name'] or v['vertex_id'])} {esc(v['current'])}&rarr;{esc(v['target'])}"
                + (f" (reaches {esc(v['reached'])})" if v["reached"] is not None else "")
                for v in d["vertices"] or []
            ),
            esc(d["forecast"] or ""),
        ]
        for d in found
    ]
    return "\n".join(
        [
            f"<h2>Parallelism decisions</h2><p>The history's autoscaler, newest first (the last "
            f"{SHOWN_DECISIONS}; all in the view <code>scaling_decisions</code>).</p>",
            table(
                (
                    "decided (UTC)",
                    "outcome",
                    "why",
                    "parallelism now → target",
                    "what Flink will do",
                ),
                lines,
                "decisions",
            ),
        ]
    )


def rescale_page(history: History, job_id: str, uuid: str, query: Mapping[str, str]) -> str:
    name, _, rows = history.job(job_id, query)
    row = next((r for r in rows if r["rescale_uuid"] == uuid), None)
    if row is None:
        raise NotFoundError(f"Rescale {uuid} of job {job_id} not found in {name}'s history")
    kids = history.sources[name].details([row])[uuid]
    facts = [
        ["job", f'<a href="{_job_link(job_id, name)}">{esc(job_id)}</a> ({esc(name)})'],
        ["trigger", esc(row["trigger_cause"])],
        ["outcome", _outcome(row)],
        ["start (UTC)", utc(row["start_timestamp_ms"])],
        ["end (UTC)", utc(row["end_timestamp_ms"])],
        ["duration", esc(human_ms(row["duration_ms"]))],
        ["attempt", esc(row["rescale_attempt_id"])],
    ]
    vertices = [
        [
            esc(v["job_vertex_id"]),
            esc(v["job_vertex_name"]),
            esc(v["slot_sharing_group_name"]),
            *(
                esc(v[k])
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
            esc(s["slot_sharing_group_name"]),
            esc(s["slot_sharing_group_id"]),
            *(
                esc(s[k])
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
            f'<span class="state">{esc(s["state"])}</span>',
            utc(s["enter_timestamp_ms"]),
            utc(s["leave_timestamp_ms"]) if s["leave_timestamp_ms"] is not None else "(open)",
            esc(human_ms(s["duration_ms"])),
            f'<pre class="exception">{esc(s["stringified_exception"])}</pre>'
            if s["stringified_exception"]
            else "",
        ]
        for s in sorted(kids["states"], key=lambda s: s["span_index"])
    ]
    return "\n".join(
        [
            table(("", ""), facts, "facts"),
            "<h2>Vertices</h2>",
            table(
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
            table(
                ("slot-sharing group", "id", "desired", "minimal required", "before", "after"),
                slots,
                "slots",
            ),
            "<h2>Scheduler states</h2>",
            table(
                ("state", "enter (UTC)", "leave (UTC)", "duration", "exception"), spans, "states"
            ),
            f'<p><a href="/jobs/{quote(job_id, safe="")}/rescales/details/{quote(uuid, safe="")}?source={name}">JSON</a></p>',
        ]
    )


def _timeline(history: History, job_id: str, query: Mapping[str, str]) -> Answer:
    name, _, rows = history.job(job_id, query)
    shown = rows[:TIMELINE_RESCALES]
    kids = history.sources[name].details(shown, ("states",))
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
