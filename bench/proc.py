"""What the kernel says of a process the benches measure (Linux /proc)."""

from __future__ import annotations

from pathlib import Path


def memory_mib(pid: int) -> tuple[float, float]:
    """A process's resident memory now and at its peak (VmRSS, VmHWM), MiB."""
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    rss, peak = (int(status[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))
    return rss, peak
