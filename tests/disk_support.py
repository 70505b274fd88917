"""A small filesystem of a test's own, and filling it: a full disk made on purpose."""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def small_disk(where: Path, megabytes: int) -> Iterator[Path]:
    """A filesystem of its own, `megabytes` big, mounted at `where` (a tmpfs: root)."""
    where.mkdir(parents=True)
    size = f"size={megabytes}m"
    subprocess.run(["mount", "-t", "tmpfs", "-o", size, "tmpfs", str(where)], check=True)
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> Path:
    """Write a file until the disk is full, to the last block; return it."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as out:
        for chunk in (1 << 20, 4096):
            with contextlib.suppress(OSError):
                while True:
                    out.write(bytes(chunk))
    return filler
