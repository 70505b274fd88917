"""The adaptive scheduler's settings, with Flink's keys, defaults and deprecated keys.

Settings come as string maps (Flink's `Configuration`): the service's defaults,
overridden by the job's own configuration from its submission, overridden by
later `JobConfigurationUpdated` events. `resolve` turns the merged map into a
typed `SchedulerConfig` and raises `ConfigError` naming the key for anything it
cannot use. Flink's rules (JobManagerOptions, AdaptiveScheduler.Settings.of):

- reactive-mode defaults apply only to keys that are not set; a deprecated
  key counts as set;
- `rescale-trigger.max-delay` defaults to (max-checkpoint-failures + 1) x the
  checkpoint interval, or 0 without checkpointing.

Deliberate deviations, each documented in docs/flink-conformance.md:
- `scaling-interval.max` is wired as a deprecated key of
  `executing.resource-stabilization-timeout` (the seed's forced rescale after a
  maximum interval); Flink reads it nowhere.
- `web.adaptive-scheduler.rescale-history.size` defaults to 64, not 0: recording
  the history is what scalefold is for. 0 still turns recording off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import TypeVar

from services.contracts.jobconfig import (
    ACTIVE_CHECKPOINT,
    COOLDOWN,
    COOLDOWN_DEPRECATED,
    EXECUTING_STABILIZATION,
    EXECUTING_STABILIZATION_DEPRECATED,
    EXP_ATTEMPTS,
    EXP_INITIAL,
    EXP_JITTER,
    EXP_MAX,
    EXP_MULTIPLIER,
    EXP_RESET,
    FIXED_ATTEMPTS,
    FIXED_DELAY,
    HISTORY_SIZE,
    JOB_STORE_EXPIRATION,
    MAX_CHECKPOINT_FAILURES,
    MAX_DELAY,
    MIN_PARALLELISM_INCREASE,
    MIN_PAUSE,
    OBSERVED_CLUSTER,
    PREFER_MINIMAL_TASKMANAGERS,
    RATE_DELAY,
    RATE_INTERVAL,
    RATE_MAX_FAILURES,
    RESCALE_STABILIZATION,
    RESTART_STRATEGY,
    RUNTIME_MODE,
    SCALING_POLICY,
    SCHEDULER_MODE,
    SIMULATED_CANCEL_TIME,
    SIMULATED_CREATE_TIME,
    SIMULATED_FIRST_CREATE_TIME,
    STABILIZATION_PLACEMENT,
    SUBMISSION_STABILIZATION,
    SUBMISSION_STABILIZATION_DEPRECATED,
    WAIT_TIMEOUT,
    WAIT_TIMEOUT_DEPRECATED,
    RestartStrategyType,
    RuntimeMode,
    ScalingPolicy,
    StabilizationPlacement,
    duration_ms,
)

SECOND = 1000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
DEFAULT_HISTORY_SIZE = 64
UNBOUNDED_ATTEMPTS = 2**31 - 1


_E = TypeVar("_E", bound=StrEnum)


class ConfigError(ValueError):
    """A setting has a value the scheduler cannot use; the message names the key."""


_RESTART_ALIASES = {
    "none": RestartStrategyType.NONE,
    "off": RestartStrategyType.NONE,
    "disable": RestartStrategyType.NONE,
    "fixed-delay": RestartStrategyType.FIXED_DELAY,
    "fixeddelay": RestartStrategyType.FIXED_DELAY,
    "exponential-delay": RestartStrategyType.EXPONENTIAL_DELAY,
    "exponentialdelay": RestartStrategyType.EXPONENTIAL_DELAY,
    "failure-rate": RestartStrategyType.FAILURE_RATE,
    "failurerate": RestartStrategyType.FAILURE_RATE,
}


@dataclass(frozen=True)
class RestartConfig:
    """Flink's RestartBackoffTimeStrategy settings (RestartStrategyOptions)."""

    type: RestartStrategyType
    fixed_attempts: int = 1
    fixed_delay_ms: int = SECOND
    initial_backoff_ms: int = SECOND
    max_backoff_ms: int = MINUTE
    multiplier: float = 1.5
    reset_threshold_ms: int = HOUR
    jitter: float = 0.1
    attempts_before_reset: int = UNBOUNDED_ATTEMPTS
    rate_max_failures: int = 1
    rate_interval_ms: int = MINUTE
    rate_delay_ms: int = SECOND


@dataclass(frozen=True)
class SchedulerConfig:
    """A job's effective adaptive-scheduler settings; durations in milliseconds."""

    reactive: bool
    cooldown_ms: int
    executing_stabilization_ms: int
    wait_timeout_ms: int  # negative: wait forever
    submission_stabilization_ms: int
    max_checkpoint_failures: int
    max_delay_ms: int | None  # None: computed from the checkpoint interval
    active_checkpoint: bool
    min_pause_ms: int
    rescale_stabilization_ms: int | None  # None: off (FLINK-40379 is not merged)
    prefer_minimal_taskmanagers: bool
    history_size: int
    job_expiration_ms: int
    """How long a finished job's state is kept (`jobstore.expiration-time`, in seconds
    as Flink reads it): the scheduler releases it then; its history stays in the tables."""
    restart: RestartConfig
    policy: ScalingPolicy
    min_parallelism_increase: int
    stabilization: StabilizationPlacement
    runtime: RuntimeMode
    simulated_create_ms: int
    simulated_cancel_ms: int
    simulated_first_create_ms: int  # the job's first graph (its slots first offered)
    observed_cluster: str | None = None  # shadow mode: the real Flink cluster the job runs on

    def max_trigger_delay(self, checkpoint_interval_ms: int | None) -> int:
        """Flink's computed default: (failures + 1) x interval, 0 without checkpoints."""
        if self.max_delay_ms is not None:
            return self.max_delay_ms
        if not checkpoint_interval_ms or checkpoint_interval_ms <= 0:
            return 0
        return (self.max_checkpoint_failures + 1) * checkpoint_interval_ms

    def settings_snapshot(self, checkpoint_interval_ms: int | None) -> dict[str, str]:
        """The adaptive-scheduler settings as Flink keys, durations in ms (for the record)."""
        max_delay = str(self.max_trigger_delay(checkpoint_interval_ms))
        return {**self._snapshot_without_max_delay, MAX_DELAY: max_delay}

    @cached_property
    def _snapshot_without_max_delay(self) -> dict[str, str]:
        """The snapshot, built once per configuration; MAX_DELAY (which depends on the job's
        checkpoint interval) holds its place in the order."""
        snapshot = {
            SCHEDULER_MODE: "REACTIVE" if self.reactive else "",
            COOLDOWN: str(self.cooldown_ms),
            EXECUTING_STABILIZATION: str(self.executing_stabilization_ms),
            WAIT_TIMEOUT: str(self.wait_timeout_ms),
            SUBMISSION_STABILIZATION: str(self.submission_stabilization_ms),
            MAX_CHECKPOINT_FAILURES: str(self.max_checkpoint_failures),
            MAX_DELAY: "",
            HISTORY_SIZE: str(self.history_size),
            RESTART_STRATEGY: str(self.restart.type),
            SCALING_POLICY: str(self.policy),
            STABILIZATION_PLACEMENT: str(self.stabilization),
        }
        # Only when set: every record of a job that is not observed stays byte for byte as it was.
        if self.observed_cluster is not None:
            snapshot[OBSERVED_CLUSTER] = self.observed_cluster
        return snapshot


def parse_duration(key: str, text: str) -> int:
    """Flink's duration syntax ("30 s", "5 min", "100ms"; a bare number is ms) to ms."""
    millis = duration_ms(text)
    if millis is None:
        raise ConfigError(f"{key}: {text!r} is not a duration such as '30 s' or '5 min'")
    return millis


def resolve(settings: Mapping[str, str], checkpointing: bool = False) -> SchedulerConfig:
    """The typed configuration of one job; ConfigError for anything invalid."""
    reader = _Reader(settings)
    reactive = _mode(reader)
    config = SchedulerConfig(
        reactive=reactive,
        cooldown_ms=reader.duration(COOLDOWN, 30 * SECOND, COOLDOWN_DEPRECATED, minimum=0),
        executing_stabilization_ms=reader.duration(
            EXECUTING_STABILIZATION, MINUTE, EXECUTING_STABILIZATION_DEPRECATED, minimum=0
        ),
        wait_timeout_ms=reader.duration(
            WAIT_TIMEOUT, -1 if reactive else 5 * MINUTE, WAIT_TIMEOUT_DEPRECATED
        ),
        submission_stabilization_ms=reader.duration(
            SUBMISSION_STABILIZATION,
            0 if reactive else 10 * SECOND,
            SUBMISSION_STABILIZATION_DEPRECATED,
            minimum=0,
        ),
        max_checkpoint_failures=reader.integer(MAX_CHECKPOINT_FAILURES, 2, minimum=1),
        max_delay_ms=reader.optional_duration(MAX_DELAY),
        active_checkpoint=reader.boolean(ACTIVE_CHECKPOINT, True),
        min_pause_ms=reader.duration(MIN_PAUSE, 0, minimum=0),
        rescale_stabilization_ms=reader.optional_duration(RESCALE_STABILIZATION),
        prefer_minimal_taskmanagers=reader.boolean(PREFER_MINIMAL_TASKMANAGERS, True),
        history_size=max(0, reader.integer(HISTORY_SIZE, DEFAULT_HISTORY_SIZE)),
        job_expiration_ms=reader.integer(JOB_STORE_EXPIRATION, 3600, minimum=0) * SECOND,
        restart=_restart(reader, checkpointing),
        policy=reader.choice(SCALING_POLICY, ScalingPolicy, ScalingPolicy.FLINK),
        min_parallelism_increase=reader.integer(MIN_PARALLELISM_INCREASE, 1, minimum=1),
        stabilization=reader.choice(
            STABILIZATION_PLACEMENT, StabilizationPlacement, StabilizationPlacement.EXECUTING
        ),
        runtime=reader.choice(RUNTIME_MODE, RuntimeMode, RuntimeMode.SIMULATED),
        simulated_create_ms=(create := reader.duration(SIMULATED_CREATE_TIME, 0, minimum=0)),
        simulated_cancel_ms=reader.duration(SIMULATED_CANCEL_TIME, 0, minimum=0),
        simulated_first_create_ms=reader.duration(SIMULATED_FIRST_CREATE_TIME, create, minimum=0),
        observed_cluster=_observed(reader),
    )
    for key, value in (
        (MAX_DELAY, config.max_delay_ms),
        (RESCALE_STABILIZATION, config.rescale_stabilization_ms),
    ):
        if value is not None and value < 0:
            raise ConfigError(f"{key}: must not be negative")
    return config


def _observed(reader: _Reader) -> str | None:
    name = reader.raw(OBSERVED_CLUSTER)
    if name is not None and not name.strip():
        raise ConfigError(f"{OBSERVED_CLUSTER}: must name a cluster (or be unset)")
    return None if name is None else name.strip()


def _mode(reader: _Reader) -> bool:
    mode = reader.settings.get(SCHEDULER_MODE, "").strip()
    if mode and mode.upper() != "REACTIVE":
        raise ConfigError(f"{SCHEDULER_MODE}: {mode!r} is not REACTIVE (or unset)")
    return bool(mode)


def _restart(reader: _Reader, checkpointing: bool) -> RestartConfig:
    default = "exponential-delay" if checkpointing else "none"
    name = reader.settings.get(RESTART_STRATEGY, default).strip().lower()
    if name not in _RESTART_ALIASES:
        raise ConfigError(
            f"{RESTART_STRATEGY}: {name!r} is not one of {', '.join(_RESTART_ALIASES)}"
        )
    restart = RestartConfig(
        type=_RESTART_ALIASES[name],
        fixed_attempts=reader.integer(FIXED_ATTEMPTS, 1, minimum=0),
        fixed_delay_ms=reader.duration(FIXED_DELAY, SECOND, minimum=0),
        initial_backoff_ms=reader.duration(EXP_INITIAL, SECOND, minimum=0),
        max_backoff_ms=reader.duration(EXP_MAX, MINUTE, minimum=0),
        multiplier=reader.number(EXP_MULTIPLIER, 1.5),
        reset_threshold_ms=reader.duration(EXP_RESET, HOUR, minimum=1),
        jitter=reader.number(EXP_JITTER, 0.1),
        attempts_before_reset=reader.integer(EXP_ATTEMPTS, UNBOUNDED_ATTEMPTS, minimum=1),
        rate_max_failures=reader.integer(RATE_MAX_FAILURES, 1, minimum=1),
        rate_interval_ms=reader.duration(RATE_INTERVAL, MINUTE, minimum=1),
        rate_delay_ms=reader.duration(RATE_DELAY, SECOND, minimum=0),
    )
    if restart.multiplier < 1.0:
        raise ConfigError(f"{EXP_MULTIPLIER}: must be at least 1.0")
    if not 0.0 <= restart.jitter <= 1.0:
        raise ConfigError(f"{EXP_JITTER}: must be between 0 and 1")
    return restart


@dataclass(frozen=True)
class _Reader:
    settings: Mapping[str, str]

    def raw(self, key: str, deprecated: str | None = None) -> str | None:
        if key in self.settings:
            return self.settings[key]
        if deprecated is not None and deprecated in self.settings:
            return self.settings[deprecated]
        return None

    def duration(
        self, key: str, default: int, deprecated: str | None = None, minimum: int | None = None
    ) -> int:
        text = self.raw(key, deprecated)
        value = default if text is None else parse_duration(key, text)
        if minimum is not None and value < minimum:
            raise ConfigError(f"{key}: {text!r} must not be negative")
        return value

    def optional_duration(self, key: str) -> int | None:
        text = self.raw(key)
        return None if text is None else parse_duration(key, text)

    def integer(self, key: str, default: int, minimum: int | None = None) -> int:
        text = self.raw(key)
        try:
            value = default if text is None else int(text.strip())
        except ValueError:
            raise ConfigError(f"{key}: {text!r} is not an integer") from None
        if minimum is not None and value < minimum:
            raise ConfigError(f"{key}: {value} is below the minimum {minimum}")
        return value

    def number(self, key: str, default: float) -> float:
        text = self.raw(key)
        try:
            return default if text is None else float(text.strip())
        except ValueError:
            raise ConfigError(f"{key}: {text!r} is not a number") from None

    def boolean(self, key: str, default: bool) -> bool:
        text = self.raw(key)
        if text is None:
            return default
        if text.strip().lower() in ("true", "false"):
            return text.strip().lower() == "true"
        raise ConfigError(f"{key}: {text!r} is not true or false")

    def choice(self, key: str, enum: type[_E], default: _E) -> _E:
        text = self.raw(key)
        if text is None:
            return default
        try:
            return enum(text.strip().lower())
        except ValueError:
            options = ", ".join(e.value for e in enum)
            raise ConfigError(f"{key}: {text!r} is not one of {options}") from None
