"""Flink's restart-backoff strategies, deterministic.

Exponential delay's jitter is random in Flink; here it is derived from the job
id and the failure count, so a replay restarts at the same moments.
"""

from __future__ import annotations

import hashlib

from services.contracts.jobconfig import RestartStrategyType
from services.scheduler.core.config import RestartConfig
from services.scheduler.core.model import RestartDecision, RestartState
from services.scheduler.core.structs import replace


def on_failure(
    config: RestartConfig, state: RestartState, now: int, job_id: str
) -> tuple[RestartState, RestartDecision]:
    """Record a failure and say whether (and after how long) the job may restart."""
    failures = state.failures + 1
    kind = config.type
    if kind is RestartStrategyType.NONE:
        decision = RestartDecision(False, 0, "restart strategy none: failures are not restarted")
        return replace(state, failures=failures, last_failure_at=now), decision
    if kind is RestartStrategyType.FIXED_DELAY:
        ok = failures <= config.fixed_attempts
        why = f"fixed-delay attempt {failures} of {config.fixed_attempts}"
        new = replace(state, failures=failures, last_failure_at=now)
        return new, RestartDecision(ok, config.fixed_delay_ms, why)
    if kind is RestartStrategyType.FAILURE_RATE:
        window = tuple(t for t in state.recent_failures if now - t < config.rate_interval_ms)
        window += (now,)
        ok = len(window) <= config.rate_max_failures
        why = (
            f"{len(window)} failures within {config.rate_interval_ms} ms "
            f"(max {config.rate_max_failures})"
        )
        new = replace(state, failures=failures, last_failure_at=now, recent_failures=window)
        return new, RestartDecision(ok, config.rate_delay_ms, why)
    return _exponential(config, state, now, job_id, failures)


def _exponential(
    config: RestartConfig, state: RestartState, now: int, job_id: str, failures: int
) -> tuple[RestartState, RestartDecision]:
    reset = (
        state.last_failure_at is None or now - state.last_failure_at >= config.reset_threshold_ms
    )
    if reset:
        backoff, attempts = config.initial_backoff_ms, 1
    else:
        backoff = min(int(state.backoff_ms * config.multiplier), config.max_backoff_ms)
        attempts = state.attempts + 1
    jittered = max(0, round(backoff + backoff * config.jitter * _unit(job_id, failures)))
    new = RestartState(failures, attempts, backoff, now, state.recent_failures)
    ok = attempts <= config.attempts_before_reset
    why = f"exponential-delay attempt {attempts}, backoff {jittered} ms"
    return new, RestartDecision(ok, jittered, why)


def _unit(job_id: str, failures: int) -> float:
    """A deterministic value in [-1, 1) for the jitter of one failure."""
    digest = hashlib.sha256(f"{job_id}/{failures}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**63 - 1.0


def strategy_string(config: RestartConfig, state: RestartState) -> str:
    """The strategy as its Flink class's toString, for "Recovery is suppressed by ..."."""
    kind = config.type
    if kind is RestartStrategyType.NONE:
        return "NoRestartBackoffTimeStrategy"
    if kind is RestartStrategyType.FIXED_DELAY:
        return (
            f"FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts="
            f"{config.fixed_attempts}, backoffTimeMS={config.fixed_delay_ms})"
        )
    if kind is RestartStrategyType.FAILURE_RATE:
        return (
            "FailureRateRestartBackoffTimeStrategy(FailureRateRestartBackoffTimeStrategy("
            f"failuresIntervalMS={config.rate_interval_ms},backoffTimeMS={config.rate_delay_ms},"
            f"maxFailuresPerInterval={config.rate_max_failures})"
        )
    return (
        f"ExponentialDelayRestartBackoffTimeStrategy(initialBackoffMS={config.initial_backoff_ms}, "
        f"maxBackoffMS={config.max_backoff_ms}, backoffMultiplier={config.multiplier}, "
        f"resetBackoffThresholdMS={config.reset_threshold_ms}, jitterFactor={config.jitter}, "
        f"attemptsBeforeResetBackoff={config.attempts_before_reset}, "
        f"currentRestartAttempt={state.attempts})"
    )
