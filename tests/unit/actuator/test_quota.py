"""The cap on a local Flink cluster's TaskManagers: the count a provision starts, its
words, and `--flink-max-taskmanagers` as the actuator and `local up` read it."""

from __future__ import annotations

import argparse

import pytest

from services.actuator import flinkargs, quota
from services.localstack import cli as localcli


def test_a_provision_starts_only_what_fits_under_the_cap() -> None:
    assert quota.capped_count(15, running=1, cap=4) == 3
    assert quota.capped_count(2, running=1, cap=4) == 2
    assert quota.capped_count(3, running=4, cap=4) == 0
    # hand-started TaskManagers beyond the cap leave no room, never a negative count
    assert quota.capped_count(3, running=6, cap=4) == 0
    assert quota.capped_count(15, running=1, cap=None) == 15
    assert quota.capped_count(5, running=0, cap=0) == 0


def test_the_outcome_says_what_started_of_what_was_asked_and_the_cap_in_one_line() -> None:
    held_back = quota.applied(15, 3, per=1, waited=21.4, running=1, cap=4)
    assert held_back == (
        "started 3 of 15 TaskManager(s) asked, 1 slot(s) each, registered in 21 s: "
        "cap 4 (--flink-max-taskmanagers), 1 ran before"
    )
    assert quota.applied(2, 2, per=1, waited=9, running=1, cap=4) == (
        "2 TaskManager(s) with 1 slot(s) each, registered in 9 s"
    )
    refused = quota.no_room("local", asked=12, running=4, cap=4)
    assert refused.startswith("started 0 of 12 TaskManager(s) asked: 4 run on Flink cluster local")
    assert "--flink-max-taskmanagers local=4" in refused and "local up" in refused
    assert "\n" not in held_back + refused


def parsed(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    flinkargs.add_arguments(parser)
    return parser.parse_args(list(argv))


def test_the_cap_is_per_cluster_then_for_every_cluster_then_the_default() -> None:
    args = parsed("--flink-max-taskmanagers", "2", "--flink-max-taskmanagers", "b=7")
    assert args.flink_max_taskmanagers == [(None, 2), ("b", 7)]
    assert flinkargs.max_for("b", args.flink_max_taskmanagers) == 7
    assert flinkargs.max_for("a", args.flink_max_taskmanagers) == 2
    assert flinkargs.max_for("a", []) == quota.DEFAULT_LOCAL_MAX
    for bad in ("-1", "local=", "lo cal=3", "four"):
        with pytest.raises(argparse.ArgumentTypeError):
            flinkargs.max_arg(bad)


def test_local_up_and_the_actuator_share_one_default() -> None:
    """The local stack cannot import the actuator's constant (the actuator imports it)."""
    assert localcli.FLINK_MAX_TASKMANAGERS == quota.DEFAULT_LOCAL_MAX == 5
