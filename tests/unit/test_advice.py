"""`scalefold flink advise` (services/history/advice.py) over Delta tables written with
delta-rs as the history's latest writers write them: the newest run of a job's tasks
within the window, the downtime from its own recorded rescales, the decision and its
evidence; a vertex without metrics decides nothing and says so."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.history import advice
from services.history.lake import Lake
from services.history.parallelism import PolicyConfig
from services.history.paths import Layout
from services.history.pytables import Message, flink_signal_row

T0 = 1_795_935_400_000


def vertex(
    vid: str, inputs: list[str], counters: tuple[float, float, float], **extra: Any
) -> dict[str, Any]:
    read, written, busy = counters
    return {
        "jobVertexId": vid,
        "jobVertexName": vid.capitalize(),
        "parallelism": 2,
        "maxParallelism": 8,
        "inputs": inputs,
        "readRecords": read,
        "writeRecords": written,
        "accumulatedBusyTimeMs": busy,
        "pendingRecords": None,
        **extra,
    }


def signal(
    job: str, at_s: int, n: int, busy: float, *, pending: float = 0, p: int = 2
) -> dict[str, Any]:
    """Job `job` at `at_s`: its source has emitted `n` records (busy 20 % of `busy`, its
    backlog `pending`), `work` (parallelism `p`) has taken them, busy `busy` ms in all."""
    return {
        "cluster": "c1",
        "jobId": job,
        "jobState": "RUNNING",
        "observedAtMillis": T0 + at_s * 1000,
        "vertices": [
            vertex("source", [], (0, n, busy / 5), pendingRecords=pending),
            {**vertex("work", ["source"], (n, n, busy)), "parallelism": p},
        ],
    }


def write(path: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    write_deltalake(str(path), pa.Table.from_pylist(rows), mode="append")


@pytest.fixture
def lake(tmp_path: Path) -> Lake:
    layout = Layout(tmp_path)
    records = [
        signal("j1", 0, 0, 0, p=1),  # an earlier run, at parallelism 1
        signal("j1", 100, 0, 0),  # the newest run starts: counters from 0
        signal("j1", 110, 10_000, 20_000, pending=20_000),
        signal("j1", 120, 20_000, 40_000, pending=40_000),
        signal("j1", 120, 20_000, 40_000, pending=40_000),  # sent again by the bridge
        signal("j2", 0, 0, 0),
        {  # Work's metrics did not come (the bridge's answer for it was unusable)
            **signal("j2", 10, 100, 10),
            "vertices": [
                vertex("source", [], (0, 100, 2)),
                {
                    "jobVertexId": "work",
                    "jobVertexName": "Work",
                    "parallelism": 2,
                    "inputs": ["source"],
                },
            ],
        },
    ]
    rows = [flink_signal_row(Message(r, 1, 0, i, None)) for i, r in enumerate(records)]
    for row in rows:
        del row["unknown_fields"]  # an empty map: pyarrow cannot tell its type
    write(layout.table("flink_signals"), rows)
    rescales = [
        {"job_key": "c1.j1", "terminal_state": "COMPLETED", "downtime_ms": ms}
        for ms in (4_000, 6_000, 50_000)
    ]
    write(layout.table("flink_rescales_latest"), rescales)
    return Lake(tmp_path)


def test_the_newest_run_is_judged_with_the_jobs_own_downtime(lake: Lake) -> None:
    (found,) = advice.advise(lake, "j1", PolicyConfig(), 20_000, T0 + 121_000)
    assert (found.first_ms, found.last_ms) == (T0 + 100_000, T0 + 120_000)  # not the old run
    decision = found.decision
    assert decision.restart_ms == 6_000  # the median of its three
    # 1,000 records a second and 40,000 behind growing 2,000 a second: Work (500 records per
    # busy second a subtask, busy all the time) needs its bound
    assert decision.input_rate == pytest.approx(3_000)
    assert decision.send and decision.targets == {"source": 2, "work": 8}
    text = "\n".join(advice.as_text([found]))
    assert "c1.j1: would rescale: rescale: Work 2 -> 8" in text
    assert "a rescale's downtime 6.0 s" in text
    json.dumps(advice.as_json([found]))  # serializable


def test_a_vertex_without_its_metrics_decides_nothing(lake: Lake) -> None:
    (found,) = advice.advise(lake, "c1.j2", PolicyConfig(), 10_000, T0 + 11_000)
    assert not found.decision.send
    assert found.decision.reason == ("the samples cannot be used: Work: no read_records reported")
    assert advice.advise(lake, "nobody", PolicyConfig(), 60_000, T0) == []


def test_settings_are_read_by_the_operators_keys() -> None:
    config, window = advice.settings(
        [
            "job.autoscaler.target.utilization=0.5",
            "job.autoscaler.catch-up.duration=10 min",
            "job.autoscaler.vertex.max-parallelism=4",
            "job.autoscaler.metrics.window=30 s",
            "job.autoscaler.scaling.key-group.partitions.adjust.mode=maximize_utilisation",
            "scalefold.autoscaler.scale-up.window=0 s",
            "job.autoscaler.metrics.busy-time.aggregator=avg",
            "job.autoscaler.scale-down.max-factor=0.6",
        ]
    )
    assert config.max_scale_down_factor == 0.6 and advice.settings([])[0].max_scale_down_factor == 1
    assert (config.adjust_mode, config.scale_up_window_ms) == ("MAXIMIZE_UTILISATION", 0)
    assert config.busy_time_aggregator == "AVG"
    assert (config.target_utilization, config.catch_up_ms, config.max_parallelism) == (
        0.5,
        600_000,
        4,
    )
    assert window == 30_000
    for bad in (
        "job.autoscaler.catch-up.duration=soon",
        "x=1",
        "job.autoscaler.target.utilization=hi",
        "job.autoscaler.scaling.key-group.partitions.adjust.mode=ROUND",
        "job.autoscaler.metrics.busy-time.aggregator=MIN",
    ):
        with pytest.raises(ValueError, match="is not"):
            advice.settings([bad])


def test_the_verbs_print_the_advice_and_the_backtest(
    lake: Lake, capsys: pytest.CaptureFixture[str]
) -> None:
    import argparse

    from services.history import flinkcli

    parser = argparse.ArgumentParser()
    flinkcli.register(parser.add_subparsers())

    def run(*argv: str) -> int:
        args = parser.parse_args([*argv, "--data-dir", str(lake.data_dir)])
        return int(args.handler(args, None))

    assert run("advise", "--job", "j1", "-D", "job.autoscaler.metrics.window=20 s") == 0
    assert "c1.j1: would rescale: rescale: Work 2 -> 8" in capsys.readouterr().out
    assert run("backtest", "--job", "j1", "--try", "job.autoscaler.target.utilization=0.5") == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("c1.j1: 2 windows") and "downtime: recorded" in lines[0]
    assert [line.split()[0] for line in lines[2:]] == [
        "as",
        "defaults",
        "job.autoscaler.target.utilization=0.5",
    ]
    assert run("backtest", "--job", "nobody") == 1
    assert "job nobody has no samples" in capsys.readouterr().err


def test_a_decision_waits_for_a_full_window_of_one_run() -> None:
    def run(*seconds: int) -> list[Any]:
        from services.history.parallelism import Sample

        return [Sample(T0 + s * 1000, ()) for s in seconds]

    assert advice.unfilled(run(0, 10, 20, 30, 40, 50), 60_000) is None  # within a sample
    assert advice.unfilled(run(40, 50), 60_000) == (
        "the window is not full yet: 10 s of one run of its tasks, of 60 s"
    )
    assert "fewer than two" in (advice.unfilled(run(50), 60_000) or "")


def test_the_brokers_backlog_is_judged_before_the_connectors(tmp_path: Path) -> None:
    """Under back pressure the connector's pendingRecords stands still (the bridge's
    signals.py); the broker's backlog (v2's sourceBacklog) grows with what arrives, and
    the input rate is read from it where a sample has it."""
    records = [
        signal("j3", 0, 0, 0),
        signal("j3", 30, 6_000, 12_000, pending=767),
        signal("j3", 60, 12_000, 24_000, pending=767),
    ]
    for at, record in zip((0, 30, 60), records, strict=True):
        record["vertices"][0]["sourceBacklog"] = 800.0 * at  # 800 a second more than read
    rows = [flink_signal_row(Message(r, 1, 0, i, None)) for i, r in enumerate(records)]
    for row in rows:
        del row["unknown_fields"]
    write(Layout(tmp_path).table("flink_signals"), rows)
    (found,) = advice.advise(Lake(tmp_path), "j3", PolicyConfig(), 60_000, T0 + 61_000)
    # 200 records a second emitted, 800 more a second behind: 1,000 arrived a second
    assert found.decision.input_rate == pytest.approx(1_000)
    assert found.decision.backlog == 48_000


def _step(tmp_path: Path, *, broker: bool) -> advice.Advice:
    """300 records a second for 66 s, then 1,200: the newest sample (70 s) 4 s into the
    step. `Work` (two subtasks, 5 ms a record: 200 a busy second) takes 300 a second,
    then 442; the rest waits in Kafka, the broker's backlog where `broker`, else the
    connector's pendingRecords, which stands still under back pressure."""
    emitted = {t: 300 * t for t in range(0, 70, 10)} | {70: 300 * 66 + 442 * 4}
    arrived = {t: 300 * t for t in range(0, 70, 10)} | {70: 300 * 66 + 1_200 * 4}
    records = []
    for t, n in emitted.items():
        record = signal("j4", t, n, n * 5, pending=0)
        if broker:
            record["vertices"][0]["sourceBacklog"] = float(arrived[t] - n)
            record["vertices"][0]["sourceEndOffsets"] = arrived[t]
        records.append(record)
    rows = [flink_signal_row(Message(r, 1, 0, i, None)) for i, r in enumerate(records)]
    for row in rows:
        del row["unknown_fields"]
    write(Layout(tmp_path).table("flink_signals"), rows)
    (found,) = advice.advise(Lake(tmp_path), "j4", PolicyConfig(), 60_000, T0 + 71_000)
    return found


def test_a_rise_is_judged_on_the_newest_interval_where_the_broker_counts_the_arrivals(
    tmp_path: Path,
) -> None:
    # the broker's backlog: over the newest 10 s, 3,568 emitted and 3,032 more behind
    exact = _step(tmp_path / "broker", broker=True).decision
    assert exact.input_rate == pytest.approx(660)
    # with the backlog and a restart's 30 s of arrivals caught up in 5 min: 736 / (200 x 0.7)
    assert exact.targets["work"] == 6
    assert "over the last 10 s" in exact.reason
    # pendingRecords alone: the last 30 s (what the source emitted), not the newest interval
    pending = _step(tmp_path / "pending", broker=False).decision
    assert pending.input_rate == pytest.approx((300 * 66 + 442 * 4 - 12_000) / 30)
    assert pending.targets["work"] == 2  # 351/s with a restart's arrivals: 88 % busy, within


def test_the_newest_interval_is_judged_in_a_run_shorter_than_the_rise_window() -> None:
    # 20 s of a job whose load began after its first sample: the source emitted nothing
    # for 8 s, then the 500 a second that arrive, a broker's backlog behind it; over the
    # whole 20 s that reads 300 a second, over the newest 4 s the 500
    from services.history.parallelism import Sample, VertexSample, input_rate

    def at(s: int, emitted: float, behind: float | None) -> Sample:
        source = VertexSample("src", 1, 4, 0, emitted, 10.0 * s, behind, "Source")
        received = None if behind is None else emitted + behind
        source = VertexSample(**{**source.__dict__, "received": received})
        work = VertexSample("work", 1, 4, emitted, emitted, 900.0 * s, None, "Work", ("src",))
        return Sample(1_000_000 + 1_000 * s, (source, work))

    run = [at(0, 0, None), at(8, 0, 0), at(12, 1_500, 500), at(16, 3_500, 500), at(20, 5_500, 500)]
    newest = advice.recent(run, 30_000)
    assert input_rate([x for x in newest if not x.inputs]) == pytest.approx(500)
    # without the broker's count (pendingRecords, or a v2 sample's backlog alone), a run
    # shorter than the rise window gives none
    plain = [
        Sample(
            s.at_ms,
            tuple(VertexSample(**{**v.__dict__, "received": None}) for v in s.vertices),
        )
        for s in run
    ]
    assert advice.recent(plain, 30_000) == []
