"""The scheduler service's counters and fold-latency histogram, in Prometheus' text format."""

from __future__ import annotations

import bisect
from collections.abc import Mapping
from dataclasses import dataclass, field

# Fold latency buckets in seconds: 50 us to 1 s.
BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1, 1.0)


@dataclass
class Metrics:
    events_in: int = 0
    events_skipped: int = 0
    rescale_records_out: int = 0
    decisions_out: int = 0
    dead_letters: int = 0
    dead_letters_failed: int = 0
    timer_ticks_sent: int = 0
    holes_filled: int = 0
    jobs_released: int = 0
    batches: int = 0
    fold_seconds_sum: float = 0.0
    fold_buckets: list[int] = field(default_factory=lambda: [0] * (len(BUCKETS) + 1))

    def observe_fold(self, seconds: float) -> None:
        self.fold_seconds_sum += seconds
        self.fold_buckets[bisect.bisect_left(BUCKETS, seconds)] += 1

    @property
    def folds(self) -> int:
        return sum(self.fold_buckets)

    def quantile(self, q: float) -> float:
        """An upper bound of the q-quantile of the fold latency (bucket edge)."""
        target = q * self.folds
        seen = 0
        for edge, count in zip((*BUCKETS, float("inf")), self.fold_buckets, strict=True):
            seen += count
            if seen >= target and count:
                return edge
        return 0.0

    def prometheus(self, jobs: int, stores: Mapping[str, Mapping[str, int]] = {}) -> str:
        """The text exposition; `stores`: per table, RocksDB's memory per kind (bytes)."""
        counters = {
            "scalefold_scheduler_events_in_total": ("input messages consumed", self.events_in),
            "scalefold_scheduler_events_skipped_total": (
                "messages folded before a restart",
                self.events_skipped,
            ),
            "scalefold_scheduler_rescale_records_out_total": (
                "rescale records sent",
                self.rescale_records_out,
            ),
            "scalefold_scheduler_decisions_out_total": (
                "decisions and runtime requests sent",
                self.decisions_out,
            ),
            "scalefold_scheduler_dead_letters_total": (
                "inputs sent to the dead-letter topic",
                self.dead_letters,
            ),
            "scalefold_scheduler_dead_letters_failed_total": (
                "dead letters the broker refused (logged and dropped)",
                self.dead_letters_failed,
            ),
            "scalefold_scheduler_timer_ticks_total": (
                "TimerFired events written",
                self.timer_ticks_sent,
            ),
            "scalefold_scheduler_holes_filled_total": (
                "messages Faust skipped that the worker read from Kafka itself",
                self.holes_filled,
            ),
            "scalefold_scheduler_jobs_released_total": (
                "finished jobs whose state was released (jobstore.expiration-time)",
                self.jobs_released,
            ),
        }
        lines = []
        for name, (help_text, value) in counters.items():
            lines += [f"# HELP {name} {help_text}", f"# TYPE {name} counter", f"{name} {value}"]
        lines += [
            "# HELP scalefold_scheduler_jobs jobs whose state this worker holds decoded (--state-cache)",
            "# TYPE scalefold_scheduler_jobs gauge",
            f"scalefold_scheduler_jobs {jobs}",
        ]
        if stores:
            name = "scalefold_scheduler_rocksdb_memory_bytes"
            lines += [
                f"# HELP {name} memory RocksDB holds for a table (block cache, memtables, "
                "index and filter blocks), over its partitions",
                f"# TYPE {name} gauge",
            ]
            for table, kinds in sorted(stores.items()):
                for kind, value in sorted(kinds.items()):
                    lines.append(f'{name}{{table="{table}",kind="{kind}"}} {value}')
        name = "scalefold_scheduler_fold_seconds"
        lines += [f"# HELP {name} time to fold one input message", f"# TYPE {name} histogram"]
        cumulative = 0
        for edge, count in zip((*BUCKETS, float("inf")), self.fold_buckets, strict=True):
            cumulative += count
            le = "+Inf" if edge == float("inf") else repr(edge)
            lines.append(f'{name}_bucket{{le="{le}"}} {cumulative}')
        lines += [f"{name}_sum {self.fold_seconds_sum:.6f}", f"{name}_count {self.folds}"]
        return "\n".join(lines) + "\n"
