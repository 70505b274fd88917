"""What the parallelism decision (parallelism.py) says of real Flink jobs now, from the
history's committed tables, read with delta-rs (no Spark): `scalefold flink advise`.

Advisor mode: the decision is computed and shown with its evidence, and nothing is sent.
For each job: its workload samples (`flink_signals`) of the last `window_ms` before its
newest, cut to the newest run of its tasks (the samples after the last change of any
vertex's parallelism or a counter going back), the first and last of them as the
window; the downtime a rescale costs it, from its own recorded rescales
(`flink_rescales_latest`: the median downtime of the completed ones; the setting's
when it has none).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from services.contracts.jobconfig import duration_ms
from services.history import parallelism as pl
from services.history.flink_tables import LATEST_TABLE as FLINK_RESCALES
from services.history.lake import Lake, flink_job
from services.history.signal_tables import RAW_TABLE as SIGNALS

WINDOW = "job.autoscaler.metrics.window"


@dataclass(frozen=True)
class Advice:
    """One job's decision, and the samples and window it came from."""

    job_key: str
    decision: pl.Decision
    problems: tuple[str, ...]
    first_ms: int | None
    last_ms: int | None
    samples: int


def settings(pairs: Sequence[str]) -> tuple[pl.PolicyConfig, int]:
    """`-D key=value` pairs (the `job.autoscaler.*` keys of parallelism.py, and WINDOW)
    as the policy's settings and the window; ValueError naming a bad one."""
    durations = {
        pl.CATCH_UP: "catch_up_ms",
        pl.RESTART_TIME: "restart_ms",
        pl.SCALE_DOWN_DELAY: "scale_down_delay_ms",
        pl.STABILIZATION: "stabilization_ms",
        pl.SCALE_UP_WINDOW: "scale_up_window_ms",
    }
    numbers = {
        pl.TARGET_UTILIZATION: "target_utilization",
        pl.UTILIZATION_BOUNDARY: "utilization_boundary",
        pl.MAX_SCALE_DOWN_FACTOR: "max_scale_down_factor",
    }
    chosen: dict[str, Any] = {}
    window = pl.DEFAULT_WINDOW_MS
    for pair in pairs:
        key, _, value = pair.partition("=")
        key, value = key.strip(), value.strip()
        key = pl.DEPRECATED_KEYS.get(key, key)
        if key in durations or key == WINDOW:
            millis = duration_ms(value)
            if millis is None or millis < 0:
                raise ValueError(f"{key}: {value!r} is not a duration such as '30 s' or '5 min'")
            if key == WINDOW:
                window = millis
            else:
                chosen[durations[key]] = millis
        elif key in numbers:
            chosen[numbers[key]] = _number(key, value, float)
        elif key == pl.MAX_PARALLELISM:
            chosen["max_parallelism"] = _number(key, value, int)
        elif key == pl.ADJUST_MODE:
            if value.upper() not in pl.ADJUST_MODES:
                raise ValueError(f"{key}: {value!r} is not one of {', '.join(pl.ADJUST_MODES)}")
            chosen["adjust_mode"] = value.upper()
        elif key == pl.BUSY_TIME_AGGREGATOR:
            if value.upper() not in pl.BUSY_TIME_AGGREGATORS:
                named = ", ".join(pl.BUSY_TIME_AGGREGATORS)
                raise ValueError(f"{key}: {value!r} is not one of {named}")
            chosen["busy_time_aggregator"] = value.upper()
        else:
            choices = [pl.MAX_PARALLELISM, pl.ADJUST_MODE, pl.BUSY_TIME_AGGREGATOR, WINDOW]
            known = sorted([*durations, *numbers, *choices])
            raise ValueError(
                f"{key or pair!r} is not a setting of the decision ({', '.join(known)})"
            )
    return pl.PolicyConfig(**chosen), window


def _number(key: str, value: str, kind: type[float] | type[int]) -> float | int:
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{key}: {value!r} is not a number") from None


def sample_of(row: Mapping[str, Any]) -> pl.Sample:
    """A `flink_signals` row as the policy's sample."""
    return pl.Sample(
        row["observed_at_ms"],
        tuple(
            pl.VertexSample(
                vertex_id=v["job_vertex_id"],
                parallelism=v["parallelism"],
                max_parallelism=v["max_parallelism"],
                read_records=v["read_records"],
                write_records=v["write_records"],
                busy_ms=v["accumulated_busy_time_ms"],
                pending_records=_backlog(v),
                name=v["job_vertex_name"],
                inputs=tuple(v["inputs"] or ()),
                partitions=v.get("source_partitions"),
                keyed=v.get("keyed_input"),
                busiest_ms_per_s=v.get("busy_time_ms_per_second_max"),
                received=_float(v.get("source_end_offsets")),
            )
            for v in row["vertices"] or ()
        ),
    )


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def _backlog(vertex: Mapping[str, Any]) -> float | None:
    """A source's backlog: the broker's (v2's `source_backlog`, where the bridge could ask
    it) before the connector's `pendingRecords`, which stands still under back pressure
    (the bridge's signals.py)."""
    broker = vertex.get("source_backlog")
    found = broker if broker is not None else vertex["pending_records"]
    return None if found is None else float(found)


def newest_run(samples: Sequence[pl.Sample], window_ms: int) -> list[pl.Sample]:
    """The samples of the newest run of the tasks within `window_ms` of the newest one."""
    if not samples:
        return []
    run = [samples[-1]]
    for earlier in reversed(samples[:-1]):
        if run[-1].at_ms - earlier.at_ms <= 0:
            continue  # a repeat of the same instant
        if samples[-1].at_ms - earlier.at_ms > window_ms or not pl.same_run(earlier, run[-1]):
            break
        run.append(earlier)
    return list(reversed(run))


def unfilled(run: Sequence[pl.Sample], window_ms: int) -> str | None:
    """Why the newest run's samples do not fill the window yet (None: they do, within one
    sampling interval). As the operator's autoscaler, a decision waits for a full window
    after the tasks (re)start: a window that began before a rescale or a load change is
    not the load the tasks now see."""
    if len(run) < 2:
        return "fewer than two samples of one run of its tasks within the window"
    span = run[-1].at_ms - run[0].at_ms
    gap = statistics.median(b.at_ms - a.at_ms for a, b in pairwise(run))
    if span + gap >= window_ms:
        return None
    return f"the window is not full yet: {span / 1000:.0f} s of one run of its tasks, of {window_ms / 1000:.0f} s"


def recent(run: Sequence[pl.Sample], within_ms: int) -> list[pl.Load]:
    """The loads over the run's last `within_ms` (at least that long: from the newest
    sample that far back), for judging a rise (parallelism.py, "A rise"); none when the
    run is not longer or that part cannot be used. Where every source in the newest two
    samples has the broker's count of what arrived, the newest interval instead when its
    input rate is the higher, however long the run (a window shorter than `within_ms` that began
    before the load did read 367 records a second where 500 arrived: the closed loop on
    a real Flink, both cores busy)."""
    if within_ms <= 0 or len(run) < 3:
        return []
    last = run[-1]
    starts = [i for i in range(1, len(run) - 1) if last.at_ms - run[i].at_ms >= within_ms]
    loads: list[pl.Load] = []
    if starts:
        loads, problems = pl.window(run[starts[-1]], last, run[starts[-1] + 1 : -1])
        loads = [] if problems else loads
    if (not starts or starts[-1] != len(run) - 2) and _arrivals_exact(run[-2], last):
        newest, problems = pl.window(run[-2], last)
        if not problems and _rate(newest) > _rate(loads):
            return newest
    return loads


def _arrivals_exact(*samples: pl.Sample) -> bool:
    """Whether every source in `samples` has the broker's end offsets, whose change is
    what arrived (parallelism.py, "Arrivals")."""
    sources = [v for s in samples for v in s.vertices if not v.inputs]
    return bool(sources) and all(v.received is not None for v in sources)


def _rate(loads: Sequence[pl.Load]) -> float:
    return pl.input_rate([x for x in loads if not x.inputs])


def advise(
    lake: Lake, job: str | None, config: pl.PolicyConfig, window_ms: int, now_ms: int
) -> list[Advice]:
    """The decision for `job` (Flink's job id or its key; None: every sampled job)."""
    found = []
    for key, samples in job_samples(lake, job).items():
        run = newest_run(samples, window_ms)
        reason = unfilled(run, window_ms)
        if reason is not None:
            first, last = (run[0].at_ms, run[-1].at_ms) if run else (None, None)
            found.append(Advice(key, pl.Decision(False, reason), (), first, last, len(run)))
            continue
        loads, problems = pl.window(run[0], run[-1], run[1:-1])
        restart = restart_ms(lake, key)
        decision, _ = pl.decide(
            loads if not problems else [],
            config,
            pl.PolicyState(),
            now_ms,
            restart,
            recent=recent(run, config.scale_up_window_ms),
            skews=pl.skews(pl.recorded(samples)),
        )
        if problems:
            decision = pl.Decision(False, "the samples cannot be used: " + "; ".join(problems))
        found.append(Advice(key, decision, tuple(problems), run[0].at_ms, run[-1].at_ms, len(run)))
    return found


def job_samples(
    lake: Lake, job: str | None, since_ms: int | None = None
) -> dict[str, list[pl.Sample]]:
    """Each job's samples (`job`: Flink's job id or its key; None: every job), observed
    at `since_ms` or later (None: all), in time order, by job key."""
    if not lake.committed(SIGNALS):
        return {}
    conditions = [flink_job(job)] if job else []
    if since_ms is not None:
        conditions.append(f"observed_at_ms >= {int(since_ms)}")
    where = f"WHERE {' AND '.join(conditions)}" if conditions else ""
    rows = lake.rows(
        f"SELECT job_key, observed_at_ms, vertices FROM s {where} ORDER BY job_key, observed_at_ms",
        {"s": SIGNALS},
    )
    by_job: dict[str, list[pl.Sample]] = {}
    for row in rows:
        by_job.setdefault(row["job_key"], []).append(sample_of(row))
    return by_job


def restart_ms(lake: Lake, job_key: str) -> int | None:
    """The median downtime of the job's completed rescales, as Flink recorded them."""
    if not lake.committed(FLINK_RESCALES):
        return None
    rows = lake.rows(
        "SELECT downtime_ms FROM f WHERE job_key = '"
        + job_key.replace("'", "''")
        + "' AND terminal_state = 'COMPLETED' AND downtime_ms IS NOT NULL",
        {"f": FLINK_RESCALES},
    )
    downtimes = [row["downtime_ms"] for row in rows]
    return int(statistics.median(downtimes)) if downtimes else None


def as_text(found: Sequence[Advice]) -> list[str]:
    """Per job: the decision and why, then one line per vertex with its evidence."""
    lines: list[str] = []
    for advice in found:
        d = advice.decision
        verdict = "would rescale" if d.send else "no change"
        lines.append(f"{advice.job_key}: {verdict}: {d.reason}")
        if advice.first_ms is not None and advice.last_ms is not None:
            seconds = (advice.last_ms - advice.first_ms) / 1000
            restart = "-" if d.restart_ms is None else f"{d.restart_ms / 1000:.1f} s"
            rate = "-" if d.input_rate is None else f"{d.input_rate:.1f} rec/s"
            backlog = "unknown" if d.backlog is None else f"{d.backlog:.0f}"
            lines.append(
                f"  window {seconds:.0f} s ({advice.samples} samples), input {rate}, "
                f"backlog {backlog}, a rescale's downtime {restart}"
            )
        for v in d.vertices:
            capacity = "-" if v.capacity is None else f"{v.capacity:.1f}"
            lines.append(
                f"  {v.name or v.vertex_id}: {v.current} -> {v.target}, busy {v.busy:.0%}, "
                f"{capacity} rec/s a subtask, target {v.target_rate:.1f} rec/s ({v.reason})"
            )
    return lines


def as_json(found: Sequence[Advice]) -> list[dict[str, Any]]:
    return [
        {
            "job_key": a.job_key,
            "send": a.decision.send,
            "reason": a.decision.reason,
            "targets": a.decision.targets,
            "input_rate": a.decision.input_rate,
            "backlog": a.decision.backlog,
            "restart_ms": a.decision.restart_ms,
            "window": {"first_ms": a.first_ms, "last_ms": a.last_ms, "samples": a.samples},
            "vertices": [v.__dict__ for v in a.decision.vertices],
        }
        for a in found
    ]
