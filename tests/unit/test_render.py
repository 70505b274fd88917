"""Times for people: ISO-8601 in UTC for epoch times, offsets for logs that count from 0."""

from __future__ import annotations

from services.contracts.render import instant


def test_an_epoch_time_prints_as_iso_8601_utc_to_the_millisecond() -> None:
    assert instant(1795389042897) == "2026-11-22T23:10:42.897Z"


def test_a_log_time_from_zero_prints_as_an_offset() -> None:
    assert instant(0) == "+0.000s"
    assert instant(38_000) == "+38.000s"
