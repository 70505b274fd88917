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


def children() -> dict[int, list[int]]:
    """Every process's children, by parent pid (one read of /proc)."""
    found: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        found.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    return found


def tree_rss_mib(pid: int | None, tree: dict[int, list[int]]) -> float | None:
    """The resident memory of `pid` and its descendants in `tree` (`children`), MiB."""
    if pid is None:
        return None
    total, todo = 0.0, [pid]
    while todo:
        current = todo.pop()
        todo += tree.get(current, [])
        try:
            total += memory_mib(current)[0]
        except (OSError, KeyError):  # ended meanwhile, or a zombie (no VmRSS)
            continue
    return round(total, 1)
