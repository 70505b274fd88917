"""Waiting for room on a full disk (contracts/disk.py), the disk's answers played."""

from __future__ import annotations

import errno
import logging
from pathlib import Path
from typing import Any

import pytest

from services.contracts import disk


def _full_for(times: int, code: int = errno.ENOSPC) -> Any:
    """Path.open that answers `code` for the probe's first `times` opens."""
    real = Path.open
    left = [times]

    def opened(self: Path, *args: Any, **kwargs: Any) -> Any:
        if self.name == ".room" and left[0] > 0:
            left[0] -= 1
            raise OSError(code, "No space left on device")
        return real(self, *args, **kwargs)

    return opened


def test_it_waits_while_the_disk_is_full_says_so_once_and_leaves_no_probe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(Path, "open", _full_for(3))
    slept: list[float] = []
    with caplog.at_level(logging.INFO):
        disk.wait_for_room(tmp_path / "data", logging.getLogger("t"), every_s=7, sleep=slept.append)
    assert slept == [7, 7, 7]
    said = [r.getMessage() for r in caplog.records]
    assert said == [
        f"the disk holding {tmp_path / 'data'} is full: free space on it; waiting for room "
        "(checking every 7 s), then starting where it stopped",
        f"the disk holding {tmp_path / 'data'} has room again; starting",
    ]
    assert list((tmp_path / "data").iterdir()) == []


def test_room_at_once_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO):
        disk.wait_for_room(tmp_path, logging.getLogger("t"), sleep=pytest.fail)
    assert caplog.records == []


def test_another_error_of_the_write_is_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(Path, "open", _full_for(1, errno.EACCES))
    with pytest.raises(PermissionError):
        disk.wait_for_room(tmp_path, logging.getLogger("t"), sleep=pytest.fail)
