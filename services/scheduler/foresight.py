"""What the adaptive scheduler will do with a parallelism decision before it is sent: the
job's recorded inputs folded with the decision's requirements change appended
(contracts/foresight.py; the history service's autoscaler asks it).

The change is the one the actuator makes (FLIP-291, as the Kubernetes operator's
autoscaler does): each targeted vertex's upper bound set to its target, its lower bound
to the smaller of the target and its current lower bound; the other vertices keep theirs.
It is folded at the later of now and the job's last recorded input, and the fold's timers
run for `HORIZON_MS` more: the first rescale it starts says the trigger, the outcome and
the parallelism the job reaches with the slots the fold knows of.

`foresee` is pure (the inputs as data); `forecast` reads them from the job-events topic.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from services.contracts import Codec, Settings
from services.contracts.access import KafkaConnectionError
from services.contracts.events import Event, JobSubmitted, Requirement, RequirementsUpdated
from services.contracts.foresight import Forecast, ForecastUnknownError
from services.scheduler.core.driver import Replay
from services.scheduler.core.effects import RescaleUpdated
from services.scheduler.core.fold import Defaults
from services.scheduler.core.model import JobState

HORIZON_MS = 10 * 60_000
"""How long after the change the fold's timers run: longer than Flink's default
cooldown, stabilization and resource-wait timeouts together."""


def recorded_bounds(
    events: Sequence[Event], start: JobState | None = None
) -> dict[str, tuple[int, int]]:
    """Every vertex's (lower, upper) bounds, the last recorded ones (a submitted job's are
    Flink's defaults: 1 to its parallelism), after the snapshot `start`'s if given."""
    current: dict[str, tuple[int, int]] = {}
    if start is not None:
        info = start.info
        current = {
            v.id: (b.lower, b.upper) for v, b in zip(info.vertices, info.bounds, strict=True)
        }
    for event in events:
        if isinstance(event, JobSubmitted):
            current = {v.id: (1, v.parallelism) for v in event.vertices}
        elif isinstance(event, RequirementsUpdated):
            current |= {r.vertex_id: (r.lower, r.upper) for r in event.requirements}
    return current


def requirements(
    events: Sequence[Event], targets: Mapping[str, int], start: JobState | None = None
) -> tuple[Requirement, ...]:
    """Every vertex's bounds after the targets: the recorded ones with each target applied."""
    current = recorded_bounds(events, start)
    unknown = sorted(set(targets) - set(current))
    if unknown:
        raise ForecastUnknownError(f"the job has no vertex {', '.join(unknown)}")
    bounds = {
        vertex: (min(targets[vertex], lower), targets[vertex])
        if vertex in targets
        else (lower, upper)
        for vertex, (lower, upper) in current.items()
    }
    return tuple(Requirement(v, lower, upper) for v, (lower, upper) in sorted(bounds.items()))


def foresee(
    job_key: str,
    events: Sequence[Event],
    targets: Mapping[str, int],
    now_ms: int,
    *,
    defaults: Defaults = (),
    horizon_ms: int = HORIZON_MS,
    start: JobState | None = None,
) -> Forecast:
    """The first rescale the targets start (module doc); from the job's snapshot `start`
    (its state through the inputs before `events`) if given."""
    if not events and start is None:
        raise ForecastUnknownError(f"job {job_key} has no input the scheduler could fold")
    at = max(now_ms, start.now if start else 0, *(event.timestamp for event in events))
    change = RequirementsUpdated(job_key, at, requirements(events, targets, start))
    run = Replay(defaults)
    if start is not None:
        run.resume(start)
    known: set[str] = set()
    for event in events:
        known |= _rescales(run.feed(event)).keys()
    known |= _rescales(run.run_timers(at)).keys()
    started = _rescales([*run.feed(change), *run.drain(at + horizon_ms)])
    # a rescale the snapshot held in progress was announced before it: not the change's
    fresh = sorted(
        (
            record
            for uuid, record in started.items()
            if uuid not in known and (record["startTimestampInMillis"] or at) >= at
        ),
        key=lambda record: record["startTimestampInMillis"],
    )
    within = f"{horizon_ms // 1000} s"
    before = recorded_bounds(events, start)
    if not fresh:
        return Forecast(job_key, None, None, {}, f"no rescale starts within {within}", before)
    first = fresh[0]
    reached = {
        v["jobVertexId"]: v["postRescaleParallelism"]
        for v in first["vertices"] or ()
        if v["postRescaleParallelism"] is not None
    }
    short = {v: reached[v] for v in targets if v in reached and reached[v] < targets[v]}
    after = (first["startTimestampInMillis"] - at) / 1000
    line = (
        f"{first['triggerCause']} rescale {after:.0f} s after the change, "
        f"{first['terminalState'] or 'IN_PROGRESS'}"
    )
    if short:
        line += "; the slots there are reach only " + ", ".join(
            f"{v[:8]} {p} of {targets[v]}" for v, p in sorted(short.items())
        )
    return Forecast(job_key, first["triggerCause"], first["terminalState"], reached, line, before)


def _rescales(effects: Any) -> dict[str, dict[str, Any]]:
    """The latest revision of each rescale the effects update, by its uuid."""
    found: dict[str, dict[str, Any]] = {}
    for effect in effects:
        if isinstance(effect, RescaleUpdated):
            found[effect.rescale_uuid] = effect.record
    return found


def forecast(settings: Settings, job_key: str, targets: Mapping[str, int], now_ms: int) -> Forecast:
    """The history's question (contracts/foresight.py `Forecaster`), answered from the
    job's recorded inputs on the job-events topic."""
    from services.contracts import SchemaRegistry
    from services.contracts.kafka import TopicReadError
    from services.scheduler.core.config import ConfigError
    from services.scheduler.whatif import WhatIfError, read_recorded

    codec = Codec(SchemaRegistry.load(settings.schemas_dir))
    try:
        recorded = read_recorded(settings, codec, lambda key: key == job_key, key=job_key)
        events = recorded.events_of(job_key)
        return foresee(job_key, events, targets, now_ms, start=recorded.start_of(job_key))
    except (ConfigError, TopicReadError, KafkaConnectionError, WhatIfError) as error:
        raise ForecastUnknownError(str(error)) from None
