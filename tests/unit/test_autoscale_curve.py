"""The trade-off curve's reading of benchmark results (bench/autoscale_curve.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from bench.autoscale_curve import labelled, main, points, table


def _result(controller: str, p99: float, slots: float) -> dict[str, object]:
    return {
        "trace": "sine",
        "controller": controller,
        "rescales": 2,
        "downtime_s": 0.25,
        "backlog_p99": p99,
        "slot_seconds": slots,
        "samples": [],
    }


def test_each_run_is_a_point_labelled_by_its_setting(tmp_path: Path) -> None:
    found = points("0.5", [_result("peer", 70_573.4, 4_943.0)])
    assert (found[0].label, found[0].controller, found[0].backlog_p99) == ("0.5", "peer", 70_573.4)
    rows = table(
        [*found, *points("0.9", [_result("peer", 75_061, 4_843), _result("scalefold", 1, 2)])]
    )
    assert rows[2] == "| sine | 0.5 | peer | 2 | 0.2 | 70573 | 4943 |"
    assert [row.split(" | ")[1:3] for row in rows[2:]] == [
        ["0.5", "peer"],
        ["0.9", "peer"],
        ["0.9", "scalefold"],
    ]
    results = tmp_path / "r.json"
    results.write_text(json.dumps([_result("peer", 1, 2)]))
    assert main([f"a={results}", "--picture", str(tmp_path / "c.png")]) == 0
    assert (tmp_path / "c.png").stat().st_size > 0
    assert main([f"b={tmp_path / 'none.json'}", "--picture", str(tmp_path / "d.png")]) == 2
    with pytest.raises(argparse.ArgumentTypeError):
        labelled("no-path")
