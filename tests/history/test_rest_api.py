"""The REST API's pure core (flinkjson): rows in, a real Flink 2.3.0's JSON out.

The captured answers (flink-2.3.0/) are the expected values: rows holding the same
facts as Flink's records must give equal JSON, field for field, except the fields
`rest_golden.UNEQUAL` lists with the reason.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest

from services.history.restapi import flinkjson
from tests.history import rest_golden as golden


def _rows() -> list[dict]:
    return [golden.latest_row(rec) for rec in golden.records()]


def test_history_is_flinks_answer_newest_first() -> None:
    assert flinkjson.history(_rows(), limit=100, offset=0) == golden.answer("history")


def test_history_pages_by_limit_and_offset() -> None:
    whole = golden.answer("history")
    assert flinkjson.history(_rows(), limit=1, offset=0) == whole[:1]
    assert flinkjson.history(_rows(), limit=1, offset=1) == whole[1:]
    assert flinkjson.history(_rows(), limit=5, offset=2) == []


def test_overview_is_flinks_answer() -> None:
    assert flinkjson.overview(_rows()) == golden.answer("overview")


def test_summary_is_flinks_answer_nan_and_zeros_for_empty_states() -> None:
    got = flinkjson.summary(_rows())
    assert got == golden.answer("summary")
    # the body is valid JSON: NaN is the string Jackson writes, never a bare NaN
    assert json.loads(json.dumps(got, allow_nan=False)) == got


def test_details_is_flinks_answer() -> None:
    for rec in golden.records():
        vertices, slots, states = golden.child_rows(rec)
        got = flinkjson.details(golden.latest_row(rec), vertices, slots, states)
        assert got == golden.answer(f"details-{rec['rescaleUuid']}")


def test_config_is_flinks_answer_but_the_slot_idle_timeout() -> None:
    got = flinkjson.config(flinkjson.settings_of(golden.latest_row(golden.records()[0])))
    expected = golden.answer("config")
    unequal = {field for endpoint, field in golden.UNEQUAL if endpoint == "config"}
    assert {k: v for k, v in got.items() if k not in unequal} == {
        k: v for k, v in expected.items() if k not in unequal
    }
    assert got["slotIdleTimeoutInMillis"] is None
    reactive = flinkjson.config({"scheduler-mode": "reactive"})
    assert reactive["schedulerExecutionMode"] == "REACTIVE"
    assert reactive["rescaleHistoryMax"] is None


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        # commons-math3 Percentile, LEGACY estimation: position p(n+1)/100
        ([4156, 6590], 50.0, 5373.0),
        ([4156, 6590], 90.0, 6590.0),
        (list(range(1, 11)), 50.0, 5.5),
        (list(range(1, 11)), 90.0, 9.9),
        (list(range(1, 11)), 5.0, 1.0),  # position below 1: the minimum
        (list(range(1, 11)), 99.9, 10.0),  # at or above n: the maximum
        ([7], 99.0, 7.0),
        ([10, 20, 30, 40], 25.0, 12.5),
    ],
)
def test_percentile_is_commons_math_legacy(values: list[int], p: float, expected: float) -> None:
    assert flinkjson.percentile(values, p) == pytest.approx(expected)


def test_stats_of_nothing_are_zeros_and_nan_and_negative_durations_skipped() -> None:
    assert flinkjson.stats([]) == {
        "min": 0,
        "max": 0,
        "avg": 0,
        **{name: "NaN" for name, _ in flinkjson.QUANTILES},
    }
    assert math.isnan(flinkjson.percentile([], 50.0))
    assert flinkjson.stats([-5, 3, 4])["min"] == 3
    assert flinkjson.stats([1, 2])["avg"] == 1  # Java's long division


def test_summary_window_takes_percentiles_of_the_last_rescales_only() -> None:
    rows = [
        {
            **golden.latest_row(golden.records()[0]),
            "rescale_uuid": f"r{i}",
            "start_timestamp_ms": i * 10_000,
            "end_timestamp_ms": i * 10_000 + d,
            "duration_ms": d,
        }
        for i, d in enumerate([1000, 10, 20, 30])
    ]
    whole = flinkjson.summary(rows)["rescalesDurationStatsInMillis"]
    recent = flinkjson.summary(rows, window=3)["rescalesDurationStatsInMillis"]
    assert (whole["min"], whole["max"], whole["avg"]) == (
        recent["min"],
        recent["max"],
        recent["avg"],
    )
    assert whole["p99"] == 1000.0 and recent["p99"] == 30.0


def test_in_progress_rescales_are_counted_not_measured() -> None:
    rows = [
        *_rows(),
        {
            **_rows()[0],
            "rescale_uuid": "x",
            "terminal_state": None,
            "terminated_reason": None,
            "end_timestamp_ms": None,
            "duration_ms": None,
            "start_timestamp_ms": 1795935500000,
        },
    ]
    summary = flinkjson.summary(rows)
    assert summary["rescalesCounts"]["inProgress"] == 1
    assert (
        summary["rescalesDurationStatsInMillis"]
        == golden.answer("summary")["rescalesDurationStatsInMillis"]
    )
    assert flinkjson.history(rows, 1, 0)[0]["rescaleUuid"] == "x"
    assert flinkjson.overview(rows)["latest"] == golden.answer("overview")["latest"]


def _fleet_table() -> Any:
    import pyarrow as pa

    hour = 3_600_000
    rows = []
    # job a: completed with slots 2, 4, 2, 4 in the last hour (2 reversals), and one
    # completed 3 hours earlier at 8 slots (outside the window); one failed, one in progress
    for i, slots in enumerate([8, 2, 4, 2, 4]):
        start = 10 * hour + i * 60_000 - (3 * hour if i == 0 else 0)
        rows.append(("a", f"a{i}", "COMPLETED", start, start + 1_000, slots))
    rows.append(("a", "a-f", "FAILED", 10 * hour + 400_000, 10 * hour + 401_000, 9))
    rows.append(("a", "a-p", None, 10 * hour + 500_000, None, None))
    rows.append(("b", "b0", "IGNORED", hour, hour + 5, None))
    names = [
        "job_id",
        "rescale_uuid",
        "terminal_state",
        "start_timestamp_ms",
        "end_timestamp_ms",
        "total_post_rescale_slots",
    ]
    return pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})


def test_fleet_figures_count_outcomes_and_score_flapping_as_job_summary_does() -> None:
    from services.history.restapi.fleet import figures, reversals
    from services.history.restapi.store import Jobs

    found = {f.job_id: f for f in figures(Jobs.of(_fleet_table()))}
    a, b = found["a"], found["b"]
    assert (a.total, a.completed, a.failed, a.ignored, a.in_progress) == (7, 5, 1, 0, 1)
    assert a.flapping == 2  # 2 -> 4 -> 2 -> 4 in the hour; the 8 of 3 hours before is out
    assert a.latest["rescale_uuid"] == "a-p"  # the newest start
    assert (b.total, b.ignored, b.flapping) == (1, 1, 0)
    assert reversals([1, 1, 2, 2, 1, 3]) == 2


def test_children_are_looked_up_by_uuid_in_each_file_and_only_the_latest_revisions() -> None:
    import pyarrow as pa

    from services.history.restapi.sliced import Sliced
    from services.history.restapi.store import children

    def part(rows: list[tuple[str, int, int, str]]) -> Sliced:
        names = ["rescale_uuid", "kafka_partition", "kafka_offset", "state"]
        table = pa.table({n: [r[i] for r in rows] for i, n in enumerate(names)})
        return Sliced.of(table, "rescale_uuid")

    # two data files; rescale a's revision at offset 1 spans both, its older one (0) too
    first = part([("b", 0, 2, "Executing"), ("a", 0, 0, "old"), ("a", 0, 1, "Created")])
    second = part([("a", 0, 1, "Executing"), ("c", 0, 3, "Executing")])
    assert first.slices == {"b": (0, 1), "a": (1, 2)}  # grouped, in order of first appearance
    assert [r["state"] for r in first.table.slice(1, 2).to_pylist()] == ["old", "Created"]
    latest = [
        {"rescale_uuid": "a", "kafka_partition": 0, "kafka_offset": 1},
        {"rescale_uuid": "b", "kafka_partition": 0, "kafka_offset": 9},  # not this revision's
        {"rescale_uuid": "d", "kafka_partition": 0, "kafka_offset": 4},  # no children at all
    ]
    found = children([first, second], latest)
    assert {u: sorted(r["state"] for r in rows) for u, rows in found.items()} == {
        "a": ["Created", "Executing"],
        "b": [],
        "d": [],
    }
    assert children([first, second], []) == {}
    keyless = Sliced.of(pa.table({"rescale_uuid": ["x", None, "x"]}), "rescale_uuid")
    assert keyless.slices == {"x": (0, 2)}
    assert (
        Sliced.of(pa.table({"rescale_uuid": pa.array([], pa.string())}), "rescale_uuid").slices
        == {}
    )


def test_serve_takes_no_spark_master_and_run_still_does(capsys: pytest.CaptureFixture[str]) -> None:
    from services.cli import parse_args

    with pytest.raises(SystemExit):
        parse_args(["history", "serve", "--help"])
    shown = capsys.readouterr().out
    assert "--port-file" in shown and "--master" not in shown
    with pytest.raises(SystemExit):
        parse_args(["history", "serve", "--master", "local[2]"])
    assert "unrecognized arguments: --master" in capsys.readouterr().err
    assert parse_args(["history", "run", "--master", "local[2]"]).master == "local[2]"
