"""The REST API over real history tables: Spark writes them, the server reads them with delta-rs.

The records equivalent to a real Flink 2.3.0's captured rescales go through the history
job's own decode and table transforms into Delta tables; `scalefold history serve`'s
server (in this process, on a free loopback port) must answer every endpoint with the
JSON the JobManager answered (flink-2.3.0/), but the fields `rest_golden.UNEQUAL` names.
Then the tables change under the running server, and its next answers show it.
"""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from services.history import synthetic
from services.history.paths import Layout
from services.history.restapi.fixtures import write_records
from services.history.restapi.server import make_server, url_of
from services.history.restapi.store import SCALEFOLD_TABLES, Source
from tests.history import rest_golden as golden

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

T0 = 1_795_000_000_000
MANY = 7
"""The rescales of job `many`: more than one page of 3."""


def _many() -> list[dict[str, Any]]:
    records = []
    for i in range(MANY):
        start = T0 + i * 60_000
        spans = [("Executing", start, start + 1_000), ("Restarting", start + 1_000, start + 1_500)]
        spans.append(("Executing", start + 1_500, start + 1_500))
        records.append(
            synthetic.rescale(
                "many", f"m-{i}", spans=spans, reason="SUCCEEDED", attempt=i + 1, cooldown_ms=5
            )
        )
    failing = [
        ("Executing", T0 + 900_000, T0 + 901_000),
        ("Failing", T0 + 901_000, T0 + 902_000),
        ("Restarting", T0 + 902_000, None),
    ]
    records.append(synthetic.rescale("many", "m-open", spans=failing, attempt=MANY + 1))
    return records


@pytest.fixture(scope="module")
def served(
    spark: Any, codec: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Layout]]:
    layout = Layout(tmp_path_factory.mktemp("rest"))
    write_records(spark, codec, [*golden.records(), *_many()], layout)
    server = make_server(layout.data_dir / "tables", "127.0.0.1", 0)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
    )
    thread.start()
    try:
        yield url_of(server), layout
    finally:
        server.shutdown()
        server.server_close()


def get(url: str) -> tuple[int, Any, dict[str, str]]:
    try:
        with urllib.request.urlopen(url, timeout=30) as answer:
            return answer.status, json.loads(answer.read()), dict(answer.headers)
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read()), dict(error.headers)


def api(served: tuple[str, Layout], path: str) -> Any:
    status, body, _ = get(served[0] + path)
    assert status == 200, (path, body)
    return body


JOB = f"/jobs/{golden.JOB_ID}/rescales"


def test_every_endpoint_answers_what_flink_answered(served: tuple[str, Layout]) -> None:
    for name in ("overview", "history", "summary"):
        assert api(served, f"{JOB}/{name}") == golden.answer(name), name
    for uuid in golden.UUIDS:
        assert api(served, f"{JOB}/details/{uuid}") == golden.answer(f"details-{uuid}")
    config, expected = api(served, f"{JOB}/config"), golden.answer("config")
    differ = {field for endpoint, field in golden.UNEQUAL if endpoint == "config"}
    assert {k for k in expected if config[k] != expected[k]} == differ


def test_unknown_job_and_rescale_are_404_in_flinks_error_shape(served: tuple[str, Layout]) -> None:
    flinks = json.loads((golden.ANSWERS / "error-404-job.json").read_text())
    for path in (
        "/jobs/00000000000000000000000000000000/rescales/overview",
        "/jobs/nope/rescales/history",
        f"{JOB}/details/ffffffffffffffffffffffffffffffff",
        "/jobs/x/y",
    ):
        status, body, headers = get(served[0] + path)
        assert status == 404, path
        assert set(body) == set(flinks) and isinstance(body["errors"], list), body
        assert len(body["errors"]) == 1 and isinstance(body["errors"][0], str)
        assert headers["Content-Type"].startswith("application/json")
    _, body, _ = get(served[0] + "/jobs/nope/rescales/history")
    assert "nope" in body["errors"][0]


@pytest.mark.parametrize(
    "query",
    [
        "limit=x",
        "limit=0",
        "limit=100000",
        "offset=-1",
        "source=spark",
        "limit=1&limit=2",
        "window=0",
    ],
)
def test_bad_parameters_are_400_saying_which(served: tuple[str, Layout], query: str) -> None:
    endpoint = "summary" if query.startswith("window") else "history"
    status, body, _ = get(f"{served[0]}/jobs/many/rescales/{endpoint}?{query}")
    assert status == 400, query
    name = query.split("=", maxsplit=1)[0]
    assert name in body["errors"][0], body


def test_history_pages_past_flinks_cap_newest_first(served: tuple[str, Layout]) -> None:
    status, first, headers = get(served[0] + "/jobs/many/rescales/history?limit=3")
    assert status == 200 and headers["X-Total-Count"] == str(MANY + 1)
    assert [r["rescaleUuid"] for r in first] == ["m-open", "m-6", "m-5"]
    assert headers["Link"] == '</jobs/many/rescales/history?limit=3&offset=3>; rel="next"'
    seen = [r["rescaleUuid"] for r in first]
    offset = 3
    while True:
        _, page, headers = get(f"{served[0]}/jobs/many/rescales/history?limit=3&offset={offset}")
        seen += [r["rescaleUuid"] for r in page]
        if "Link" not in headers:
            break
        offset += 3
    assert seen == ["m-open", *(f"m-{i}" for i in reversed(range(MANY)))]
    in_progress = first[0]
    assert in_progress["terminalState"] is None and in_progress["endTimestampInMillis"] is None


def test_details_keep_open_spans_and_exceptions(served: tuple[str, Layout]) -> None:
    details = api(served, "/jobs/many/rescales/details/m-open")
    states = details["schedulerStates"]
    assert [s["state"] for s in states] == ["Executing", "Failing", "Restarting"]
    assert states[1]["stringifiedException"] == "java.lang.RuntimeException: boom"
    assert states[2]["leaveTimestampInMillis"] is None and states[2]["durationInMillis"] is None
    overview = api(served, "/jobs/many/rescales/overview")
    assert overview["rescalesCounts"] == {
        "ignored": 0,
        "inProgress": 1,
        "completed": MANY,
        "failed": 0,
    }
    assert overview["latest"]["completed"]["rescaleUuid"] == "m-6"


def test_jobs_lists_every_job_and_writes_are_refused(served: tuple[str, Layout]) -> None:
    jobs = {job["id"]: job for job in api(served, "/jobs")["jobs"]}
    assert set(jobs) == {golden.JOB_ID, "many"}
    assert jobs["many"]["rescalesCounts"]["completed"] == MANY
    request = urllib.request.Request(served[0] + "/jobs/many/rescales/config", method="DELETE")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)
    assert refused.value.code == 405


def test_a_new_commit_is_answered_and_an_unchanged_table_is_not_read_again(
    served: tuple[str, Layout], spark: Any, codec: Any
) -> None:
    layout = served[1]
    source = Source(layout.data_dir / "tables", SCALEFOLD_TABLES)
    jobs = source.jobs()
    assert source.jobs() is jobs  # the same version: the same index, nothing read again
    before = api(served, "/jobs/many/rescales/overview")["rescalesCounts"]
    spans = [("Executing", T0 + 990_000, T0 + 991_000), ("Executing", T0 + 991_000, T0 + 991_000)]
    late = synthetic.rescale("many", "m-late", spans=spans, reason="EXCEPTION_OCCURRED", attempt=99)
    write_records(spark, codec, [late], layout, first_offset=1_000)
    after = api(served, "/jobs/many/rescales/overview")
    assert after["rescalesCounts"] == {**before, "failed": before["failed"] + 1}
    assert after["latest"]["failed"]["rescaleUuid"] == "m-late"
    assert source.jobs() is not jobs
    assert len(source.jobs().rows("many") or []) == len(jobs.rows("many") or []) + 1
