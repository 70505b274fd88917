"""Every reading verb's mistake is one line on stderr and exit status 1, on the offline path
(the files on disk, no service) and against a running history service (Spark Connect);
and the JVM-free reader (lake.py) answers what Spark's views answer.

Each mistake goes to the real CLI, `python -m services.cli history ...`, in a process of
its own, as a user types it."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.contracts import records as r
from services.history import lake, overview, synthetic
from services.history import timeline as chart
from services.history.catalog import build_views, view_names
from services.history.decode import RescaleSchemas, decode, valid
from services.history.endpoint import read_url
from services.history.paths import Layout
from services.history.tables import TABLES
from services.history.upsert import write_tables
from services.history.views import KAFKA_SOURCE_SCHEMA
from tests.history.support import ROOT, HistoryProcess, encoded, wait_for
from tests.kafka_support import produce
from tests.patience import patient

pytestmark = [pytest.mark.integration, pytest.mark.spark]

START = 1_700_000_000_000
JOBS = ("job-0000", "job-0001", "job-x")


def _records() -> list[dict[str, Any]]:
    """Two jobs' completed rescales, and a third job's failed, ignored and waiting ones."""
    at = START + 3_600_000
    failed = [("Executing", at, at + 1_000), ("Restarting", at + 1_000, at + 4_000)]
    ignored = [("Executing", at + 5_000, at + 7_500)]
    waiting = [("Restarting", at + 9_000, at + 9_500), ("WaitingForResources", at + 9_500, None)]
    return [
        *synthetic.fleet(jobs=2, rescales_per_job=3, start_ms=START),
        synthetic.rescale("job-x", "x-0", spans=failed, reason="EXCEPTION_OCCURRED"),
        synthetic.rescale("job-x", "x-1", spans=ignored, reason="RESOURCE_REQUIREMENTS_UPDATED"),
        synthetic.rescale("job-x", "x-2", spans=waiting),
    ]


def _history(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "services.cli", "history", *args]
    return subprocess.run(
        command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def _one_line(done: subprocess.CompletedProcess[str], verb: str, *fragments: str) -> str:
    """The mistake's single stderr line (nothing on stdout), exit status 1."""
    lines = done.stderr.splitlines()
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    assert len(lines) == 1, done.stderr[-3000:]
    assert lines[0].startswith(f"scalefold history {verb}: "), lines[0]
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert done.stdout == ""
    return lines[0]


@pytest.fixture(scope="module")
def offline(spark: Any, codec: Codec, tmp_path_factory: pytest.TempPathFactory) -> Layout:
    """A history directory written as the job writes it (the same transforms, Delta tables)."""
    when = datetime(2024, 1, 1, tzinfo=UTC)
    rows = [
        (rec["jobId"].encode(), codec.encode(r.RESCALE, rec), "t", 0, offset, when, 0)
        for offset, rec in enumerate(_records())
    ]
    raw = spark.createDataFrame(rows, KAFKA_SOURCE_SCHEMA)
    decoded = valid(decode(raw, RescaleSchemas.of(codec.registry))).localCheckpoint()
    layout = Layout(tmp_path_factory.mktemp("offline") / "history")
    write_tables({name: transform(decoded) for name, transform in TABLES.items()}, layout.table)
    return layout


def test_the_lake_answers_what_sparks_views_answer(
    spark: Any, codec: Codec, offline: Layout
) -> None:
    views = build_views(spark, offline, RescaleSchemas.of(codec.registry))
    history = lake.Lake.at(offline.data_dir)
    for job in (None, JOBS[0], "job-x"):
        latest = views["rescales"] if job is None else views["rescales"].where(f"job_id = '{job}'")
        found = lake.summary(history, job)
        assert found.counts == overview.counts(latest).first().asDict()  # type: ignore[union-attr]
        expected = [row.asDict() for row in overview.latest_per_terminal_state(latest).collect()]
        assert expected and len(found.latest) == len(expected)
        for got, want in zip(found.latest, expected, strict=True):
            assert {key: got[key] for key in want} == want
        expected_stats = [row.asDict() for row in overview.duration_stats(latest).collect()]
        assert len(found.stats) == len(expected_stats)
        for got, want in zip(found.stats, expected_stats, strict=True):
            for key, value in want.items():
                assert got[key] == pytest.approx(value), (key, got, want)
    frame = chart.timeline_frame(views["rescales"], views["rescale_states"], JOBS[1], 2)
    spark_rows = chart.timeline_rows([row.asDict() for row in frame.collect()])
    assert chart.timeline_rows(lake.timeline_spans(history, JOBS[1], 2)) == spark_rows
    assert len(spark_rows) == 2 and all(row.bars for row in spark_rows)
    frame = chart.timeline_frame(views["rescales"], views["rescale_states"], "job-x", 30)
    spark_rows = chart.timeline_rows([row.asDict() for row in frame.collect()])
    assert chart.timeline_rows(lake.timeline_spans(history, "job-x", 30)) == spark_rows
    assert [row.rescale_uuid for row in spark_rows] == ["x-0", "x-1", "x-2"]


def test_offline_mistakes_are_one_line_without_a_jvm(offline: Layout, tmp_path: Path) -> None:
    where = ("--data-dir", str(offline.data_dir))
    png = str(tmp_path / "t.png")
    _one_line(
        _history("summary", *where, "--job", "nobody"),
        "summary",
        "no rescales of job nobody",
        f"jobs with rescales: {', '.join(JOBS)}",
    )
    _one_line(
        _history("timeline", *where, "--job", "nobody", "--out", png),
        "timeline",
        "no rescales of job nobody",
    )
    missing = str(tmp_path / "no-such-history")
    for verb, *args in (
        ("summary",),
        ("timeline", "--job", JOBS[0], "--out", png),
        ("sql", "SELECT 1"),
    ):
        line = _one_line(_history(verb, "--data-dir", missing, *args), verb)
        assert f"no history at {missing}: no such directory" in line
    assert not Path(png).exists()


def test_offline_sql_mistakes_are_one_line(offline: Layout) -> None:
    """Through a Spark session of the command's own (the files on disk, no service)."""
    where = ("--data-dir", str(offline.data_dir))
    _one_line(_history("sql", *where, "SELEC 1"), "sql", "[PARSE_SYNTAX_ERROR]", "(line 1, pos 0)")
    line = _one_line(
        _history("sql", *where, "SELECT job_id FROM rescales_latest"),
        "sql",
        "no table or view `rescales_latest` (line 1, pos 19)",
        "rescales_latest is a Delta table",
        "query the view rescales;",
    )
    assert line.endswith(f"the views: {', '.join(view_names())}")


@pytest.mark.timeout(patient(900))  # a Spark service and a dozen CLIs on a loaded machine
def test_mistakes_against_a_running_history_service_are_one_line(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    records = _records()
    rescales = len({rec["rescaleUuid"] for rec in records})  # a fleet's rescale: several revisions
    produce(kafka, kafka.topics.rescales, encoded(codec, records))
    data_dir = tmp_path / "history"
    job = HistoryProcess(kafka, data_dir, tmp_path / "history.log", "--no-commands")
    where = ("--data-dir", str(data_dir))
    try:

        def served_and_committed() -> bool:
            job.running()
            if read_url(data_dir) is None or not (data_dir / "tables").is_dir():
                return False
            total = lake.summary(lake.Lake(data_dir), None).counts["total"]
            return bool(total == rescales)

        wait_for(served_and_committed, 300, "the service to serve and commit every rescale")
        url = read_url(data_dir)

        # the service registers its views again after a commit (within about a second
        # unloaded): the Delta table can be ahead of the endpoint for a moment
        answers: list[subprocess.CompletedProcess[str]] = []

        def served_in_sql() -> bool:
            answers.append(
                _history("sql", *where, "--format", "csv", "SELECT count(*) AS n FROM rescales")
            )
            assert answers[-1].returncode == 0, answers[-1].stderr
            return answers[-1].stdout.split() == ["n", str(rescales)]

        wait_for(served_in_sql, 300, "history sql to show every rescale")
        answer = answers[-1]
        assert answer.stderr.splitlines() == [
            f"[history] read from the history service running at {url} for {data_dir}"
        ]

        _one_line(
            _history("sql", *where, "SELEC 1"), "sql", "[PARSE_SYNTAX_ERROR]", "(line 1, pos 0)"
        )
        _one_line(
            _history("sql", *where, "SELECT job_id FROM rescales_latest"),
            "sql",
            "no table or view `rescales_latest` (line 1, pos 19)",
            "query the view rescales;",
            f"the views: {', '.join(view_names())}",
        )
        _one_line(_history("sql", *where, "SELECT nope FROM rescales"), "sql", "`nope`", "pos 7")
        _one_line(_history("summary", *where, "--job", "nobody"), "summary", "job nobody")
        _one_line(
            _history("timeline", *where, "--job", "nobody", "--out", str(tmp_path / "t.html")),
            "timeline",
            "job nobody",
        )
        loud = _history("sql", *where, "-v", "SELEC 1")
        assert loud.returncode == 1 and "== SQL ==" in loud.stderr, "-v shows Spark's whole message"
    finally:
        job.terminate()
        code = job.wait(120)
    assert code == 0, job.tail()
