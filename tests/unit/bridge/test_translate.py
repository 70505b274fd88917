"""The bridge's readings of Flink 2.3.0's REST answers (captured from a real cluster, in answers/)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from services.bridge import translate as tr
from services.contracts import jobconfig as k
from services.contracts.events import Profile, Requirement
from services.scheduler.core.config import resolve

ANSWERS = Path(__file__).parent / "answers"


def answer(name: str) -> Any:
    return json.loads((ANSWERS / name).read_text())


def test_the_adaptive_scheduler_settings_become_flink_keys_the_core_reads() -> None:
    settings = tr.scheduler_settings(answer("rescales-config.json"))
    assert settings == {
        k.WAIT_TIMEOUT: "60000 ms",
        k.SUBMISSION_STABILIZATION: "1000 ms",
        k.COOLDOWN: "1000 ms",
        k.EXECUTING_STABILIZATION: "2000 ms",
        k.MAX_DELAY: "6000 ms",
        k.MAX_CHECKPOINT_FAILURES: "2",
        k.HISTORY_SIZE: "100",
    }
    config = resolve(settings)
    assert (config.cooldown_ms, config.executing_stabilization_ms) == (1000, 2000)
    assert (config.wait_timeout_ms, config.max_delay_ms, config.history_size) == (60000, 6000, 100)


def test_reactive_mode_is_named_as_flink_names_it() -> None:
    config = {**answer("rescales-config.json"), "schedulerExecutionMode": "REACTIVE"}
    assert tr.scheduler_settings(config)[k.SCHEDULER_MODE] == "REACTIVE"


def test_the_captured_restart_strategy_is_fixed_delay() -> None:
    keys = tr.job_restart_strategy(answer("job-config.json"))
    assert keys == {
        k.RESTART_STRATEGY: "fixed-delay",
        k.FIXED_DELAY: "1000 ms",
        k.FIXED_ATTEMPTS: "1000",
    }
    restart = resolve(keys).restart
    assert (restart.fixed_attempts, restart.fixed_delay_ms) == (1000, 1000)


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        ("Restart deactivated.", {k.RESTART_STRATEGY: "none"}),
        ("Cluster level default restart strategy", {}),
        ("Something a newer Flink says", {}),
        (
            "Failure rate restart with maximum of 3 failures within interval PT1M "
            "and fixed delay PT0.5S.",
            {
                k.RESTART_STRATEGY: "failure-rate",
                k.RATE_MAX_FAILURES: "3",
                k.RATE_INTERVAL: "60000 ms",
                k.RATE_DELAY: "500 ms",
            },
        ),
        (
            "Restart with exponential delay: starting at PT1S, increasing by 1,500000, with "
            "maximum PT1M30S. Delay resets after PT1H with jitter 0.100000",
            {
                k.RESTART_STRATEGY: "exponential-delay",
                k.EXP_INITIAL: "1000 ms",
                k.EXP_MULTIPLIER: "1.5",
                k.EXP_MAX: "90000 ms",
                k.EXP_RESET: "3600000 ms",
                k.EXP_JITTER: "0.1",
            },
        ),
    ],
)
def test_every_description_flink_writes_is_read(description: str, expected: dict[str, str]) -> None:
    keys = tr.restart_strategy(description)
    assert keys == expected
    resolve(keys)  # the core takes every one of them


def test_a_duration_that_is_not_javas_is_malformed() -> None:
    with pytest.raises(tr.MalformedAnswerError, match=r"java\.time\.Duration"):
        tr.restart_strategy("Restart with fixed delay (1 s). #3 restart attempts.") or tr.iso_ms(
            "1 s"
        )


def test_task_managers_with_their_slot_profile() -> None:
    views = tr.task_managers(answer("taskmanagers.json"))
    assert [v.id for v in views] == ["tm-1", "tm-2", "tm-3"]
    assert {v.slots for v in views} == {1}
    assert views[0].profile == Profile(1.0, 316, 0, 32, 32)


def test_a_task_manager_of_two_slots_splits_its_resources() -> None:
    tm = {**answer("taskmanagers.json")["taskmanagers"][0], "slotsNumber": 2}
    (view,) = tr.task_managers({"taskmanagers": [tm]})
    assert view.profile == Profile(0.5, 158, 0, 16, 16)


def test_requirements_sorted_by_vertex() -> None:
    assert tr.requirements(answer("resource-requirements.json")) == (
        Requirement("90bea66de1c231edf33913ecd54406c1", 1, 4),
        Requirement("cbc357ccb763df2852fee8c4fc7d55f2", 1, 4),
    )


@pytest.mark.parametrize(
    ("call", "bad", "where"),
    [
        (tr.task_managers, {"taskmanagers": [{"id": "tm-1", "slotsNumber": "1"}]}, "slotsNumber"),
        (tr.task_managers, [], "expected an object"),
        (tr.requirements, {"v": {"parallelism": {"lowerBound": True}}}, "lowerBound"),
        (tr.scheduler_settings, {"executingCooldownTimeoutInMillis": "1 s"}, "Cooldown"),
        (tr.checkpoint_interval, {"interval": None}, "interval"),
    ],
)
def test_a_wrong_shape_names_the_field(call: Any, bad: Any, where: str) -> None:
    with pytest.raises(tr.MalformedAnswerError, match=where):
        call(bad)


def test_checkpointing_off_is_none() -> None:
    assert tr.checkpoint_interval(None) is None
    assert tr.checkpoint_interval({"interval": 2**63 - 1}) is None
    assert tr.checkpoint_interval({"interval": 10_000, "mode": "exactly_once"}) == 10_000


def test_checkpoints_that_ended_oldest_first() -> None:
    ended = tr.checkpoints(answer("checkpoints.json"))  # captured: three completed
    assert [(cid, done) for cid, done, _ in ended] == [(1238, True), (1239, True), (1240, True)]
    assert all(at > 0 for _, _, at in ended)
    failed = {"id": 7, "status": "FAILED", "failure_timestamp": 5, "trigger_timestamp": 1}
    running = {"id": 8, "status": "IN_PROGRESS", "trigger_timestamp": 6}
    assert tr.checkpoints({"history": [running, failed]}) == [(7, False, 5)]
    assert tr.min_pause(answer("checkpoints-config.json")) == {k.MIN_PAUSE: "0 ms"}
