"""The live SQL endpoints: a running `history run` serves its views over Spark Connect to a
plain pyspark client and to `scalefold history sql`, and over JDBC to Beeline, and keeps them
fresh as batches commit."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from services.contracts import Codec, Settings
from services.history import synthetic
from services.history.endpoint import JDBC_URL_FILE, reachable, read_url, url_file
from tests.history.support import ROOT, HistoryProcess, encoded, wait_for
from tests.kafka_support import produce

pytestmark = [pytest.mark.integration, pytest.mark.spark]

START = 1_700_000_000_000

PLAIN_CLIENT = """
import json, sys, time
from pyspark.sql import SparkSession

url, expected, deadline = sys.argv[1], int(sys.argv[2]), time.monotonic() + float(sys.argv[3])
spark = SparkSession.builder.remote(url).getOrCreate()
while True:
    rows = spark.sql(
        "SELECT job_id, rescale_uuid FROM global_temp.rescales ORDER BY rescale_uuid"
    ).collect()
    if len(rows) >= expected or time.monotonic() > deadline:
        break
    time.sleep(0.5)
print(json.dumps([[row.job_id, row.rescale_uuid] for row in rows]))
"""
"""A user's own script: pyspark's Connect client, polling until the rows have arrived."""


BEELINE = "org.apache.hive.beeline.BeeLine"
PROMPT = re.compile(r"^\d+: jdbc:hive2://\S+> ", re.M)
"""Beeline echoes its prompt before the output of `-e` (on the same line)."""


def _beeline(url: str, query: str) -> list[list[str]]:
    """The rows of `query` through Beeline, Hive's JDBC command-line client, as the README
    runs it: from pyspark's own jars (hive-beeline, hive-jdbc), CSV without a header."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    command = ["java", "-cp", f"{jars}/*", BEELINE, "-u", url, "--outputformat=csv2"]
    command += ["--silent=true", "--showHeader=false", "-e", query]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return [row for row in csv.reader(PROMPT.sub("", done.stdout).splitlines()) if row]


def _history_sql(data_dir: Path, query: str, *flags: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "services.cli", "history", "sql"]
    command += ["--data-dir", str(data_dir), "--format", "json", *flags, query]
    return subprocess.run(
        command, check=False, cwd=ROOT, capture_output=True, text=True, timeout=300
    )


@pytest.mark.timeout(900)  # a Spark service, a Connect client, Beeline, 4 CLIs: > 600 s at load 60
def test_a_running_history_serves_its_views_to_spark_connect_and_jdbc_clients(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    records = list(synthetic.fleet(jobs=3, rescales_per_job=4, start_ms=START))
    first = [rec for rec in records if rec["startTimestampInMillis"] < START + 2 * 60_000]
    rest = [rec for rec in records if rec["startTimestampInMillis"] >= START + 2 * 60_000]
    expected = {(rec["jobId"], rec["rescaleUuid"]) for rec in records}
    expected_first = {(rec["jobId"], rec["rescaleUuid"]) for rec in first}
    assert rest and len(expected_first) < len(expected)
    produce(kafka, kafka.topics.rescales, encoded(codec, first))

    data_dir = tmp_path / "history"
    args = ("--trigger-seconds", "1", "--no-commands")
    job = HistoryProcess(kafka, data_dir, tmp_path / "history.log", *args)
    try:
        wait_for(lambda: job.running() and read_url(data_dir) is not None, 240, "sql.url")
        url = read_url(data_dir)
        assert url is not None and url.startswith("sc://127.0.0.1:")
        assert reachable(url)

        # A plain pyspark script, knowing nothing of scalefold but the address.
        client = subprocess.run(
            [sys.executable, "-c", PLAIN_CLIENT, url, str(len(expected_first)), "180"],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert client.returncode == 0, client.stderr
        assert {tuple(row) for row in json.loads(client.stdout)} == expected_first

        # New records arrive: `history sql` (through the endpoint) sees them once committed.
        produce(kafka, kafka.topics.rescales, encoded(codec, rest))
        query = "SELECT job_id, rescale_uuid FROM rescales"
        answers: list[subprocess.CompletedProcess[str]] = []

        def all_rows_served() -> bool:
            job.running()
            answers.append(_history_sql(data_dir, query, "-v"))
            assert answers[-1].returncode == 0, answers[-1].stderr
            return len(answers[-1].stdout.splitlines()) == len(expected)

        wait_for(all_rows_served, 180, "history sql to show every rescale")
        answer = answers[-1]
        rows = [json.loads(line) for line in answer.stdout.splitlines()]
        assert {(row["job_id"], row["rescale_uuid"]) for row in rows} == expected
        assert f"querying the running history service at {url}" in answer.stderr

        # A JDBC client on the same views (global_temp.<view>) gets the same rows.
        wait_for(
            lambda: job.running() and read_url(data_dir, JDBC_URL_FILE) is not None, 240, "jdbc.url"
        )
        jdbc_url = read_url(data_dir, JDBC_URL_FILE)
        assert jdbc_url is not None and jdbc_url.startswith("jdbc:hive2://127.0.0.1:")
        over_jdbc = _beeline(jdbc_url, "SELECT job_id, rescale_uuid FROM global_temp.rescales")
        assert sorted(over_jdbc) == sorted([row["job_id"], row["rescale_uuid"]] for row in rows)
        assert len(over_jdbc) == len(expected)

        # Without -v it says nothing but the answer, and which history answered.
        quiet = _history_sql(data_dir, "SELECT count(*) AS n FROM job_summary")
        assert quiet.returncode == 0, quiet.stderr
        assert quiet.stderr.splitlines() == [
            f"[history] read from the history service running at {url} for {data_dir}"
        ]
        assert json.loads(quiet.stdout) == {"n": 3}

        # `history summary` reads the committed Delta tables itself (no JVM), service or not.
        command = [sys.executable, "-m", "services.cli", "history", "summary", "-v"]
        summary = subprocess.run(
            [*command, "--data-dir", str(data_dir)],
            check=False,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert summary.returncode == 0, summary.stderr
        assert f"read the committed Delta tables under {data_dir / 'tables'}" in summary.stderr
        total = [line.split() for line in summary.stdout.splitlines() if "total" in line]
        assert total[0] == ["total", str(len(expected))]
    finally:
        job.terminate()
        code = job.wait(120)
    assert code == 0, job.tail()
    assert not url_file(data_dir).exists(), "a stopped service withdraws its address"
    assert not url_file(data_dir, JDBC_URL_FILE).exists(), "and its JDBC address"
    log = job.log.read_text(errors="replace")
    assert f"Spark SQL (Spark Connect) at {url}" in log
    assert f"Spark SQL (JDBC) at {jdbc_url}" in log
    assert (data_dir / "jdbc" / "derby.log").exists(), "Hive's Derby logs under DATA_DIR"
    assert "ERROR org.apache.hive" not in log and "Failed to cancel job group" not in log


def test_history_sql_without_a_running_service_uses_a_local_spark_quietly(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "history"
    data_dir.mkdir()
    (data_dir / "sql.url").write_text("sc://127.0.0.1:1\n")  # left by a killed service

    answer = _history_sql(data_dir, "SELECT count(*) AS n FROM rescales")

    assert answer.returncode == 0, answer.stderr
    assert json.loads(answer.stdout) == {"n": 0}
    # no JVM or Spark log line reaches the terminal; only which (empty) history was read
    assert answer.stderr.splitlines() == [
        f"[history] read from the files under {data_dir / 'tables'}, which hold no rescale yet "
        f"(no history service runs for {data_dir}: a Spark session of this command's own)"
    ]

    loud = _history_sql(data_dir, "SELECT count(*) AS n FROM rescales", "-v")
    assert loud.returncode == 0, loud.stderr
    assert "using a local Spark" in loud.stderr
    assert "Spark ready" in loud.stderr
