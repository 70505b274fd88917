"""Flink's own records, kept by the history, answered as the JobManager answered them.

The bridge's conversion (`services.bridge.rescales.record`) turns a real Flink 2.3.0's
captured `/details` answers into FlinkRescale records; the history's Flink transforms
write them into `flink_rescales_latest` (Spark), beside scalefold's predictions of the
same job under `<cluster>.<job>` (one of them predicting a different outcome). Without
`?source`, the API answers a Flink job id from Flink's records, equal to the captured
answers; the web page shows both side by side with the disagreement marked.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from services.bridge.rescales import record as flink_record
from services.history.paths import Layout
from services.history.restapi.fixtures import write_flink_records, write_records
from services.history.restapi.server import make_server, url_of
from tests.history import rest_golden as golden

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

CLUSTER = "local"
KEY = f"{CLUSTER}.{golden.JOB_ID}"


def _flink_records() -> list[dict[str, Any]]:
    return [
        flink_record(
            CLUSTER,
            golden.JOB_ID,
            "scalefold-sample",
            golden.answer(f"details-{uuid}"),
            revision=1,
            observed_at=1_795_935_430_000,
        )
        for uuid in golden.UUIDS
    ]


def _predictions() -> list[dict[str, Any]]:
    """scalefold's predictions of the job: the first as Flink, the second ignored instead."""
    first, second = (golden.record(golden.answer(f"details-{u}"), KEY) for u in golden.UUIDS)
    second = {
        **second,
        "rescaleUuid": "p-2",
        "terminalState": "IGNORED",
        "terminatedReason": "NO_RESOURCES_OR_PARALLELISMS_CHANGE",
    }
    return [{**first, "rescaleUuid": "p-1"}, second]


@pytest.fixture(scope="module")
def layout(spark: Any, codec: Any, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    layout = Layout(tmp_path_factory.mktemp("rest-flink"))
    write_flink_records(spark, codec, _flink_records(), layout)
    write_records(spark, codec, _predictions(), layout)
    return layout


@pytest.fixture(scope="module")
def served(layout: Layout) -> Iterator[str]:
    server = make_server(layout.data_dir / "tables", "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.daemon = True
    thread.start()
    try:
        yield url_of(server)
    finally:
        server.shutdown()
        server.server_close()


def get(url: str) -> tuple[int, Any, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            body = answer.read()
            kind = answer.headers["Content-Type"]
            value = json.loads(body) if kind.startswith("application/json") else body.decode()
            return answer.status, value, dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


JOB = f"/jobs/{golden.JOB_ID}/rescales"


def test_a_flink_job_is_answered_from_flinks_records_as_flink_answered(served: str) -> None:
    for name in ("overview", "history", "summary"):
        status, body, headers = get(f"{served}{JOB}/{name}")
        assert status == 200 and body == golden.answer(name), name
    _, _, headers = get(f"{served}{JOB}/history")
    assert headers["X-Scalefold-Source"] == "flink"
    for uuid in golden.UUIDS:
        status, body, _ = get(f"{served}{JOB}/details/{uuid}")
        assert status == 200 and body == golden.answer(f"details-{uuid}"), uuid
    # Flink's records carry no settings: /config is the prediction's, taken from Flink's
    _, config, _ = get(f"{served}{JOB}/config")
    expected = golden.answer("config")
    differ = {field for endpoint, field in golden.UNEQUAL if endpoint == "config"}
    assert {k for k in expected if config[k] != expected[k]} == differ


def test_source_chooses_between_flinks_records_and_the_predictions(served: str) -> None:
    status, body, _ = get(f"{served}{JOB}/history?source=scalefold")
    assert status == 404 and golden.JOB_ID in body["errors"][0]
    _, predicted, headers = get(f"{served}/jobs/{KEY}/rescales/history")
    assert headers["X-Scalefold-Source"] == "scalefold"
    assert [r["rescaleUuid"] for r in predicted] == ["p-2", "p-1"]
    _, flinks, _ = get(f"{served}{JOB}/history?source=flink")
    assert flinks == golden.answer("history")
    _, jobs, _ = get(f"{served}/jobs")
    assert {(j["id"], j["source"]) for j in jobs["jobs"]} == {
        (golden.JOB_ID, "flink"),
        (KEY, "scalefold"),
    }


def test_the_page_shows_flinks_records_beside_the_predictions(served: str) -> None:
    status, page, _ = get(f"{served}/web/jobs/{golden.JOB_ID}")
    assert status == 200
    assert "Flink&#x27;s records beside scalefold&#x27;s predictions" in page or (
        "Flink's records beside scalefold's predictions" in page
    )
    # the second pair disagrees in the terminal state and the reason, nothing else
    assert page.count('class="disagrees"') == 2
    assert '<span class="disagrees">COMPLETED<br>IGNORED</span>' in page
    assert "2 disagreeing fields" in page


def test_the_fleet_page_shows_a_flink_job_and_its_prediction_in_one_row(served: str) -> None:
    status, page, _ = get(f"{served}/web/")
    assert status == 200
    rows = [row for row in page.split("<tr>")[1:] if "<td>" in row]
    assert len(rows) == 1, page  # not two unrelated jobs
    (row,) = rows
    assert f">{golden.JOB_ID}</a><br><small>{CLUSTER} &middot; scalefold-sample</small>" in row
    assert "<td>2 / 2</td>" in row  # rescales: Flink's / the prediction's
    assert "<td>2 / 1</td>" in row and "<td>0 / 1</td>" in row  # completed, ignored
    assert "<td>1 of 2 pairs</td>" in row, row


def history(layout: Layout, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "services.cli", "history", *args]
    where = ("--data-dir", str(layout.data_dir))
    return subprocess.run(
        [*command, *where], check=False, capture_output=True, text=True, timeout=300
    )


def test_summary_and_timeline_take_flinks_job_id_and_show_both_sides(
    layout: Layout, tmp_path: Path
) -> None:
    overview = golden.answer("overview")  # what the JobManager answered for the job
    both = history(layout, "summary", "--job", golden.JOB_ID)
    assert both.returncode == 0, both.stderr
    flink, predicted = both.stdout.split("Rescale overview of ")[1:]
    assert flink.startswith(f"Flink's records of job {KEY}\n"), both.stdout
    assert predicted.startswith(f"scalefold's prediction of job {KEY}\n"), both.stdout

    def count(text: str, label: str) -> int:
        return int(next(x for x in text.splitlines() if x.strip().startswith(label)).split()[-1])

    flink_counts = overview["rescalesCounts"]
    assert count(flink, "completed") == flink_counts["completed"]
    assert count(flink, "total") == sum(flink_counts.values())
    assert (count(predicted, "completed"), count(predicted, "ignored")) == (1, 1)

    only = history(layout, "summary", "--job", KEY, "--source", "flink")
    assert only.returncode == 0 and only.stdout.count("Rescale overview of ") == 1, only.stdout
    assert only.stdout.startswith(f"Rescale overview of Flink's records of job {KEY}")

    page = tmp_path / "both.html"
    drawn = history(layout, "timeline", "--job", golden.JOB_ID, "--out", str(page))
    assert drawn.returncode == 0, drawn.stderr
    text = page.read_text("utf-8")
    assert text.count(">Flink ") == len(golden.UUIDS) and text.count(">scalefold ") == 2, text
    assert f"<h1>Rescales of job {KEY}: Flink&#x27;s, and scalefold&#x27;s prediction</h1>" in text

    unknown = history(layout, "summary", "--job", "nosuchjob")
    assert unknown.returncode == 1 and golden.JOB_ID in unknown.stderr, unknown.stderr


def test_the_pages_count_the_pairs_the_observation_cannot_decide_apart(
    layout: Layout, tmp_path: Path
) -> None:
    """With the history's verdict that the second pair is ambiguous (`flink_verdicts`,
    as its judge writes it), its disagreement is greyed with the reason and not counted."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from services.history import verdicts

    tables = tmp_path / "tables"
    shutil.copytree(layout.data_dir / "tables", tables)
    why = "TaskManager tm-2 was lost between 10:00:01 and 10:00:03, across the cooldown end"
    rows = [
        {
            "cluster": CLUSTER,
            "flink_job_id": golden.JOB_ID,
            "job_key": KEY,
            "pair_index": n,
            "ambiguous": n == 2,
            "ambiguity": why if n == 2 else None,
            "ambiguities_known": True,
            "judged_at_ms": 1,
        }
        for n in (1, 2)
    ]
    table = pa.Table.from_pylist(rows, schema=verdicts.arrow_schema())
    write_deltalake(str(tables / verdicts.TABLE), table)
    # and one step of the history's autoscaler for the job, as it writes them
    from services.history import decisions

    step = {name: None for name, _ in decisions.COLUMNS}
    vertex = {"vertex_id": "v1", "name": "Work", "current": 2, "target": 4, "reached": 3}
    step |= {
        **{"cluster": CLUSTER, "flink_job_id": golden.JOB_ID, "job_key": KEY},
        **{"decided_at_ms": 1_795_935_400_000, "mode": "advise", "outcome": "ADVISED"},
        "reason": "rescale: Work 2 -> 4 (advisor mode: not sent)",
        "forecast": "UPDATE_REQUIREMENT rescale 0 s after the change, COMPLETED",
        "vertices": [vertex | {"target_rate": 900.0, "capacity": 250.0, "busy": 0.9}],
    }
    steps = pa.Table.from_pylist([step], schema=decisions.arrow_schema())
    write_deltalake(str(tables / decisions.TABLE), steps)
    server = make_server(tables, "127.0.0.1", 0)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1})
    thread.daemon = True
    thread.start()
    try:
        served = url_of(server)
        _, page, _ = get(f"{served}/web/jobs/{golden.JOB_ID}")
        assert 'class="disagrees"' not in page
        assert '<span class="ambiguous">COMPLETED<br>IGNORED</span>' in page
        assert f"ambiguous: {why}" in page
        assert "0 disagreeing fields of decidable pairs" in page
        assert "1 pairs the observation cannot decide" in page
        assert "<h2>Parallelism decisions</h2>" in page
        assert "<b>ADVISED</b>" in page and "Work 2&rarr;4 (reaches 3)" in page
        assert "UPDATE_REQUIREMENT rescale 0 s after the change, COMPLETED" in page
        _, fleet, _ = get(f"{served}/web/")
        assert "<td>1 of 1 pairs (1 ambiguous)</td>" in fleet, fleet
    finally:
        server.shutdown()
        server.server_close()
