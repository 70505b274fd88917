"""`scalefold scheduler`'s own arguments: what argparse refuses before a worker starts."""

from __future__ import annotations

import pytest

from services.cli import parse_args


def test_the_batch_window_is_in_seconds_and_never_negative(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert parse_args(["scheduler"]).batch_window == 0.005
    assert parse_args(["scheduler", "--batch-window", "0"]).batch_window == 0.0
    for bad in ("-0.1", "nan", "soon"):
        with pytest.raises(SystemExit):
            parse_args(["scheduler", "--batch-window", bad])
        assert "--batch-window" in capsys.readouterr().err


def test_the_state_cache_keeps_one_job_at_least(capsys: pytest.CaptureFixture[str]) -> None:
    assert parse_args(["scheduler", "--state-cache", "5"]).state_cache == 5
    with pytest.raises(SystemExit):
        parse_args(["scheduler", "--state-cache", "0"])
    assert "at least 1" in capsys.readouterr().err
