"""The rescales a real Flink recorded, kept and compared: the flink-rescales topic through the
history's Flink query into `flink_rescales`, paired with scalefold's predictions.

The records are a real Flink 2.3.0's /rescales/details answers (flink-answers/), encoded
with the contracts' codec as the bridge sends them; the predictions are scalefold
rescale records under `flink_job_key`. Real broker, real Spark."""

from __future__ import annotations

import argparse
import copy
import json
import os
from pathlib import Path
from typing import Any

import pytest

from services.clicontext import Context
from services.contracts import Codec, Settings
from services.contracts import records as r
from services.contracts.ambiguity import AmbiguousPair, Findings
from services.contracts.topics import flink_job_key
from services.history import flinkcli
from services.history.decode import RescaleSchemas
from services.history.judge import Judge
from services.history.paths import Layout
from services.history.verdicts import RECHECK_MS
from services.localstack.layout import cache_dir
from tests.history.flink_support import (
    INITIAL,
    JOB_ID,
    RESCALED,
    details,
    encoded_flink,
    flink_record,
    prediction,
)
from tests.history.support import drain, encoded, read_topic, views
from tests.kafka_support import produce, unique_settings

pytestmark = [pytest.mark.integration, pytest.mark.spark]

CLUSTER = "local"
OTHER_JOB = "0123456789abcdef0123456789abcdef"
KEY = flink_job_key(CLUSTER, JOB_ID)
SOURCE, SUMS = "cbc357ccb763df2852fee8c4fc7d55f2", "90bea66de1c231edf33913ecd54406c1"


def _in_progress(record: dict[str, Any]) -> dict[str, Any]:
    """`record` as the bridge saw it earlier: its last span open, no end, no outcome."""
    early = copy.deepcopy(record)
    early["schedulerStates"][-1].update(leaveTimestampInMillis=None, durationInMillis=None)
    early.update(endTimestampInMillis=None, terminalState=None, terminatedReason=None, revision=1)
    return early


def _scenario(codec: Codec) -> tuple[list[tuple[Any, Any]], list[tuple[bytes, bytes]]]:
    """(flink-rescales messages, rescales messages) of the test below."""
    initial = flink_record(details(INITIAL), CLUSTER, JOB_ID, 2, 1_795_935_411_000)
    rescaled = flink_record(details(RESCALED), CLUSTER, JOB_ID, 1, 1_795_935_428_000)
    other = flink_record(details(INITIAL), CLUSTER, OTHER_JOB, 1, 1_795_935_411_000)
    open_one = _in_progress(flink_record(details(RESCALED), CLUSTER, JOB_ID, 1, 0))
    open_one.update(
        rescaleUuid="c" * 32, rescaleAttemptId=3, startTimestampInMillis=1_795_935_500_000
    )
    flink = encoded_flink(
        codec, [_in_progress(initial), initial, initial, rescaled, other, open_one]
    )
    wrong_key = encoded_flink(codec, [initial])[0][1]
    flink += [
        (KEY.encode(), b"\x01"),  # shorter than the header
        (KEY.encode(), encoded(codec, [prediction(initial, KEY, "x")])[0][1]),  # not ours
        (JOB_ID.encode(), wrong_key),  # keyed by Flink's job id alone
    ]
    # scalefold predicts the first rescale exactly, the second with one parallelism less.
    second = prediction(rescaled, KEY, "p-2")
    for vertex in second["vertices"]:
        if vertex["jobVertexId"] == SOURCE:
            vertex["postRescaleParallelism"] = 1
    for group in second["slots"]:
        if group["slotSharingGroupName"] == "default":
            group["postRescaleSlots"] = 1
    ours = encoded(codec, [prediction(initial, KEY, "p-1"), second])
    return flink, ours


def _rows(frame: Any, order: str, *columns: str) -> list[dict[str, Any]]:
    return [row.asDict(recursive=True) for row in frame.orderBy(order).select(*columns).collect()]


def test_flink_rescales_are_kept_once_compared_with_the_predictions_and_bad_ones_dead_lettered(
    broker_settings: Settings,
    spark: Any,
    codec: Codec,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings = unique_settings(broker_settings)
    flink, ours = _scenario(codec)
    produce(settings, settings.topics.flink_rescales, flink)
    produce(settings, settings.topics.rescales, ours)
    layout = Layout(tmp_path)
    schemas = RescaleSchemas.of(codec.registry)

    drain(spark, settings, schemas, layout)
    drain(spark, settings, schemas, layout)  # a second run adds nothing
    found = views(spark, layout, schemas)

    assert found["raw_flink_rescales"].count() == 6  # every valid message, once
    revisions = _rows(
        found["flink_rescale_revisions"], "observed_at_ms", "rescale_uuid", "revision"
    )
    assert sorted((r["rescale_uuid"], r["revision"]) for r in revisions) == sorted(
        [(INITIAL, 1), (INITIAL, 2), (RESCALED, 1), (INITIAL, 1), ("c" * 32, 1)]
    )
    latest = _rows(
        found["flink_rescales"],
        "start_timestamp_ms",
        "cluster",
        "job_id",
        "job_key",
        "rescale_uuid",
        "revision",
        "trigger_cause",
        "terminal_state",
        "in_progress",
        "vertex_count",
        "total_post_rescale_slots",
        "downtime_ms",
        "current_state",
        "current_state_open",
    )
    mine = [row for row in latest if row["job_id"] == JOB_ID]
    assert [(row["rescale_uuid"], row["revision"]) for row in mine] == [
        (INITIAL, 2),
        (RESCALED, 1),
        ("c" * 32, 1),
    ]
    first = mine[0]
    assert first["job_key"] == KEY and first["cluster"] == CLUSTER
    assert (first["trigger_cause"], first["terminal_state"]) == ("INITIAL_SCHEDULE", "COMPLETED")
    assert (first["vertex_count"], first["total_post_rescale_slots"]) == (2, 2)
    assert first["downtime_ms"] == 148 + 6032 + 384  # the spans other than Executing
    assert (first["current_state"], first["current_state_open"]) == ("Executing", False)
    assert mine[2]["in_progress"] and mine[2]["current_state_open"]
    assert len(latest) == 4

    vertices = found["flink_rescale_vertices"].where(f"rescale_uuid = '{RESCALED}'")
    assert vertices.count() == 2
    post = {r["job_vertex_id"]: r["post_rescale_parallelism"] for r in vertices.collect()}
    assert post == {SOURCE: 2, SUMS: 1}
    mine_only = f"job_id = '{JOB_ID}'"  # the other job's rescale has the same uuid
    states = found["flink_rescale_states"].where(f"rescale_uuid = '{INITIAL}' AND {mine_only}")
    assert [r["state"] for r in states.orderBy("span_index").collect()] == [
        "Created",
        "WaitingForResources",
        "CreatingExecutionGraph",
        "Executing",
    ]

    _assert_conformance(found)
    _assert_pairing_is_the_views(found, tmp_path)
    _assert_dead_letters(settings, codec)
    _assert_compare(settings, tmp_path, capsys)
    _assert_verdicts(spark, settings, layout, schemas, capsys)


def _assert_conformance(found: dict[str, Any]) -> None:
    pairs = _rows(
        found["flink_conformance"],
        "job_key",
        "job_key",
        "pair_index",
        "paired",
        "settled",
        "predicted_rescale_uuid",
        "trigger_cause_agrees",
        "post_parallelism_agrees",
        "pre_parallelism_agrees",
        "slots_agrees",
        "scheduler_states_agrees",
        "all_fields_agree",
    )
    pairs.sort(key=lambda p: (p["job_key"], p["pair_index"]))
    mine = [p for p in pairs if p["job_key"] == KEY]
    assert [(p["pair_index"], p["paired"], p["settled"]) for p in mine] == [
        (1, "both", True),
        (2, "both", True),
        (3, "flink_only", False),  # still in progress: not counted yet
    ]
    assert mine[0]["all_fields_agree"] and mine[0]["predicted_rescale_uuid"] == "p-1"
    second = mine[1]
    assert second["trigger_cause_agrees"] and second["pre_parallelism_agrees"]
    assert second["scheduler_states_agrees"]
    assert not second["post_parallelism_agrees"] and not second["slots_agrees"]
    assert not second["all_fields_agree"]
    (other,) = [p for p in pairs if p["job_key"] != KEY]
    assert (other["paired"], other["settled"], other["trigger_cause_agrees"]) == (
        "flink_only",
        True,
        False,
    )

    rates = {
        (row["scope"], row["job_key"], row["field"]): (row["compared"], row["agreed"], row["rate"])
        for row in found["flink_agreement"].collect()
    }
    assert rates[("job", KEY, "trigger_cause")] == (2, 2, 1.0)
    assert rates[("job", KEY, "post_parallelism")] == (2, 1, 0.5)
    assert rates[("job", KEY, "all_fields")] == (2, 1, 0.5)
    assert rates[("total", None, "trigger_cause")] == (3, 2, pytest.approx(2 / 3))
    assert rates[("total", None, "slots")] == (3, 1, pytest.approx(1 / 3))
    assert rates[("job", flink_job_key(CLUSTER, OTHER_JOB), "terminal_state")] == (1, 0, 0.0)


def _assert_pairing_is_the_views(found: dict[str, Any], data_dir: Path) -> None:
    """`flink compare`'s pairing without Spark (pairing.py) gives the views' rows."""
    from services.history import lake, pairing

    def plain(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        if isinstance(value, list):
            return [plain(v) for v in value]
        return value

    views = [plain(r.asDict(recursive=True)) for r in found["flink_conformance"].collect()]
    views.sort(key=lambda p: (p["job_key"], p["pair_index"]))
    compared = pairing.compare(lake.Lake.at(data_dir), None)
    pairs, rates = compared.pairs, compared.rates
    assert pairs == views
    spark_rates = [r.asDict() for r in found["flink_agreement"].collect()]
    order = ("scope", "job_key", "field_index")
    spark_rates.sort(key=lambda r: tuple((r[c] is not None, r[c]) for c in order))
    assert rates == spark_rates


def _assert_dead_letters(settings: Settings, codec: Codec) -> None:
    letters = [
        codec.decode(m.value).record for m in read_topic(settings, settings.topics.dead_letters)
    ]
    assert all(letter["sourceTopic"] == settings.topics.flink_rescales for letter in letters)
    reasons = sorted((letter["errorClass"], letter["errorMessage"]) for letter in letters)
    # each once, though the topic was drained twice: the second run read nothing new
    assert reasons == [
        ("DecodeError", "1 bytes is shorter than the 10-byte header"),
        ("DecodeError", f"record {r.RESCALE} is not one of {r.FLINK_RESCALE}"),
        (
            "KeyMismatch",
            f"the key must be <cluster>.<jobId> '{KEY}', got 0x{JOB_ID.encode().hex()}",
        ),
    ]


def _compare(settings: Settings, data_dir: Path, *argv: str) -> int:
    """`scalefold flink compare ARGV` on `data_dir`, in this process (its Spark session is
    the test's: no history service runs for `data_dir`)."""
    parser = argparse.ArgumentParser()
    flinkcli.register(parser.add_subparsers())
    args = parser.parse_args(["compare", "--data-dir", str(data_dir), *argv])
    args.verbose = False
    handler = args.handler
    return int(handler(args, Context(settings, cache_dir(os.environ), os.environ)))


def _assert_compare(settings: Settings, data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert _compare(settings, data_dir, "--format", "json") == 0
    report = json.loads(capsys.readouterr().out)
    total = {row["field"]: row for row in report["agreement"] if row["scope"] == "total"}
    assert (total["post_parallelism"]["compared"], total["post_parallelism"]["agreed"]) == (3, 1)
    assert report["pending"] == 1
    assert sorted((d["job_key"], d["pair_index"]) for d in report["disagreements"]) == sorted(
        [(KEY, 2), (flink_job_key(CLUSTER, OTHER_JOB), 1)]
    )

    assert _compare(settings, data_dir, "--job", JOB_ID) == 0
    text = capsys.readouterr().out
    assert f"{KEY} #2: flink {RESCALED}, predicted p-2" in text
    assert (
        "post_parallelism: flink Sum -> Discard: Writer=1, Source: Numbers -> Slow map=2; "
        "predicted Sum -> Discard: Writer=1, Source: Numbers -> Slow map=1" in text
    )
    assert "slots: flink default=2, sums=1; predicted default=1, sums=1" in text
    assert OTHER_JOB not in text
    lines = text.splitlines()
    (total_line,) = [line for line in lines if line.strip().startswith("total")]
    assert total_line.split("|")[1].strip() == "2"  # pairs compared
    assert "50 %" in total_line and "100 %" in total_line

    assert _compare(settings, data_dir, "--job", "nope") == 1
    (line,) = capsys.readouterr().err.splitlines()  # one line, naming the jobs there are
    assert "no rescales of Flink job nope" in line
    assert KEY in line and flink_job_key(CLUSTER, OTHER_JOB) in line, line


WHY = (
    "TaskManager tm-3 registered between 10:00:01.2 and 10:00:03.4, across the end of "
    "the submission stabilization (10:00:02.0)"
)


def _finder(settings: Settings, job: str) -> Findings:
    """The scheduler's answer as the entry point would hand it over (tests/flink ask a
    real fold): the second pair of the job depends on where tm-3 registered."""
    if job != KEY:
        return Findings((), 0)
    return Findings((AmbiguousPair(KEY, 2, ("post_parallelism", "slots"), WHY, "tm-3"),), 0)


def _assert_verdicts(
    spark: Any,
    settings: Settings,
    layout: Layout,
    schemas: RescaleSchemas,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The history's judge writes `flink_verdicts`; the views count the ambiguous pair
    apart and say why; `flink compare` (without Spark) says the same."""
    judge = Judge(layout.data_dir, settings, _finder)
    assert judge.tick(1_000)
    assert not judge.tick(2_000)  # nothing changed, the recheck is not due
    assert judge.tick(1_000 + RECHECK_MS)  # asked once more
    found = views(spark, layout, schemas)
    pairs = _rows(
        found["flink_conformance"],
        "pair_index",
        "job_key",
        "pair_index",
        "judged",
        "ambiguous",
        "ambiguity",
        "state_durations_agree",
    )
    mine = [
        (p["pair_index"], p["judged"], p["ambiguous"], p["ambiguity"], p["state_durations_agree"])
        for p in pairs
        if p["job_key"] == KEY
    ]
    # the first pair agrees in every field, and its spans lasted as long on both sides
    assert mine == [
        (1, True, False, None, True),
        (2, True, True, WHY, None),
        (3, True, False, None, None),
    ]
    rates = {
        (row["scope"], row["job_key"], row["field"]): (
            row["compared"],
            row["agreed"],
            row["ambiguous"],
            row["decidable"],
            row["decidable_agreed"],
            row["decidable_rate"],
        )
        for row in found["flink_agreement"].collect()
    }
    assert rates[("job", KEY, "all_fields")] == (2, 1, 1, 1, 1, 1.0)
    assert rates[("total", None, "all_fields")] == (3, 1, 1, 2, 1, 0.5)
    _assert_pairing_is_the_views(found, layout.data_dir)

    capsys.readouterr()
    assert _compare(settings, layout.data_dir) == 0
    lines = capsys.readouterr().out.splitlines()
    head = [cell.strip() for cell in lines[1].split("|")]
    (total,) = [line for line in lines if line.strip().startswith("total")]
    cells = dict(zip(head, (cell.strip() for cell in total.split("|")), strict=True))
    assert (cells["pairs"], cells["ambiguous"], cells["all decidable"]) == ("3", "1", "50 %")
