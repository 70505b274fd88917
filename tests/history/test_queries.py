"""The query layer on a hand-made history: exact aggregates, and the `history` CLI verbs.

No broker: the records go through the same decode and table transforms as the
streaming job, written as plain Parquet (the views read such directories as is).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from services.cli import main
from services.contracts import Codec
from services.contracts import records as r
from services.history import aggregates, planner, rules, synthetic
from services.history.catalog import build_views
from services.history.decode import RescaleSchemas, decode, valid
from services.history.jobview import JobView, PlannerConfig, Rescale
from services.history.lake import Lake, timeline_spans
from services.history.paths import Layout
from services.history.restapi.store import SCALEFOLD_TABLES, Source
from services.history.tables import LATEST_TABLE, LEGACY_TABLES, NESTED, TABLES
from services.history.upkeep import backfill_downtime
from services.history.upsert import write_tables
from services.history.views import KAFKA_SOURCE_SCHEMA

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
S = 1_000


def _spans(start: int, downtime: list[tuple[str, int]], total: int) -> list[synthetic.Span]:
    """Executing for 1 s, then the `downtime` states, then Executing until `total` ms."""
    spans: list[synthetic.Span] = [("Executing", start, start + S)]
    at = start + S
    for state, length in downtime:
        spans.append((state, at, at + length))
        at += length
    spans.append(("Executing", at, start + total))
    return spans


def _job_a() -> list[dict[str, Any]]:
    """Two completed, one failed, one ignored, one in progress; durations 10/20/30/40 s."""
    group = synthetic.Group(desired=4, pre=2, post=2)
    rows = [
        ("SUCCEEDED", 10 * S, [("Restarting", 1 * S), ("WaitingForResources", 5 * S)], group),
        (
            "SUCCEEDED",
            20 * S,
            [("Restarting", 2 * S), ("CreatingExecutionGraph", 2 * S)],
            synthetic.Group(desired=4, pre=2, post=4),
        ),
        ("EXCEPTION_OCCURRED", 30 * S, [("Restarting", 3 * S)], group),
        ("RESOURCE_REQUIREMENTS_UPDATED", 40 * S, [("WaitingForResources", 4 * S)], group),
    ]
    records = []
    for i, (reason, total, downtime, slots) in enumerate(rows):
        start = T0 + i * 60 * S
        spans = _spans(start, downtime, total)
        records.append(
            synthetic.rescale(
                "a", f"a-{i}", spans=spans, groups=[slots], reason=reason, available_slots=4
            )
        )
    waiting = [
        ("Restarting", T0 + 300 * S, T0 + 301 * S),
        ("WaitingForResources", T0 + 301 * S, None),
    ]
    records.append(synthetic.rescale("a", "a-4", spans=waiting, available_slots=4))
    return records


def _job_b() -> list[dict[str, Any]]:
    """Five completed rescales alternating 2, 4, 2, 4, 2 slots: three reversals."""
    records = []
    for i, post in enumerate([2, 4, 2, 4, 2]):
        start = T0 + i * 300 * S
        records.append(
            synthetic.rescale(
                "b",
                f"b-{i}",
                spans=_spans(start, [("Restarting", S)], 5 * S),
                groups=[synthetic.Group(desired=post, pre=6 - post, post=post)],
                reason="SUCCEEDED",
                available_slots=post,
                cooldown_ms=30_000,
            )
        )
    return records


@pytest.fixture(scope="module")
def layout(spark: Any, codec: Codec, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    records = [*_job_a(), *_job_b()]
    stale = {**records[0], "revision": 0}  # an older revision arriving late must not win
    when = datetime(2024, 1, 1, tzinfo=UTC)  # Kafka's timestamp column; unused here
    rows = [
        (rec["jobId"].encode(), codec.encode(r.RESCALE, rec), "t", 0, offset, when, 0)
        for offset, rec in enumerate([*records, stale])
    ]
    raw = spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA)
    # Decoded once; the checkpoint cuts the Avro expressions out of the five table plans.
    decoded = valid(decode(raw, RescaleSchemas.of(codec.registry))).localCheckpoint()
    result = Layout(tmp_path_factory.mktemp("queries"))
    write_tables({name: transform(decoded) for name, transform in TABLES.items()}, result.table)
    yield result


@pytest.fixture(scope="module")
def found(spark: Any, layout: Layout, codec: Codec) -> dict[str, Any]:
    return build_views(spark, layout, RescaleSchemas.of(codec.registry))


def test_job_summary_counts_percentiles_downtime_and_flapping(found: dict[str, Any]) -> None:
    rows = {row["job_id"]: row for row in found["job_summary"].collect()}
    a, b = rows["a"], rows["b"]
    assert (a["total"], a["in_progress"], a["completed"], a["failed"], a["ignored"]) == (
        5,
        1,
        2,
        1,
        1,
    )
    assert a["reason_succeeded"] == 2
    assert a["reason_exception_occurred"] == 1
    assert a["reason_resource_requirements_updated"] == 1
    assert a["reason_job_canceled"] == 0
    # durations 10, 20, 30, 40 s; Spark's percentile interpolates linearly
    assert (a["duration_p50_ms"], a["duration_p95_ms"], a["duration_p99_ms"]) == (
        25_000.0,
        38_500.0,
        39_700.0,
    )
    # downtime: 6 s, 4 s, 3 s, 4 s (every span that is not Executing)
    assert a["downtime_p50_ms"] == 4_000.0
    assert a["rescales_per_hour"] == 5.0  # five starts within one hour
    assert a["flapping_score"] == 0  # 2 -> 4 slots: one direction
    assert b["flapping_score"] == 3
    assert b["rescales_per_hour"] == 5.0
    (fleet,) = found["fleet_summary"].collect()
    assert (fleet["jobs"], fleet["total"], fleet["max_flapping_score"]) == (2, 10, 3)


def _downtimes(frame: Any) -> dict[str, int | None]:
    return {row["rescale_uuid"]: row["downtime_ms"] for row in frame.collect()}


def test_each_rescale_carries_its_downtime_from_the_ingest(found: dict[str, Any]) -> None:
    expected = {"a-0": 6 * S, "a-1": 4 * S, "a-2": 3 * S, "a-3": 4 * S, "a-4": None}
    assert _downtimes(found["rescales"]) == {**expected, **{f"b-{i}": S for i in range(5)}}


def test_a_latest_table_of_an_earlier_version_gets_the_same_downtimes_once(
    spark: Any, layout: Layout, found: dict[str, Any], tmp_path: Path
) -> None:
    """A `rescales_latest` written before the ingest derived the downtime: filled in once
    from the raw spans, to the values the ingest gives."""
    old = Layout(tmp_path)  # with the table of spans of then (now the rows' arrays)
    found["raw_rescale_states"].write.format("delta").save(str(old.table("rescale_states")))
    latest = spark.read.format("delta").load(str(layout.table(LATEST_TABLE)))
    latest.drop("downtime_ms").write.format("delta").save(str(old.table(LATEST_TABLE)))
    assert backfill_downtime(spark, old.table(LATEST_TABLE), old.table("rescale_states"))
    backfilled = spark.read.format("delta").load(str(old.table(LATEST_TABLE)))
    assert _downtimes(backfilled) == _downtimes(found["rescales"])
    assert not backfill_downtime(spark, old.table(LATEST_TABLE), old.table("rescale_states"))


def test_a_history_written_before_the_arrays_shows_the_same_children(
    spark: Any, layout: Layout, found: dict[str, Any], codec: Codec, tmp_path: Path
) -> None:
    """Until 2026-12-04 a row's children were tables of their own: a history written then
    (rows without the arrays, the child tables beside them) shows the same children in
    the views, the timeline and the REST API's details."""
    old = Layout(tmp_path)
    for name in (*TABLES, LATEST_TABLE):
        frame = spark.read.format("delta").load(str(layout.table(name)))
        frame.drop(*NESTED).write.format("delta").save(str(old.table(name)))
    for name in LEGACY_TABLES:
        found[f"raw_{name}"].write.format("delta").save(str(old.table(name)))
    then = build_views(spark, old, RescaleSchemas.of(codec.registry))
    for name in (*LEGACY_TABLES, *(f"raw_{name}" for name in LEGACY_TABLES)):
        assert Counter(map(tuple, then[name].collect())) == Counter(
            map(tuple, found[name].collect())
        ), name
    now, before = Lake(layout.data_dir), Lake(old.data_dir)
    assert timeline_spans(before, "a", 10) == timeline_spans(now, "a", 10)
    stores = [Source(lake.data_dir / "tables", SCALEFOLD_TABLES) for lake in (now, before)]
    details = [store.details(store.jobs().rows("a") or []) for store in stores]
    assert details[0].keys() == details[1].keys()
    for uuid, kinds in details[0].items():
        for kind, rows in kinds.items():
            index = {"vertices": "vertex_index", "slots": "slot_index"}.get(kind, "span_index")
            theirs = sorted(details[1][uuid][kind], key=lambda row: row[index])
            assert [{k: row[k] for k in rows[0]} for row in theirs] == rows if rows else not theirs


def test_a_late_stale_revision_does_not_replace_the_latest(found: dict[str, Any]) -> None:
    row = found["rescales"].where("rescale_uuid = 'a-0'").first()
    assert row["revision"] == 1
    assert row["terminal_state"] == "COMPLETED"
    assert found["raw_rescales"].where("rescale_uuid = 'a-0'").count() == 2


def test_the_flapping_window_is_the_hour_ending_at_each_jobs_latest_completed_rescale(
    spark: Any,
) -> None:
    hour = aggregates.FLAP_WINDOW_MS
    rows = [  # job, rescale, terminal state, end
        ("x", "x-last", "COMPLETED", T0),
        ("x", "x-edge", "COMPLETED", T0 - hour),  # the window includes its start
        ("x", "x-old", "COMPLETED", T0 - hour - 1),
        ("x", "x-failed", "FAILED", T0 + 1),  # neither in the window nor its anchor
        ("y", "y-only", "COMPLETED", T0 - 5 * hour),  # each job has its own anchor
        ("y", "y-open", None, None),
    ]
    latest = spark.createDataFrame(
        rows, "job_id string, rescale_uuid string, terminal_state string, end_timestamp_ms long"
    )
    window = aggregates.completed_in_window(latest).select("rescale_uuid").collect()
    assert sorted(row[0] for row in window) == ["x-edge", "x-last", "y-only"]


def test_sql_and_python_planner_agree_on_flapping(found: dict[str, Any]) -> None:
    """The flapping score has two definitions, Spark's for `job_summary` (aggregates.py) and
    the planner's (rules.py): over the same rescales they agree."""
    rows = [row.asDict() for row in found["rescales"].collect()]
    summary = {r["job_id"]: r["flapping_score"] for r in found["job_summary"].collect()}
    for job in ("a", "b"):
        view = JobView.of([Rescale.from_row(x) for x in rows if x["job_id"] == job])
        assert rules.flapping(view, aggregates.FLAP_WINDOW_MS)[0] == summary[job]
    assert summary["b"] == 3
    commands = planner.plan(rows, T0 + 10 * 3_600_000, PlannerConfig())
    # job a: its latest terminated rescale was IGNORED and a-4 waits with enough slots
    assert [(c.job_id, c.action, c.amount) for c in commands] == [("b", "RAISE_COOLDOWN", 60_000)]
    assert commands[0].evidence == tuple(f"b-{i}" for i in range(5))


def _cli(layout: Layout, *args: str) -> int:
    return main(["history", *args[:1], "--data-dir", str(layout.data_dir), *args[1:]])


def test_sql_prints_csv_and_json(layout: Layout, capsys: pytest.CaptureFixture[str]) -> None:
    query = "SELECT job_id, total, flapping_score FROM job_summary ORDER BY job_id"
    assert _cli(layout, "sql", query, "--format", "csv") == 0
    assert capsys.readouterr().out.splitlines() == [
        "job_id,total,flapping_score",
        "a,5,0",
        "b,5,3",
    ]
    assert _cli(layout, "sql", query, "--format", "json") == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[1] == {"job_id": "b", "total": 5, "flapping_score": 3}
    assert _cli(layout, "sql", "SELECT state, count(*) n FROM rescale_states GROUP BY state") == 0
    table = capsys.readouterr().out
    assert "WaitingForResources" in table and "(4 rows)" in table


def test_sql_reports_a_bad_query_with_the_view_names(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(layout, "sql", "SELECT * FROM no_such_view") == 1
    err = capsys.readouterr().err
    assert "no_such_view" in err
    assert "job_summary" in err


def test_summary_is_flip_487s_overview_and_summary(
    layout: Layout, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _cli(layout, "summary", "--job", "a") == 0
    out = capsys.readouterr().out
    assert "Rescale overview of job a" in out
    for label, count in (("in progress", 1), ("completed", 2), ("failed", 1), ("ignored", 1)):
        assert any(line.split() == [*label.split(), str(count)] for line in out.splitlines()), label
    assert "a-3" in out  # the latest IGNORED rescale
    stats = next(line for line in out.splitlines() if line.strip().startswith("ALL"))
    assert "25.0 s" in stats  # p50 of 10/20/30/40 s
    assert _cli(layout, "summary", "--job", "nobody") == 1


def test_timeline_draws_png_and_html(layout: Layout, tmp_path: Path) -> None:
    png, page = tmp_path / "a.png", tmp_path / "a.html"
    assert _cli(layout, "timeline", "--job", "a", "--out", str(png)) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert png.stat().st_size > 10_000
    assert _cli(layout, "timeline", "--job", "a", "--out", str(page), "--relative") == 0
    text = page.read_text()
    assert text.count("<rect") == 4 + 4 + 3 + 3 + 2  # the spans of a-0 .. a-4
    for state in ("Executing", "Restarting", "WaitingForResources", "CreatingExecutionGraph"):
        assert state in text
    assert 'class="open"' in text  # a-4 is still waiting
    assert "<script" not in text
