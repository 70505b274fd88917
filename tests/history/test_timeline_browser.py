"""The HTML timeline opened in a real browser: Debian's chromium, headless, screenshot checked.

The page comes from the functions `scalefold history timeline --out X.html` uses
(`timeline_rows` on collected span rows, then `render_html`), fed synthetic rows:
no Spark needed, so the test costs one browser start (a few seconds). The
screenshot is read with Pillow; each state's bars are found by the exact colour
of the renderer's own table (`STATE_COLOURS`), sized against the geometry the
renderer laid out. `make test` installs chromium first (deploy/browser/chromium.sh);
the test runs that script itself if chromium is missing, and skips only where it cannot
install it (not root).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from services.history.timeline import (
    ROW_HEIGHT,
    STATE_COLOURS,
    TOP,
    Bar,
    TimelineRow,
    _Scale,
    render_html,
    timeline_rows,
)

INSTALL = Path(__file__).resolve().parents[2] / "deploy" / "browser" / "chromium.sh"
WINDOW = (1400, 700)
BAR_HEIGHT = ROW_HEIGHT - 6
T0 = 1_795_389_000_000
IN_PROGRESS = "c3a7f002-c"


Span = tuple[str, int, str, int, int | None]
"""rescale, span index, state, enter and leave (ms after T0; leave None: open)."""


def _span(start: int, span: Span) -> dict[str, object]:
    uuid, index, state, enter, leave = span
    return {
        "rescale_uuid": uuid,
        "start_timestamp_ms": T0 + start,
        "updated_at_ms": T0 + 96_000,
        "trigger_cause": "NEW_RESOURCE_AVAILABLE",
        "terminal_state": None if uuid == IN_PROGRESS else "COMPLETED",
        "terminated_reason": None if uuid == IN_PROGRESS else "SUCCEEDED",
        "span_index": index,
        "state": state,
        "enter_timestamp_ms": T0 + enter,
        "leave_timestamp_ms": None if leave is None else T0 + leave,
    }


SPANS: list[Span] = [
    # every state of the colour table, each span at least 2 s (about 18 px wide)
    ("6f1c2a90-a", 0, "Created", 0, 3_000),
    ("6f1c2a90-a", 1, "WaitingForResources", 3_000, 12_000),
    ("6f1c2a90-a", 2, "CreatingExecutionGraph", 12_000, 15_000),
    ("6f1c2a90-a", 3, "Executing", 15_000, 40_000),
    ("6f1c2a90-a", 4, "Restarting", 40_000, 46_000),
    ("80d4e5b1-b", 0, "Executing", 46_000, 60_000),
    ("80d4e5b1-b", 1, "StopWithSavepoint", 60_000, 66_000),
    ("80d4e5b1-b", 2, "Canceling", 66_000, 70_000),
    ("80d4e5b1-b", 3, "Failing", 70_000, 74_000),
    ("80d4e5b1-b", 4, "Finished", 74_000, 78_000),
    # a rescale in progress: its last span is open and reaches the latest revision (96 s)
    ("c3a7f002-c", 0, "Executing", 78_000, 84_000),
    ("c3a7f002-c", 1, "WaitingForResources", 84_000, None),
]


def rows() -> list[TimelineRow]:
    starts = {"6f1c2a90-a": 0, "80d4e5b1-b": 46_000, IN_PROGRESS: 78_000}
    return timeline_rows([_span(starts[span[0]], span) for span in SPANS])


def expected_area(chart: list[TimelineRow], state: str, open_: bool) -> float:
    """The pixels the renderer's layout gives `state`'s bars (closed or open ones)."""
    scale = _Scale.of(chart, relative=False)
    return sum(
        (scale.x(bar.end_ms) - scale.x(bar.start_ms)) * BAR_HEIGHT
        for row in chart
        for bar in row.bars
        if bar.state == state and bar.open == open_
    )


def rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def chromium() -> str:
    """Debian's chromium; installed here if `make test`'s step did not run (as root)."""
    if shutil.which("chromium") is None:
        subprocess.run([str(INSTALL)], timeout=900, check=True)
    found = shutil.which("chromium")
    if found is None:
        pytest.skip(
            "Debian's chromium is not installed and could not be (not root): "
            "run deploy/browser/chromium.sh as root"
        )
    return found


def screenshot(page: Path, out: Path) -> None:
    command = [
        chromium(),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
        "--force-color-profile=srgb",  # the bars' exact colours, to count them
        f"--user-data-dir={out.parent / 'profile'}",  # its own: no other chromium's lock
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
        f"--screenshot={out}",
        page.as_uri(),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0 and out.exists(), done.stderr[-2000:]


@pytest.fixture(scope="module")
def shot(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[TimelineRow], object]:
    from PIL import Image

    chart = rows()
    folder = tmp_path_factory.mktemp("timeline")
    page = folder / "timeline.html"
    page.write_text(render_html(chart, "Rescales of job clicks", relative=False), encoding="utf-8")
    png = folder / "timeline.png"
    screenshot(page, png)
    image = Image.open(png).convert("RGB")
    assert image.size == WINDOW
    return chart, image


def test_every_state_in_the_data_renders_as_bars_of_its_colour(shot) -> None:
    chart, image = shot
    counts = Counter({colour: n for n, colour in image.getcolors(maxcolors=1 << 24)})
    states = {bar.state for row in chart for bar in row.bars}
    assert states == set(STATE_COLOURS)  # the data covers the whole colour table
    legend_key = 12 * 12
    for state in states:
        solid = expected_area(chart, state, open_=False)
        hatched = expected_area(chart, state, open_=True)  # its colour between dark diagonals
        got = counts[rgb(STATE_COLOURS[state])] - legend_key
        # Anti-aliased edges and the grid lines drawn over the bars take a few pixels.
        low, high = 0.75 * solid + 0.2 * hatched, 1.05 * solid + 0.85 * hatched + legend_key
        assert low <= got <= high, (state, got, solid, hatched)


def _origin(image, chart: list[TimelineRow]) -> tuple[int, int]:
    """Where the SVG's (0, 0) is in the screenshot, found from the first rescale's
    Executing bar: the only stretch of Executing's colour that is 25 s long."""
    scale = _Scale.of(chart, relative=False)
    bar = next(b for b in chart[0].bars if b.state == "Executing")
    colour = rgb(STATE_COLOURS["Executing"])
    pixels = image.load()
    width, height = image.size
    for y in range(height):
        xs = [x for x in range(width) if pixels[x, y] == colour]
        if len(xs) >= 0.9 * (scale.x(bar.end_ms) - scale.x(bar.start_ms)):
            return round(min(xs) - scale.x(bar.start_ms)), y - (TOP + 3)
    raise AssertionError("the first rescale's Executing bar is not in the screenshot")


def _middle(image, chart: list[TimelineRow], row: int, bar: Bar) -> list[tuple[int, int, int]]:
    """The pixels along the middle of `bar`, 3 px in from either end."""
    scale = _Scale.of(chart, relative=False)
    dx, dy = _origin(image, chart)
    y = dy + TOP + row * ROW_HEIGHT + 3 + BAR_HEIGHT // 2
    pixels = image.load()
    lo, hi = round(dx + scale.x(bar.start_ms)) + 3, round(dx + scale.x(bar.end_ms)) - 3
    return [pixels[x, y] for x in range(lo, hi)]


def _dark(pixel: tuple[int, int, int]) -> bool:
    return sum(pixel) < 200


def test_an_open_span_is_hatched_and_a_closed_one_solid(shot) -> None:
    chart, image = shot
    waiting = rgb(STATE_COLOURS["WaitingForResources"])
    row, open_bar = next((i, bar) for i, r in enumerate(chart) for bar in r.bars if bar.open)
    assert open_bar.state == "WaitingForResources" and open_bar.end_ms == T0 + 96_000
    inside = _middle(image, chart, row, open_bar)
    dark = sum(map(_dark, inside)) / len(inside)
    coloured = sum(p == waiting for p in inside) / len(inside)
    assert 0.15 <= dark <= 0.7 and coloured >= 0.2, (dark, coloured)
    # dark diagonals cross the colour again and again along the bar (one every ~11 px)
    crossings = sum(1 for a, b in itertools.pairwise(inside) if _dark(a) and not _dark(b))
    assert crossings >= len(inside) / 20, crossings
    # the closed WaitingForResources span of the first rescale is solid
    closed = next(b for b in chart[0].bars if b.state == "WaitingForResources")
    solid = _middle(image, chart, 0, closed)
    assert not any(map(_dark, solid))
    assert sum(p == waiting for p in solid) >= 0.9 * len(solid)
