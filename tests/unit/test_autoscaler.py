"""The history service's autoscaler (services/history/autoscaler.py, decisions.py) over
Delta tables written as the history writes them, asking the scheduler core's own fold
(services/scheduler/foresight.py) of the job's inputs: every step recorded in
`scaling_decisions` with its evidence, sent only in `scale` mode, only when the fold
foresees a rescale, never twice within the stabilization interval, across restarts."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from services.contracts.commands import ScalingAction, ScalingCommand
from services.contracts.events import (
    Event,
    JobSubmitted,
    TaskManagerRegistered,
    VertexSpec,
)
from services.contracts.foresight import Forecast, ForecastUnknownError
from services.contracts.jobconfig import SUBMISSION_STABILIZATION
from services.contracts.settings import Settings
from services.history import parallelism as pl
from services.history.autoscaler import Autoscaler, AutoscalerOptions, Mode
from services.history.decisions import TABLE, summary_lines
from services.history.lake import Lake
from services.scheduler.foresight import foresee
from tests.unit import test_advice
from tests.unit.test_advice import T0

lake = test_advice.lake  # the fixture: j1 behind, j2 without metrics

NOW = T0 + 121_000
WINDOW = 20_000
"""j1's newest run: samples at +100, +110 and +120 s fill it."""
KEY = "c1.j1"


def inputs(taskmanagers: int) -> list[Event]:
    """What the bridge recorded of j1: Source and Work at 2, Work at most 8, one slot-sharing
    group, `taskmanagers` TaskManagers of one slot."""
    vertices = (
        VertexSpec("source", "Source", "g", "g", 2, 8),
        VertexSpec("work", "Work", "g", "g", 2, 8),
    )
    config = ((SUBMISSION_STABILIZATION, "1s"),)
    return [
        JobSubmitted(KEY, T0, "workload", vertices, None, config),
        *(TaskManagerRegistered(KEY, T0 + n, f"tm-{n}", 1, None) for n in range(taskmanagers)),
    ]


def folding(events: list[Event]) -> Any:
    def forecaster(
        _settings: Settings, job: str, targets: Mapping[str, int], now_ms: int
    ) -> Forecast:
        if job != KEY:
            raise ForecastUnknownError(f"job {job} has no input the scheduler could fold")
        return foresee(job, events, targets, now_ms)

    return forecaster


def decisions(lake: Lake) -> list[dict[str, Any]]:
    return lake.rows("SELECT * FROM d ORDER BY decided_at_ms, job_key", {"d": TABLE})


def test_advise_records_the_decision_and_what_the_adaptive_scheduler_would_do(lake: Lake) -> None:
    options = AutoscalerOptions(window_ms=WINDOW)
    scaler = Autoscaler(lake.data_dir, Settings(), options, folding(inputs(8)))
    rows = scaler.tick(NOW)
    by_job = {row["job_key"]: row for row in rows}
    advised = by_job[KEY]
    assert advised["outcome"] == "ADVISED" and advised["mode"] == "advise"
    assert advised["reason"] == "rescale: Work 2 -> 8 (advisor mode: not sent)"
    assert advised["forecast"].startswith("UPDATE_REQUIREMENT rescale")
    work = advised["vertices"][1]
    assert (work["current"], work["target"], work["reached"]) == (2, 8, 8)
    assert advised["restart_ms"] == 6_000 and advised["samples"] == 3
    assert by_job["c1.j2"]["outcome"] == "NO_WINDOW"
    assert "Work: no read_records reported" in by_job["c1.j2"]["reason"]
    assert scaler.tick(NOW + 10_000) == []  # unchanged: not recorded again ...
    assert [r["job_key"] for r in scaler.tick(NOW + 61_000)] == [KEY, "c1.j2"]  # ... for a minute
    assert len(decisions(Lake(lake.data_dir))) == 4
    lines = summary_lines(Lake(lake.data_dir), None)  # `history summary`'s
    assert (
        lines[0] == "Parallelism decisions (scaling_decisions): 4 recorded: 2 ADVISED, 2 NO_WINDOW"
    )
    assert lines[1].startswith("  c1.j1, newest at 2026-") and lines[1].endswith(
        "ADVISED: rescale: Work 2 -> 8 (advisor mode: not sent)"
    )
    assert len(summary_lines(Lake(lake.data_dir), "c1.j2")) == 2
    from services.history import lake as sides
    from services.history.reading import _decisions

    fleet = [("the fleet", None, sides.SCALEFOLD), ("a real Flink's jobs", None, sides.FLINK)]
    assert _decisions(Lake(lake.data_dir), fleet) == lines
    one = [("Flink's records of job c1.j2", "c1.j2", sides.FLINK)]
    assert _decisions(Lake(lake.data_dir), one) == summary_lines(Lake(lake.data_dir), "c1.j2")
    assert _decisions(Lake(lake.data_dir), [("job x", "x", sides.SCALEFOLD)]) == []


def test_scale_sends_once_and_a_restart_keeps_the_stabilization(lake: Lake) -> None:
    sent: list[ScalingCommand] = []
    options = AutoscalerOptions(window_ms=WINDOW, mode=Mode.SCALE)
    scaler = Autoscaler(lake.data_dir, Settings(), options, folding(inputs(8)), sent.append)
    (row,) = [r for r in scaler.tick(NOW) if r["job_key"] == KEY]
    (command,) = sent
    assert row["outcome"] == "SENT" and row["command_id"] == command.command_id
    assert command.action is ScalingAction.SET_PARALLELISM and command.job_id == KEY
    assert command.parallelism == {"source": 2, "work": 8}
    assert command.evidence == (f"{KEY}@{T0 + 100_000}", f"{KEY}@{T0 + 120_000}")  # the window
    assert command.command_id == f"autoscaler-{KEY}-{T0 + 120_000}"
    expected = command.expected_requirements or {}
    assert {v: (b.lower_bound, b.upper_bound) for v, b in expected.items()} == {
        "source": (1, 2),
        "work": (1, 2),  # as submitted: what the actuator checks before it PUTs
    }
    (row,) = [r for r in scaler.tick(NOW + 10_000) if r["job_key"] == KEY]
    assert row["outcome"] == "KEPT" and "stabilizing after the last rescale" in row["reason"]
    restarted = Autoscaler(lake.data_dir, Settings(), options, folding(inputs(8)), sent.append)
    (row,) = [r for r in restarted.tick(NOW + 20_000) if r["job_key"] == KEY]
    assert row["outcome"] == "KEPT" and "stabilizing" in row["reason"]
    assert len(sent) == 1


def test_nothing_is_sent_on_a_decision_the_fold_cannot_check_or_sees_no_rescale_in(
    lake: Lake,
) -> None:
    sent: list[ScalingCommand] = []
    options = AutoscalerOptions(window_ms=WINDOW, mode=Mode.SCALE)

    def unknown(*_: Any) -> Forecast:
        raise ForecastUnknownError("the broker is away")

    rows = Autoscaler(lake.data_dir, Settings(), options, unknown, sent.append).tick(NOW)
    (row,) = [r for r in rows if r["job_key"] == KEY]
    assert row["outcome"] == "FORECAST_UNKNOWN" and "the broker is away" in row["reason"]

    def still(_s: Settings, job: str, _t: Mapping[str, int], _n: int) -> Forecast:
        return Forecast(job, None, None, {}, "no rescale starts within 600 s")

    rows = Autoscaler(lake.data_dir, Settings(), options, still, sent.append).tick(NOW)
    (row,) = [r for r in rows if r["job_key"] == KEY]
    assert row["outcome"] == "NO_RESCALE" and "no rescale starts" in row["reason"]
    assert sent == []


def test_a_send_the_broker_refuses_is_recorded_and_tried_again(lake: Lake) -> None:
    tries: list[ScalingCommand] = []

    def refused(command: ScalingCommand) -> None:
        tries.append(command)
        if len(tries) == 1:
            raise RuntimeError("1 of 1 commands not acknowledged")

    options = AutoscalerOptions(window_ms=WINDOW, mode=Mode.SCALE)
    scaler = Autoscaler(lake.data_dir, Settings(), options, folding(inputs(8)), refused)
    (row,) = [r for r in scaler.tick(NOW) if r["job_key"] == KEY]
    assert row["outcome"] == "SEND_FAILED" and "not acknowledged" in row["reason"]
    (row,) = [r for r in scaler.tick(NOW + 10_000) if r["job_key"] == KEY]
    assert row["outcome"] == "SENT" and len(tries) == 2


def test_a_job_whose_signals_stop_is_recorded_once_and_forgotten(lake: Lake) -> None:
    options = AutoscalerOptions(window_ms=WINDOW, stale_ms=100_000)
    scaler = Autoscaler(lake.data_dir, Settings(), options, folding(inputs(8)))
    first = {r["job_key"]: r for r in scaler.tick(NOW)}
    assert first[KEY]["outcome"] == "ADVISED"
    assert first["c1.j2"]["outcome"] == "NO_SIGNALS"  # its newest sample is 111 s old
    assert first["c1.j2"]["reason"] == "no workload sample for 111 s"
    rows = scaler.tick(NOW + 110_000)
    assert [(r["job_key"], r["outcome"]) for r in rows] == [(KEY, "NO_SIGNALS")]
    assert scaler.tick(NOW + 200_000) == []


@pytest.mark.parametrize("files", [40])
def test_the_table_compacts_itself(lake: Lake, files: int) -> None:
    from deltalake import DeltaTable

    options = AutoscalerOptions(window_ms=WINDOW, record_every_ms=0, retention_hours=0)
    scaler = Autoscaler(lake.data_dir, Settings(), options, folding(inputs(8)))
    for n in range(files):
        scaler.tick(NOW + n)
    table = DeltaTable(str(lake.table_dir(TABLE)))
    assert len(table.file_uris()) <= 32
    assert len(decisions(Lake(lake.data_dir))) == 2 * files
    on_disk = list(lake.table_dir(TABLE).glob("*.parquet"))
    assert len(on_disk) == len(table.file_uris())


def test_a_bad_setting_is_one_line_before_the_broker_is_asked(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "SCALEFOLD_BOOTSTRAP_SERVERS": "127.0.0.1:9"}  # nobody listens
    done = subprocess.run(
        [
            *(sys.executable, "-m", "services.cli", "history", "run"),
            *("--data-dir", str(tmp_path), "-D", "job.autoscaler.utilization.target=2"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "scalefold history run: -D job.autoscaler.utilization.target must be in (0, 1]"
    ]


def skewed(at_s: int, taken: float, p: int, skew: float) -> dict[str, Any]:
    """Job j3 at `at_s`: `work`, keyed over 8 key groups at `p` subtasks of 240 records per
    busy second, has taken `taken` records since its tasks started, its busiest subtask
    `skew` times as busy as their average over the last 10 s at 400 records a second."""
    from tests.unit.test_advice import vertex

    busiest = 400 / p / 240 * skew * 1000
    work = vertex("work", ["source"], (taken, taken, taken / 240 * 1000))
    work |= {"parallelism": p, "keyedInput": True, "busyTimeMsPerSecondMax": busiest}
    source = vertex("source", [], (0, taken, taken * 0.05), pendingRecords=0)
    return {
        "cluster": "c1",
        "jobId": "j3",
        "jobState": "RUNNING",
        "observedAtMillis": T0 + at_s * 1000,
        "vertices": [source, work],
    }


def test_the_busiest_subtask_at_a_parallelism_the_job_ran_at_is_remembered(
    tmp_path: Path,
) -> None:
    """The burst trace's tail: j3 at 8 after a burst, 400 records a second, its busiest
    subtask 1.88 times the average (39 % busy): MAX's straight line keeps 8. Two hours
    earlier it ran at 4 for a while, its busiest there 1.31 times the average: read back
    from the history at the autoscaler's first step (as after a restart), 4 is within the
    target; with a memory shorter than two hours, it is not read."""
    from services.history.pytables import Message, flink_signal_row
    from tests.unit.test_advice import write

    earlier = [skewed(at, 400.0 * at, 4, 1.31) for at in range(0, 70, 10)]
    now_s = 7_200
    recent = [skewed(now_s - 60 + at, 400.0 * at, 8, 1.88) for at in range(0, 70, 10)]
    rows = [flink_signal_row(Message(r, 1, 0, i, None)) for i, r in enumerate([*earlier, *recent])]
    for row in rows:
        del row["unknown_fields"]
    write(tmp_path / "tables" / "flink_signals", rows)
    policy = pl.PolicyConfig(scale_down_delay_ms=0)
    options = AutoscalerOptions(window_ms=60_000, policy=policy)
    now = T0 + now_s * 1000 + 1_000
    (step,) = Autoscaler(tmp_path, Settings(), options, folding([])).tick(now)
    assert step["job_key"] == "c1.j3" and "Work 8 -> 4" in step["reason"]
    work = step["vertices"][1]
    assert work["target"] == 4
    assert "4 by its busiest subtask at 4, 1.31 times the average as recorded" in work["reason"]
    short = AutoscalerOptions(window_ms=60_000, policy=policy, skew_memory_ms=600_000)
    (forgot,) = Autoscaler(tmp_path, Settings(), short, folding([])).tick(now)
    assert forgot["vertices"][1]["target"] == 8  # the run at 4 is older than its memory
