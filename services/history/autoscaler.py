"""The history service's autoscaler: every interval, each sampled Flink job's step
(decisions.py) from the committed `flink_signals`, the scheduler's fold asked what the
adaptive scheduler does with a change worth sending, the change sent as a
SET_PARALLELISM command (FLIP-291 requirements, through the actuator) or only advised,
and every step recorded in `scaling_decisions`.

Modes: `off` (nothing), `advise` (the default: decide and record, send nothing; the Flink
Kubernetes operator's `job.autoscaler.scaling.enabled: false`), `scale` (send). The
policy's state (the last decision sent) is restored from the table on a start, so a
restart does not send again within the stabilization interval.

The table is appended by delta-rs from this thread, a row per step that changed (module
doc of decisions.py); it compacts itself (OPTIMIZE, then VACUUM of what it replaced) when
it holds more than COMPACT_AT files, by its own state, not a clock that a restart resets.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from services.contracts.commands import ExpectedBounds, ScalingAction, ScalingCommand
from services.contracts.foresight import Forecast, Forecaster, ForecastUnknownError
from services.contracts.settings import Settings
from services.history import advice
from services.history import parallelism as pl
from services.history.decisions import (
    TABLE,
    Outcome,
    Step,
    arrow_schema,
    concluded,
    evaluate,
    mark,
    row,
)
from services.history.flink_tables import LATEST_TABLE as FLINK_RESCALES
from services.history.lake import Lake
from services.history.sinklog import latest_version

log = logging.getLogger(__name__)

COMPACT_AT = 32
"""More files than this in `scaling_decisions`: compact it."""
FORECAST_REUSE_MS = 60_000
"""A forecast of the same targets is reused this long (asking reads the job's inputs)."""


class Mode(StrEnum):
    OFF = "off"
    ADVISE = "advise"
    SCALE = "scale"


@dataclass(frozen=True)
class AutoscalerOptions:
    mode: Mode = Mode.ADVISE
    policy: pl.PolicyConfig = field(default_factory=pl.PolicyConfig)
    window_ms: int = pl.DEFAULT_WINDOW_MS
    interval_seconds: float = 10.0
    """How often each job's step runs (the standalone autoscaler's control loop: 10 s)."""
    stale_ms: int = 5 * 60_000
    """A job whose newest sample is older decides nothing (its signals stopped)."""
    record_every_ms: int = 60_000
    """A job's unchanged step is recorded again after this long."""
    retention_hours: float = 24.0
    """Files the compaction replaced are deleted after this long."""
    skew_memory_ms: int = 24 * 3_600_000
    """How far back a job's samples are read, once a start, for the skew of its busiest
    subtask at each parallelism it ran at (parallelism.recorded; then kept as it runs)."""


Send = Callable[[ScalingCommand], None]
"""Sends a command (commands.CommandSender); raises when the broker did not take it."""


class Autoscaler:
    """Keeps `scaling_decisions` and sends what `scale` mode decides (module doc); `tick`
    is called from a thread of the history service, with the time."""

    def __init__(
        self,
        data_dir: Path,
        settings: Settings,
        options: AutoscalerOptions,
        forecaster: Forecaster | None,
        send: Send | None = None,
    ) -> None:
        self._lake = Lake(data_dir)
        self._settings = settings
        self._options = options
        self._forecaster = forecaster
        self._send = send if options.mode is Mode.SCALE else None
        self._sent_before = _restored(self._lake)
        self._states: dict[str, pl.PolicyState] = {}
        """The jobs of this run's steps."""
        self._marks: dict[str, tuple[Any, ...]] = {}
        self._recorded_at: dict[str, int] = {}
        self._forecasts: dict[str, tuple[int, tuple[Any, ...], Forecast]] = {}
        self._restarts: dict[str, tuple[int, int | None]] = {}
        """Per job: its median recorded downtime, with the version of Flink's rescales
        table it was read at (`_restart_ms`)."""
        self._flink_version = -1
        self._readings: dict[str, tuple[int, pl.Readings]] = {}
        """Per job: its busiest subtask's skews (parallelism.Readings), with the instant
        of the newest sample they count."""

    def tick(self, now_ms: int) -> list[dict[str, Any]]:
        """Every sampled job's step; the rows written."""
        o = self._options
        since = now_ms - o.window_ms - o.stale_ms
        by_job = advice.job_samples(self._lake, None, since_ms=since)
        written = []
        for key in sorted({*by_job, *self._states}):
            recorded = self._step(key, by_job.get(key, []), now_ms)
            if recorded is not None:
                written.append(recorded)
        if written:
            self._write(written)
        return written

    def _step(self, key: str, samples: list[pl.Sample], now_ms: int) -> dict[str, Any] | None:
        o = self._options
        state = self._states.get(key) or pl.PolicyState(self._sent_before.get(key))
        restart = self._restart_ms(key) if samples else None
        step, after = evaluate(
            key,
            samples,
            state,
            config=o.policy,
            window_ms=o.window_ms,
            stale_ms=o.stale_ms,
            now_ms=now_ms,
            restart_ms=restart,
            skews=self._skews(key, samples, now_ms),
        )
        self._states[key] = after
        outcome, reason, forecast, command_id = step.outcome, step.reason, None, None
        if outcome is None:
            forecast, unknown = self._forecast(step, now_ms)
            outcome = concluded(forecast, self._send is not None)
            reason = _why(step, outcome, forecast, unknown)
            if outcome is Outcome.SENT:
                command_id, failed = self._sent(step, forecast, now_ms)
                if failed:
                    outcome, reason = Outcome.SEND_FAILED, f"{step.reason}: not sent: {failed}"
                else:
                    self._states[key] = pl.sent(after, now_ms)
        if outcome is Outcome.NO_SIGNALS:  # recorded once; the job is forgotten
            self._states.pop(key, None)
            self._marks.pop(key, None)
            self._forecasts.pop(key, None)
            self._restarts.pop(key, None)
            self._readings.pop(key, None)
            return row(step, outcome, reason, mode=str(o.mode), now_ms=now_ms)
        new = mark(step, outcome)
        due = now_ms - self._recorded_at.get(key, now_ms - o.record_every_ms) >= o.record_every_ms
        if new == self._marks.get(key) and not due and outcome is not Outcome.SENT:
            return None
        self._marks[key], self._recorded_at[key] = new, now_ms
        return row(
            step,
            outcome,
            reason,
            mode=str(o.mode),
            now_ms=now_ms,
            forecast=forecast,
            command_id=command_id,
        )

    def _skews(
        self, key: str, samples: list[pl.Sample], now_ms: int
    ) -> dict[str, dict[int, float]]:
        """The job's busiest-subtask skews by parallelism: on its first step since the
        start from its samples of the last `skew_memory_ms`, then from each step's new
        samples (the one before them paired with the first)."""
        if key not in self._readings:
            since = now_ms - self._options.skew_memory_ms
            history = advice.job_samples(self._lake, key, since_ms=since).get(key, [])
            mark = history[-1].at_ms if history else -1
            self._readings[key] = (mark, pl.recorded(history))
        mark, readings = self._readings[key]
        fresh = next((i for i, sample in enumerate(samples) if sample.at_ms > mark), None)
        if fresh is not None:
            readings = pl.recorded(samples[max(0, fresh - 1) :], readings=readings)
            self._readings[key] = (samples[-1].at_ms, readings)
        return pl.skews(readings)

    def _restart_ms(self, key: str) -> int | None:
        """advice.restart_ms, read again only once Flink's rescales table has a new
        version (a step every few seconds, a rescale every few minutes at most)."""
        table = self._lake.table_dir(FLINK_RESCALES)
        self._flink_version = latest_version(table, self._flink_version)
        known = self._restarts.get(key)
        if known is None or known[0] != self._flink_version:
            known = (self._flink_version, advice.restart_ms(self._lake, key))
            self._restarts[key] = known
        return known[1]

    def _forecast(self, step: Step, now_ms: int) -> tuple[Forecast | None, str]:
        """What the adaptive scheduler does with the step's targets, or None and why not."""
        if self._forecaster is None:
            return None, "no scheduler to ask"
        targets = tuple(sorted(step.decision.targets.items()))
        kept = self._forecasts.get(step.job_key)
        if kept is not None and kept[1] == targets and now_ms - kept[0] < FORECAST_REUSE_MS:
            return kept[2], ""
        try:
            found = self._forecaster(self._settings, step.job_key, dict(targets), now_ms)
        except ForecastUnknownError as error:
            return None, str(error)
        self._forecasts[step.job_key] = (now_ms, targets, found)
        return found, ""

    def _sent(self, step: Step, forecast: Forecast | None, now_ms: int) -> tuple[str, str]:
        """Send the step's targets; the command's id, and why it failed ('' if it did not)."""
        assert self._send is not None
        key = step.job_key
        bounds = forecast.requirements if forecast is not None else {}
        command = ScalingCommand(
            command_id=f"autoscaler-{key}-{step.last_ms}",  # one per window of samples
            job_id=key,
            action=ScalingAction.SET_PARALLELISM,
            amount=0,
            reason=step.reason,
            evidence=(f"{key}@{step.first_ms}", f"{key}@{step.last_ms}"),
            issued_at_millis=now_ms,
            parallelism=step.decision.targets,
            expected_requirements={
                vertex: ExpectedBounds(lower_bound=lower, upper_bound=upper)
                for vertex, (lower, upper) in bounds.items()
            }
            or None,
        )
        try:
            self._send(command)
        except Exception as error:  # the broker's, whatever its kind: the next step retries
            log.warning("autoscaler: %s not sent: %s", command.command_id, error)
            return command.command_id, str(error) or type(error).__name__
        return command.command_id, ""

    def _write(self, rows: list[dict[str, Any]]) -> None:
        import pyarrow as pa
        from deltalake import DeltaTable, write_deltalake

        path = str(self._lake.table_dir(TABLE))
        write_deltalake(path, pa.Table.from_pylist(rows, schema=arrow_schema()), mode="append")
        table = DeltaTable(path)
        if len(table.file_uris()) > COMPACT_AT:
            table.optimize.compact()
            table.vacuum(
                retention_hours=int(self._options.retention_hours),
                enforce_retention_duration=False,
                dry_run=False,
            )


def _why(step: Step, outcome: Outcome, forecast: Forecast | None, unknown: str) -> str:
    if outcome is Outcome.FORECAST_UNKNOWN:
        return (
            f"{step.reason}: not sent: what the adaptive scheduler would do is unknown: {unknown}"
        )
    if outcome is Outcome.NO_RESCALE and forecast is not None:
        return f"{step.reason}: not sent: the adaptive scheduler would start {forecast.described}"
    if outcome is Outcome.ADVISED:
        return f"{step.reason} (advisor mode: not sent)"
    return step.reason


def _restored(lake: Lake) -> dict[str, int]:
    """When each job's last decision was sent, from the table (a restart keeps the
    stabilization interval)."""
    if not lake.committed(TABLE):
        return {}
    rows = lake.rows(
        f"SELECT job_key, max(decided_at_ms) AS sent FROM d WHERE outcome = '{Outcome.SENT}' "
        "GROUP BY job_key",
        {"d": TABLE},
    )
    return {r["job_key"]: int(r["sent"]) for r in rows}
