"""Text output of the query CLI, FLIP-487 formatting and the timeline's shapes: pure functions."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from services.history.overview import format_overview, format_summary, human_ms
from services.history.render import render
from services.history.timeline import render_html, timeline_rows

COLUMNS = ["job_id", "total", "p50", "settings", "seen"]
ROWS = [
    ("a", 5, 25000.0, {"k": "30000"}, datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)),
    ("bb", 12, None, {}, None),
]


def test_table_aligns_columns_and_counts_rows() -> None:
    lines = render("table", COLUMNS, ROWS).splitlines()
    assert [c.strip() for c in lines[0].split("|")] == COLUMNS
    assert lines[0].split(" | ")[2] == "  p50"  # a numeric column is right-aligned
    assert lines[1].startswith("-------+-")
    assert lines[2].split(" | ")[:3] == ["a     ", "    5", "25000"]
    assert "NULL" in lines[3]
    assert lines[-1] == "(2 rows)"


def test_csv_keeps_full_values_and_empty_nulls() -> None:
    assert render("csv", COLUMNS, ROWS).splitlines() == [
        "job_id,total,p50,settings,seen",
        'a,5,25000.0,"{""k"":""30000""}",2024-01-02 03:04:05+00:00',
        "bb,12,,{},",
    ]


def test_json_lines_are_one_object_per_row() -> None:
    first, second = (json.loads(line) for line in render("json", COLUMNS, ROWS).splitlines())
    assert first == {
        "job_id": "a",
        "total": 5,
        "p50": 25000.0,
        "settings": {"k": "30000"},
        "seen": "2024-01-02 03:04:05+00:00",
    }
    assert second["p50"] is None


def test_human_durations() -> None:
    assert [human_ms(v) for v in (None, 850, 31_200, 250_000, 7_380_000)] == [
        "-",
        "850 ms",
        "31.2 s",
        "4 min 10 s",
        "2 h 03 min",
    ]


def test_overview_and_summary_text() -> None:
    counts = {"in_progress": 1, "completed": 2, "failed": 0, "ignored": 3, "total": 6}
    latest = [
        {
            "terminal_state": "COMPLETED",
            "job_id": "j",
            "rescale_uuid": "u-1",
            "trigger_cause": "NEW_RESOURCE_AVAILABLE",
            "terminated_reason": "SUCCEEDED",
            "start_time": None,
            "end_time": None,
            "duration_ms": 31_000,
        }
    ]
    text = format_overview("job j", counts, latest)
    assert "  completed           2" in text
    assert "u-1" in text and "31.0 s" in text
    assert "(no terminated rescale yet)" in format_overview("job j", counts, [])
    stats = [{"terminal_state": "ALL", "count": 2, "min": 1_000, "avg": 1_500.0, "max": 2_000}]
    stats[0].update(
        {"p50": 1_500.0, "p90": 1_900.0, "p95": 1_950.0, "p99": 1_990.0, "p99.9": 1_999.0}
    )
    summary = format_summary("job j", stats)
    assert "p99.9" in summary and "2.0 s" in summary


def _span_row(
    uuid: str, index: int, state: str, enter: int, leave: int | None
) -> dict[str, object]:
    return {
        "rescale_uuid": uuid,
        "start_timestamp_ms": 1_000 if uuid == "r-1" else 50_000,
        "updated_at_ms": 60_000,
        "trigger_cause": "UPDATE_REQUIREMENT",
        "terminal_state": None if leave is None else "COMPLETED",
        "terminated_reason": None if leave is None else "SUCCEEDED",
        "span_index": index,
        "state": state,
        "enter_timestamp_ms": enter,
        "leave_timestamp_ms": leave,
    }


def test_open_spans_reach_the_latest_revision_and_html_is_self_contained() -> None:
    rows = timeline_rows(
        [
            _span_row("r-2", 0, "WaitingForResources", 50_000, None),
            _span_row("r-1", 0, "Executing", 1_000, 2_000),
            _span_row("r-1", 1, "Restarting", 2_000, 3_000),
        ]
    )
    assert [row.rescale_uuid for row in rows] == ["r-1", "r-2"]
    assert rows[1].bars[0].end_ms == 60_000 and rows[1].bars[0].open
    assert rows[0].label == "r-1 UPDATE_REQUIREMENT -> SUCCEEDED"
    page = render_html(rows, "Rescales of job <j>", relative=False)
    assert page.count("<rect") == 3  # one per span
    assert page.count('fill="url(#open-WaitingForResources)"') == 1  # the open one hatched
    assert "Rescales of job &lt;j&gt;" in page
    assert "http" not in page.replace('xmlns="http://www.w3.org/2000/svg"', "")
