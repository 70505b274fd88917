"""The web page in a real browser: Debian's chromium, headless, over real history tables.

Spark writes a small history (a job with completed, failed and in-progress rescales,
one of them with a failing span and its exception, and the records of a real Flink
2.3.0's two rescales); `scalefold history serve`'s server answers on a free loopback
port. Each page is loaded in chromium: `--dump-dom` gives the document the browser
built, which must show what the tables hold; `--screenshot` saves each page (the job's
page is the README's picture, docs/rest-api-web.png) and must not be blank.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from services.history import synthetic
from services.history.paths import Layout
from services.history.restapi.fixtures import write_records
from services.history.restapi.server import make_server, url_of
from tests.history import rest_golden as golden
from tests.history.test_timeline_browser import chromium

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1800)]

T0 = 1_795_000_000_000
WINDOW = (1400, 1000)


def _records() -> list[dict[str, Any]]:
    records = []
    for i, (reason, post) in enumerate(
        [("SUCCEEDED", 2), ("SUCCEEDED", 4), ("EXCEPTION_OCCURRED", 4), ("SUCCEEDED", 2)]
    ):
        start = T0 + i * 120_000
        spans = [
            ("Executing", start, start + 20_000),
            ("Restarting", start + 20_000, start + 23_000),
            ("WaitingForResources", start + 23_000, start + 30_000),
            ("Executing", start + 30_000, start + 30_000),
        ]
        group = synthetic.Group(desired=4, pre=6 - post, post=post)
        records.append(
            synthetic.rescale(
                "orders", f"orders-{i}", spans=spans, groups=[group], reason=reason, attempt=i + 1
            )
        )
    failing = [
        ("Executing", T0 + 600_000, T0 + 610_000),
        ("Failing", T0 + 610_000, T0 + 612_000),
        ("Restarting", T0 + 612_000, None),
    ]
    records.append(synthetic.rescale("orders", "orders-open", spans=failing, attempt=5))
    return [*records, *golden.records()]


@pytest.fixture(scope="module")
def site(spark: Any, codec: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    layout = Layout(tmp_path_factory.mktemp("web"))
    write_records(spark, codec, _records(), layout)
    server = make_server(layout.data_dir / "tables", "127.0.0.1", 0)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True
    )
    thread.start()
    try:
        yield url_of(server)
    finally:
        server.shutdown()
        server.server_close()


class _Cells(HTMLParser):
    """The text of every table cell, row by row, per table class; and the frames' sources."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.frames: list[str] = []
        self._table, self._row, self._cell = "", list[str](), None  # type: ignore[var-annotated]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = dict(attrs).get("class") or ""
            self.tables.setdefault(self._table, [])
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "br" and self._cell is not None:
            self._cell += " "
        elif tag == "iframe":
            self.frames.append(dict(attrs).get("src") or "")

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell += data

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join(self._cell.split()))
            self._cell = None
        elif tag == "tr":
            self.tables[self._table].append(self._row)


def _browser(url: str, out: Path) -> tuple[_Cells, str]:
    """The DOM chromium built for `url`, parsed; and its screenshot saved to `out`."""
    base = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        f"--user-data-dir={out.parent / 'profile'}",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ]
    dom = subprocess.run(
        [*base, "--dump-dom", url], capture_output=True, text=True, timeout=120, check=False
    )
    assert dom.returncode == 0 and "<html" in dom.stdout, dom.stderr[-2000:]
    shot = subprocess.run(
        [*base, f"--screenshot={out}", url], capture_output=True, timeout=120, check=False
    )
    assert shot.returncode == 0 and out.exists(), shot.stderr[-2000:]
    _not_blank(out)
    cells = _Cells()
    cells.feed(dom.stdout)
    return cells, dom.stdout


def _not_blank(png: Path) -> None:
    from PIL import Image

    image = Image.open(png).convert("RGB")
    assert image.size == WINDOW
    colours = image.getcolors(maxcolors=1 << 24) or []
    assert len(colours) > 20, "the screenshot is (nearly) one colour"


def test_the_fleet_page_lists_every_job_with_its_outcomes(site: str, tmp_path: Path) -> None:
    page, _ = _browser(f"{site}/web/", tmp_path / "fleet.png")
    rows = {row[0]: row for row in page.tables["fleet"][1:]}
    assert set(rows) == {"orders", golden.JOB_ID}
    # job, source, rescales, completed, failed, ignored, in progress, flapping, latest
    assert rows["orders"][1:7] == ["scalefold", "5", "3", "1", "0", "1"]
    assert rows["orders"][7] == "1"  # the completed ones' slots 2, 4, 2: up, then down
    assert "IN PROGRESS" in rows["orders"][8]
    assert rows[golden.JOB_ID][2:4] == ["2", "2"]


def test_a_jobs_page_shows_its_rescales_and_the_timeline(site: str, tmp_path: Path) -> None:
    page, _ = _browser(f"{site}/web/jobs/orders", tmp_path / "job.png")
    rescales = page.tables["rescales"]
    assert rescales[0][:3] == ["rescale", "trigger", "outcome"]
    assert [row[0] for row in rescales[1:]] == [
        "orders-open",
        *(f"orders-{i}" for i in (3, 2, 1, 0)),
    ]
    by_uuid = {row[0]: row for row in rescales[1:]}
    assert by_uuid["orders-2"][2] == "FAILED EXCEPTION_OCCURRED"
    assert by_uuid["orders-3"][2] == "COMPLETED SUCCEEDED"
    assert by_uuid["orders-3"][4] == "30.0 s"
    assert re.fullmatch(r"(default operator 0 4→2 ?){2}", by_uuid["orders-3"][5]), by_uuid
    assert page.frames == ["/web/jobs/orders/timeline?source=scalefold"]
    _, dom = _browser(f"{site}{page.frames[0]}", tmp_path / "timeline.png")
    assert dom.count("<rect") >= 4 * 4 + 3  # every span of every rescale is a bar
    readme = Path(__file__).resolve().parents[2] / "docs" / "rest-api-web.png"
    if not readme.exists():
        shutil.copy(tmp_path / "job.png", readme)


def test_a_rescales_page_shows_vertices_slots_and_spans_with_exceptions(
    site: str, tmp_path: Path
) -> None:
    page, _ = _browser(f"{site}/web/jobs/orders/rescales/orders-open", tmp_path / "open.png")
    states = page.tables["states"]
    assert [row[0] for row in states[1:]] == ["Executing", "Failing", "Restarting"]
    assert states[2][4] == "java.lang.RuntimeException: boom"
    assert states[3][2] == "(open)"
    uuid = golden.UUIDS[1]
    flink, _ = _browser(f"{site}/web/jobs/{golden.JOB_ID}/rescales/{uuid}", tmp_path / "f.png")
    vertices = {row[1]: row for row in flink.tables["vertices"][1:]}
    assert vertices["Source: Numbers -> Slow map"][2:] == ["default", "4", "1", "1", "2"]
    assert vertices["Sum -> Discard: Writer"][2:] == ["sums", "4", "1", "1", "1"]
    slots = {row[0]: row for row in flink.tables["slots"][1:]}
    assert slots["default"][2:] == ["4", "1", "1", "2"]
    assert [row[0] for row in flink.tables["states"][1:]] == [
        "Executing",
        "Restarting",
        "CreatingExecutionGraph",
        "Executing",
    ]


def test_an_unknown_job_is_a_page_saying_so(site: str, tmp_path: Path) -> None:
    _, dom = _browser(f"{site}/web/jobs/nope", tmp_path / "nope.png")
    assert "Job nope not found" in dom
