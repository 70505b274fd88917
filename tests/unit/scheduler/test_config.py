"""Configuration with Flink's keys, defaults, deprecated keys and reactive defaults."""

from __future__ import annotations

import pytest

from services.contracts import jobconfig as c
from services.scheduler.core.config import ConfigError, parse_duration, resolve


@pytest.mark.flink("AdaptiveScheduler.Settings.of")
def test_flinks_defaults() -> None:
    config = resolve({})
    assert (config.cooldown_ms, config.executing_stabilization_ms) == (30_000, 60_000)
    assert (config.wait_timeout_ms, config.submission_stabilization_ms) == (300_000, 10_000)
    assert config.max_checkpoint_failures == 2
    assert config.active_checkpoint and config.prefer_minimal_taskmanagers
    assert config.restart.type is c.RestartStrategyType.NONE
    assert resolve({}, checkpointing=True).restart.type is c.RestartStrategyType.EXPONENTIAL_DELAY


def test_scalefold_records_history_by_default_and_zero_turns_it_off() -> None:
    assert resolve({}).history_size == 64
    assert resolve({c.HISTORY_SIZE: "0"}).history_size == 0
    assert resolve({c.HISTORY_SIZE: "-5"}).history_size == 0


@pytest.mark.flink("AdaptiveScheduler.Settings.of")
def test_the_max_trigger_delay_follows_the_checkpoint_interval() -> None:
    config = resolve({})
    assert config.max_trigger_delay(None) == 0
    assert config.max_trigger_delay(10_000) == 30_000
    assert resolve({c.MAX_CHECKPOINT_FAILURES: "4"}).max_trigger_delay(10_000) == 50_000
    assert resolve({c.MAX_DELAY: "7 s"}).max_trigger_delay(10_000) == 7_000


@pytest.mark.flink("AdaptiveSchedulerTest.testScalingIntervalConfigurationIsRespected")
def test_the_flink_test_pin_for_the_executing_timeouts() -> None:
    # testScalingIntervalConfigurationIsRespected
    config = resolve({c.COOLDOWN: "1337 ms", c.EXECUTING_STABILIZATION: "7331 ms"})
    assert (config.cooldown_ms, config.executing_stabilization_ms) == (1337, 7331)


@pytest.mark.flink("ConfigOption.withDeprecatedKeys")
@pytest.mark.parametrize(
    ("deprecated", "value", "field", "expected"),
    [
        (c.COOLDOWN_DEPRECATED, "2 min", "cooldown_ms", 120_000),
        (c.EXECUTING_STABILIZATION_DEPRECATED, "90 s", "executing_stabilization_ms", 90_000),
        (c.WAIT_TIMEOUT_DEPRECATED, "1 min", "wait_timeout_ms", 60_000),
        (c.SUBMISSION_STABILIZATION_DEPRECATED, "3 s", "submission_stabilization_ms", 3_000),
    ],
)
def test_deprecated_keys_are_honoured(
    deprecated: str, value: str, field: str, expected: int
) -> None:
    assert getattr(resolve({deprecated: value}), field) == expected


def test_the_new_key_wins_over_the_deprecated_one() -> None:
    assert resolve({c.COOLDOWN: "1 s", c.COOLDOWN_DEPRECATED: "2 s"}).cooldown_ms == 1_000


@pytest.mark.flink("AdaptiveScheduler.Settings.of")
def test_reactive_defaults_apply_only_to_unset_keys() -> None:
    reactive = resolve({c.SCHEDULER_MODE: "reactive"})
    assert reactive.reactive
    assert (reactive.wait_timeout_ms, reactive.submission_stabilization_ms) == (-1, 0)
    explicit = resolve({c.SCHEDULER_MODE: "REACTIVE", c.WAIT_TIMEOUT_DEPRECATED: "10 s"})
    assert explicit.wait_timeout_ms == 10_000  # a deprecated key counts as set


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("30 s", 30_000),
        ("30s", 30_000),
        ("5 min", 300_000),
        ("100ms", 100),
        ("2 h", 7_200_000),
        ("250", 250),
        ("1 d", 86_400_000),
        ("-1 ms", -1),
    ],
)
def test_flink_duration_syntax(text: str, ms: int) -> None:
    assert parse_duration("k", text) == ms


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({c.COOLDOWN: "soon"}, "is not a duration"),
        ({c.COOLDOWN: "5 fortnights"}, "is not a duration"),
        ({c.COOLDOWN: "-1 s"}, "must not be negative"),
        ({c.MAX_CHECKPOINT_FAILURES: "0"}, "below the minimum 1"),
        ({c.MAX_CHECKPOINT_FAILURES: "two"}, "is not an integer"),
        ({c.MAX_DELAY: "-5 s"}, "must not be negative"),
        ({c.ACTIVE_CHECKPOINT: "yes"}, "is not true or false"),
        ({c.SCHEDULER_MODE: "ELASTIC"}, "is not REACTIVE"),
        ({c.RESTART_STRATEGY: "sometimes"}, "is not one of"),
        ({c.EXP_MULTIPLIER: "0.5"}, "at least 1.0"),
        ({c.EXP_MULTIPLIER: "lots"}, "is not a number"),
        ({c.EXP_JITTER: "2"}, "between 0 and 1"),
        ({c.SCALING_POLICY: "greedy"}, "is not one of flink"),
    ],
)
def test_invalid_values_name_the_key(settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message) as error:
        resolve(settings)
    assert next(iter(settings)) in str(error.value)


def test_the_settings_snapshot_uses_flink_keys_in_milliseconds() -> None:
    snapshot = resolve({c.COOLDOWN: "1 min"}).settings_snapshot(10_000)
    assert snapshot[c.COOLDOWN] == "60000"
    assert snapshot[c.MAX_DELAY] == "30000"


def test_the_observed_cluster_is_in_the_snapshot_only_when_set() -> None:
    assert c.OBSERVED_CLUSTER not in resolve({}).settings_snapshot(None)
    observed = resolve({c.OBSERVED_CLUSTER: "prod"})
    assert observed.observed_cluster == "prod"
    snapshot = observed.settings_snapshot(None)
    assert snapshot[c.OBSERVED_CLUSTER] == "prod"
    assert list(snapshot)[:-1] == list(resolve({}).settings_snapshot(None))
    with pytest.raises(ConfigError, match=c.OBSERVED_CLUSTER):
        resolve({c.OBSERVED_CLUSTER: " "})
