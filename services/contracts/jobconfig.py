"""The keys of a job's configuration the scheduler reads, and the values they take.

Producers write them into `JobSubmitted.configuration` and
`JobConfigurationUpdated.entries`; the scheduler core parses and validates the
values (`services.scheduler.core.config`). Flink's key names where Flink has one.
"""

from __future__ import annotations

import re
from enum import StrEnum

P = "jobmanager.adaptive-scheduler."

SCHEDULER_MODE = "scheduler-mode"
COOLDOWN = P + "executing.cooldown-after-rescaling"
COOLDOWN_DEPRECATED = P + "scaling-interval.min"
EXECUTING_STABILIZATION = P + "executing.resource-stabilization-timeout"
EXECUTING_STABILIZATION_DEPRECATED = P + "scaling-interval.max"
WAIT_TIMEOUT = P + "submission.resource-wait-timeout"
WAIT_TIMEOUT_DEPRECATED = P + "resource-wait-timeout"
SUBMISSION_STABILIZATION = P + "submission.resource-stabilization-timeout"
SUBMISSION_STABILIZATION_DEPRECATED = P + "resource-stabilization-timeout"
MAX_CHECKPOINT_FAILURES = P + "rescale-trigger.max-checkpoint-failures"
MAX_DELAY = P + "rescale-trigger.max-delay"
ACTIVE_CHECKPOINT = P + "rescale-trigger.active-checkpoint.enabled"
PREFER_MINIMAL_TASKMANAGERS = P + "prefer-minimal-taskmanagers"
MIN_PARALLELISM_INCREASE = P + "min-parallelism-increase"
HISTORY_SIZE = "web.adaptive-scheduler.rescale-history.size"
# How long a finished job is kept (Flink: in the JobManager's store of completed jobs,
# seconds, default 3600); scalefold's scheduler then releases the job's state.
JOB_STORE_EXPIRATION = "jobstore.expiration-time"
MIN_PAUSE = "execution.checkpointing.min-pause"
# FLINK-40379 (apache/flink#28999, open): wait this long after a rescale-triggered restart
# for the pre-restart parallelism to come back. Unset: off, as Flink today.
RESCALE_STABILIZATION = P + "rescale.resource-stabilization-timeout"

RESTART_STRATEGY = "restart-strategy.type"
FIXED_ATTEMPTS = "restart-strategy.fixed-delay.attempts"
FIXED_DELAY = "restart-strategy.fixed-delay.delay"
EXP_INITIAL = "restart-strategy.exponential-delay.initial-backoff"
EXP_MAX = "restart-strategy.exponential-delay.max-backoff"
EXP_MULTIPLIER = "restart-strategy.exponential-delay.backoff-multiplier"
EXP_RESET = "restart-strategy.exponential-delay.reset-backoff-threshold"
EXP_JITTER = "restart-strategy.exponential-delay.jitter-factor"
EXP_ATTEMPTS = "restart-strategy.exponential-delay.attempts-before-reset-backoff"
RATE_MAX_FAILURES = "restart-strategy.failure-rate.max-failures-per-interval"
RATE_INTERVAL = "restart-strategy.failure-rate.failure-rate-interval"
RATE_DELAY = "restart-strategy.failure-rate.delay"

SCALING_POLICY = "scalefold.scaling-policy"
STABILIZATION_PLACEMENT = "scalefold.rescale.stabilization"
RUNTIME_MODE = "scalefold.runtime.mode"
SIMULATED_CREATE_TIME = "scalefold.runtime.simulated.creation-time"
SIMULATED_FIRST_CREATE_TIME = "scalefold.runtime.simulated.first-creation-time"
SIMULATED_CANCEL_TIME = "scalefold.runtime.simulated.cancellation-time"
# Shadow mode: the job runs on a real Flink cluster of this name, observed by the bridge
# (services/bridge); the scheduler predicts it, and the history planner never commands it.
OBSERVED_CLUSTER = "scalefold.observed-cluster"


class ScalingPolicy(StrEnum):
    """Which parallelism change a rescale may make (seed 004's ScalingPolicy)."""

    FLINK = "flink"  # any change of the computable parallelism (Flink today)
    MIN_INCREASE = "min-increase"  # scale up only by min-parallelism-increase or more
    PROPORTIONAL = "proportional"  # every vertex at the same fraction of its upper bound
    DOUBLE_HALVE = "double-halve"  # parallelism only doubles or halves


class StabilizationPlacement(StrEnum):
    """Where a rescale waits for resources to stabilize (seed 003, FLINK-33092)."""

    EXECUTING = "executing"  # Flink today: before cancelling the running job
    WAITING_FOR_RESOURCES = "waiting-for-resources"  # before FLINK-33092: after cancelling


class RuntimeMode(StrEnum):
    """Who answers the scheduler's requests to create and cancel execution graphs."""

    SIMULATED = "simulated"  # the core answers itself after the configured times
    EXTERNAL = "external"  # a runtime (the embedded cluster) reports with job events


class RestartStrategyType(StrEnum):
    NONE = "none"
    FIXED_DELAY = "fixed-delay"
    EXPONENTIAL_DELAY = "exponential-delay"
    FAILURE_RATE = "failure-rate"


_SECOND, _MINUTE, _HOUR = 1000, 60_000, 3_600_000
_UNITS = {
    **dict.fromkeys(("ms", "milli", "millis", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("s", "sec", "secs", "second", "seconds"), _SECOND),
    **dict.fromkeys(("min", "mins", "minute", "minutes"), _MINUTE),
    **dict.fromkeys(("h", "hour", "hours"), _HOUR),
    **dict.fromkeys(("d", "day", "days"), 24 * _HOUR),
}
_DURATION = re.compile(r"^\s*(-?\d+)\s*([a-zA-Z]*)\s*$")


def duration_ms(text: str) -> int | None:
    """Flink's duration syntax ("30 s", "5 min", "100ms"; a bare number is ms) in ms;
    None when `text` is not one."""
    match = _DURATION.match(text)
    unit = match.group(2).lower() if match else ""
    if match is None or (unit and unit not in _UNITS):
        return None
    return int(match.group(1)) * _UNITS.get(unit, 1)
