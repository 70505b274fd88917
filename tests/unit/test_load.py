"""`scalefold load`'s traces (services/tools/load.py): rates, their integral, the files."""

from __future__ import annotations

import pytest

from services.tools.load import SHAPES, Trace, TraceError, parse, record, shape


def test_a_step_and_a_ramp_give_their_rates_and_their_records() -> None:
    trace = parse("# warm up\n0 100\n10 100\n10 300\n20 500  # ramp up\n")

    assert [trace.rate(t) for t in (0, 9.9, 10, 15, 20, 99)] == [100, 100, 300, 400, 500, 500]
    assert trace.records_by(10) == pytest.approx(1000)
    assert trace.records_by(20) == pytest.approx(1000 + (300 + 500) / 2 * 10)
    assert trace.records_by(5) == pytest.approx(500)
    assert trace.duration == 20


def test_a_trace_starting_later_holds_its_first_rate_from_0() -> None:
    trace = Trace(((5.0, 10.0), (10.0, 10.0)))
    assert trace.records_by(5) == pytest.approx(50)
    assert trace.records_by(10) == pytest.approx(100)


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "at least one point"),
        ("0 10\n5\n", "line 2"),
        ("0 ten\n", "line 1"),
        ("5 10\n0 10\n", "never go back"),
        ("0 -1\n", "0 or more"),
        ("0 nan\n", "finite"),
    ],
)
def test_a_bad_trace_file_says_where(text: str, said: str) -> None:
    with pytest.raises(TraceError, match=said):
        parse(text, "t.txt")


@pytest.mark.parametrize("name", SHAPES)
def test_every_shape_reaches_its_peak_and_lasts_its_duration(name: str) -> None:
    trace = shape(name, 1000.0, 600.0)
    assert trace.duration == 600
    assert max(rate for _, rate in trace.points) == pytest.approx(1000)
    assert min(rate for _, rate in trace.points) > 0


def test_records_are_keyed_in_turn_and_carry_their_sequence() -> None:
    assert record(65, 64, 1_700_000_000_000) == (b"k1", b"k1 65 1700000000000")
    key, padded = record(65, 64, 1_700_000_000_000, size=40)
    assert (key, len(padded)) == (b"k1", 40)
    assert padded.startswith(b"k1 65 1700000000000 x")
