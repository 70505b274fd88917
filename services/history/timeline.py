"""A job's rescales as a Gantt chart: one row per rescale, its scheduler-state spans as bars.

`timeline_frame` selects the spans (Spark), `timeline_rows` shapes the collected
rows (pure), `render_png` (matplotlib, Agg) and `render_html` (one self-contained
file with an inline SVG, no scripts) draw them. An open span (a rescale still in
progress) reaches the event time of the rescale's latest revision: the chart
shows what is known, not the wall clock.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

STATE_COLOURS = {
    "Created": "#9e9e9e",
    "WaitingForResources": "#f2a93b",
    "CreatingExecutionGraph": "#8e6cc4",
    "Executing": "#3b9b5a",
    "Restarting": "#d9534f",
    "StopWithSavepoint": "#4a90d9",
    "Canceling": "#795548",
    "Failing": "#b71c1c",
    "Finished": "#455a64",
}
OTHER_COLOUR = "#bdbdbd"


@dataclass(frozen=True)
class Bar:
    state: str
    start_ms: int
    end_ms: int
    open: bool


@dataclass(frozen=True)
class TimelineRow:
    rescale_uuid: str
    label: str
    start_ms: int
    bars: tuple[Bar, ...]


def colour(state: str) -> str:
    return STATE_COLOURS.get(state, OTHER_COLOUR)


def timeline_frame(rescales: DataFrame, states: DataFrame, job_id: str, last: int) -> DataFrame:
    """The spans of the job's `last` most recent rescales (deduplicated views in)."""
    from pyspark.sql import functions as F

    chosen = (
        rescales.where(F.col("job_id") == job_id)
        .orderBy(F.col("start_timestamp_ms").desc(), F.col("rescale_uuid").desc())
        .limit(last)
        .select(
            "rescale_uuid",
            "start_timestamp_ms",
            "updated_at_ms",
            "trigger_cause",
            "terminal_state",
            "terminated_reason",
        )
    )
    spans = states.select(
        "rescale_uuid", "span_index", "state", "enter_timestamp_ms", "leave_timestamp_ms"
    )
    return chosen.join(spans, on="rescale_uuid", how="left").orderBy(
        "start_timestamp_ms", "rescale_uuid", "span_index"
    )


def timeline_rows(rows: Sequence[Mapping[str, Any]], prefix: str = "") -> list[TimelineRow]:
    """Collected `timeline_frame` rows into chart rows, oldest rescale first; `prefix`
    goes before each label (whose rescale it is, when two sides are drawn)."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        grouped.setdefault(row["rescale_uuid"], []).append(row)
    result = []
    for uuid, spans in grouped.items():
        first = spans[0]
        outcome = first["terminated_reason"] or "IN PROGRESS"
        label = f"{prefix} {uuid[:8]}" if prefix else uuid[:8]
        label += f" {first['trigger_cause']} -> {outcome}"
        bars = tuple(
            Bar(
                state=s["state"],
                start_ms=s["enter_timestamp_ms"],
                end_ms=_end(s),
                open=s["leave_timestamp_ms"] is None,
            )
            for s in spans
            if s["state"] is not None and s["enter_timestamp_ms"] is not None
        )
        result.append(TimelineRow(uuid, label, first["start_timestamp_ms"], bars))
    return sorted(result, key=lambda r: (r.start_ms, r.rescale_uuid))


def _end(span: Mapping[str, Any]) -> int:
    if span["leave_timestamp_ms"] is not None:
        return int(span["leave_timestamp_ms"])
    return max(int(span["enter_timestamp_ms"]), int(span["updated_at_ms"] or 0))


def _states(rows: Sequence[TimelineRow]) -> list[str]:
    seen = dict.fromkeys(bar.state for row in rows for bar in row.bars)
    known = [s for s in STATE_COLOURS if s in seen]
    return known + sorted(s for s in seen if s not in STATE_COLOURS)


def render_png(rows: Sequence[TimelineRow], path: Path, title: str, relative: bool) -> None:
    """Draw the chart with matplotlib's Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    lo = 0 if relative else min((b.start_ms for r in rows for b in r.bars), default=0)
    hi = max((b.end_ms - (r.start_ms if relative else 0) for r in rows for b in r.bars), default=1)
    fig, ax = plt.subplots(figsize=(12, 1.5 + 0.45 * max(len(rows), 1)))
    try:
        for y, row in enumerate(rows):
            origin = row.start_ms if relative else lo
            for bar in row.bars:
                ax.broken_barh(
                    [((bar.start_ms - origin) / 1000, (bar.end_ms - bar.start_ms) / 1000)],
                    (y - 0.35, 0.7),
                    facecolors=colour(bar.state),
                    edgecolor="black" if bar.open else "none",
                    hatch="//" if bar.open else None,
                    linewidth=0.6,
                )
        ax.set_yticks(range(len(rows)), [row.label for row in rows], fontsize=8)
        ax.invert_yaxis()
        span = max(hi - lo, 1)
        ax.xaxis.set_major_locator(MaxNLocator(nbins=7, steps=[1, 2, 3, 5, 6, 10]))
        ax.xaxis.set_major_formatter(
            FuncFormatter(lambda x, _pos: _tick_label(x * 1000 + lo, relative, span))
        )
        day = datetime.fromtimestamp(lo / 1000, tz=UTC).strftime("%Y-%m-%d")
        ax.set_xlabel(
            "seconds since the rescale started" if relative else f"time (UTC, from {day})"
        )
        ax.grid(axis="x", alpha=0.3)
        handles = [Patch(facecolor=colour(s), label=s) for s in _states(rows)]
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//", label="open span"))
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8)
        ax.set_title(title)
        fig.tight_layout()
        fig.savefig(path, dpi=120)
    finally:
        plt.close(fig)


def _tick_label(ms: float, relative: bool, span_ms: float) -> str:
    if relative:
        return f"{ms / 1000:g} s"
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    if span_ms > 86_400_000:
        return moment.strftime("%m-%d %H:%M")
    return moment.strftime("%H:%M" if span_ms > 1_800_000 else "%H:%M:%S")


PLOT_WIDTH, ROW_HEIGHT, TOP, CHAR_WIDTH = 860, 24, 40, 7.3
"""Pixels; CHAR_WIDTH fits the 12 px monospace labels."""


@dataclass(frozen=True)
class _Scale:
    """Milliseconds to SVG x pixels."""

    lo: float
    span: float
    left: float
    """Where the plot starts: right of the longest label."""

    @classmethod
    def of(cls, rows: Sequence[TimelineRow], relative: bool) -> _Scale:
        lo = 0 if relative else min((b.start_ms for r in rows for b in r.bars), default=0)
        ends = (b.end_ms - (r.start_ms if relative else 0) for r in rows for b in r.bars)
        left = 16 + CHAR_WIDTH * max((len(r.label) for r in rows), default=0)
        return cls(lo, max(max(ends, default=lo + 1) - lo, 1), left)

    def x(self, ms: float) -> float:
        return self.left + (ms - self.lo) / self.span * PLOT_WIDTH


def _svg_bars(rows: Sequence[TimelineRow], scale: _Scale, relative: bool) -> list[str]:
    parts = []
    for y, row in enumerate(rows):
        top = TOP + y * ROW_HEIGHT
        parts.append(f'<text x="4" y="{top + 16}" class="label">{html.escape(row.label)}</text>')
        origin = row.start_ms if relative else 0
        for bar in row.bars:
            left, right = scale.x(bar.start_ms - origin), scale.x(bar.end_ms - origin)
            tip = (
                f"{bar.state}: {_iso(bar.start_ms)} to "
                f"{'(open) ' if bar.open else ''}{_iso(bar.end_ms)}, "
                f"{(bar.end_ms - bar.start_ms) / 1000:g} s"
            )
            fill = f"url(#{_hatch_id(bar.state)})" if bar.open else colour(bar.state)
            css = ' class="open"' if bar.open else ""
            parts.append(
                f'<rect x="{left:.1f}" y="{top + 3}" width="{max(right - left, 1.5):.1f}" '
                f'height="{ROW_HEIGHT - 6}" fill="{fill}"{css}>'
                f"<title>{html.escape(tip)}</title></rect>"
            )
    return parts


def _hatch_id(state: str) -> str:
    return "open-" + "".join(c if c.isalnum() else "_" for c in state)


def _svg_hatches(rows: Sequence[TimelineRow]) -> list[str]:
    """An open span is hatched, as in the PNG: its state's colour crossed by dark diagonals."""
    open_states = dict.fromkeys(bar.state for row in rows for bar in row.bars if bar.open)
    return [
        f'<pattern id="{_hatch_id(state)}" patternUnits="userSpaceOnUse" width="8" height="8" '
        'patternTransform="rotate(45)">'
        f'<path d="M0 0h8v8h-8z" fill="{colour(state)}"/>'
        '<line x1="0" y1="0" x2="0" y2="8" stroke="#000" stroke-width="3"/></pattern>'
        for state in open_states
    ]


def _svg_ticks(scale: _Scale, bottom: int, relative: bool) -> list[str]:
    parts = []
    for i in range(7):
        ms = scale.lo + scale.span * i / 6
        x = scale.x(ms)
        label = html.escape(_tick_label(ms, relative, scale.span))
        parts.append(
            f'<line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{bottom}" class="grid"/>'
            f'<text x="{x:.1f}" y="{bottom + 16}" class="tick">{label}</text>'
        )
    return parts


def render_html(rows: Sequence[TimelineRow], title: str, relative: bool) -> str:
    """One self-contained HTML page: an inline SVG chart with hover titles and a legend."""
    scale = _Scale.of(rows, relative)
    bottom = TOP + len(rows) * ROW_HEIGHT
    legend = "".join(
        f'<span class="key"><i style="background:{colour(s)}"></i>{html.escape(s)}</span>'
        for s in _states(rows)
    )
    height = bottom + 40
    return _PAGE.format(
        title=html.escape(title),
        legend=legend,
        width=round(scale.left + PLOT_WIDTH + 40),
        height=height,
        defs="".join(_svg_hatches(rows)),
        body="\n".join([*_svg_bars(rows, scale, relative), *_svg_ticks(scale, bottom, relative)]),
        axis="seconds since the rescale started" if relative else "time (UTC)",
        axis_x=scale.left + PLOT_WIDTH / 2,
        axis_y=height - 6,
    )


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 24px; }}
.label {{ font: 12px ui-monospace, monospace; }}
.tick {{ font: 11px system-ui, sans-serif; text-anchor: middle; fill: #555; }}
.grid {{ stroke: #ddd; }}
rect.open {{ stroke: #000; stroke-dasharray: 3 2; }}
.key {{ margin-right: 14px; white-space: nowrap; }}
.key i {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px;
          vertical-align: -1px; }}
.key i.hatch {{ border: 1px dashed #000;
  background: repeating-linear-gradient(45deg, #000 0 2px, #fff 2px 5px); }}
</style></head>
<body><h1>{title}</h1>
<p>{legend}<span class="key"><i class="hatch"></i>open span</span></p>
<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}">
<defs>{defs}</defs>
{body}
<text x="{axis_x}" y="{axis_y}" class="tick">{axis}</text>
</svg>
<p>Hover a bar for its state, times and duration.</p>
</body></html>
"""
