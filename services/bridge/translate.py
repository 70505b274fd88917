"""Flink's REST answers, read into the values scalefold's input events carry.

Pure: each function takes one answer's parsed JSON and returns values, or raises
`MalformedAnswerError` saying which field was not what Flink 2.3 sends. Flink's own names and
units are kept (durations as "<n> ms", the keys of `services.contracts.jobconfig`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from services.contracts import jobconfig as k
from services.contracts.events import Profile, Requirement

CHECKPOINTING_OFF = 2**62
"""An interval at or above this (Flink shows Long.MAX_VALUE) means checkpointing is off."""


class MalformedAnswerError(ValueError):
    """An answer that is JSON but not the shape Flink 2.3 gives; the message says where."""


def field(data: Any, name: str, kind: type | tuple[type, ...], where: str) -> Any:
    """`data[name]`, checked to be of `kind` (bool is not an int here)."""
    if not isinstance(data, Mapping):
        raise MalformedAnswerError(f"{where}: expected an object, got {type(data).__name__}")
    value = data.get(name)
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        raise MalformedAnswerError(f"{where}.{name}: expected {kind}, got a boolean")
    if not isinstance(value, kind):
        raise MalformedAnswerError(f"{where}.{name}: expected {_kinds(kind)}, got {value!r:.80}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join("null" if t is type(None) else t.__name__ for t in kinds)


# -- /jobs/:jid/rescales/config: the adaptive scheduler's settings ------------------------

_SETTINGS_MS = (
    ("submissionResourceWaitTimeoutInMillis", k.WAIT_TIMEOUT),
    ("submissionResourceStabilizationTimeoutInMillis", k.SUBMISSION_STABILIZATION),
    ("executingCooldownTimeoutInMillis", k.COOLDOWN),
    ("executingResourceStabilizationTimeoutInMillis", k.EXECUTING_STABILIZATION),
    ("maximumDelayForTriggeringRescaleInMillis", k.MAX_DELAY),
)


def scheduler_settings(config: Any) -> dict[str, str]:
    """The job's adaptive-scheduler settings as Flink keys (durations in ms)."""
    where = "rescales/config"
    entries: dict[str, str] = {}
    for name, key in _SETTINGS_MS:
        value = field(config, name, (int, type(None)), where)
        if value is not None:
            entries[key] = f"{value} ms"
    failures = field(config, "rescaleOnFailedCheckpointCount", (int, type(None)), where)
    if failures is not None:
        entries[k.MAX_CHECKPOINT_FAILURES] = str(failures)
    history = field(config, "rescaleHistoryMax", (int, type(None)), where)
    if history is not None:
        entries[k.HISTORY_SIZE] = str(history)
    mode = field(config, "schedulerExecutionMode", (str, type(None)), where)
    if mode is not None and mode.upper() == "REACTIVE":
        entries[k.SCHEDULER_MODE] = "REACTIVE"
    return entries


# -- /config: the JobManager's version --------------------------------------------------

ACTIVE_CHECKPOINT_SINCE = (2, 4)
"""The first Flink release whose adaptive scheduler asks for a checkpoint when a rescale is
desired (FLINK-36753, merged into master after release-2.3 was cut). The core does by
default, as Flink's master does; a job observed on an older Flink is predicted without."""


def triggers_active_checkpoints(version: str) -> bool:
    """Whether Flink `version` ("2.3.0", "2.4-SNAPSHOT") has the active checkpoint trigger;
    a version that does not parse is taken to be a newer one."""
    numbers = re.findall(r"\d+", version)[:2]
    if len(numbers) < 2:
        return True
    return (int(numbers[0]), int(numbers[1])) >= ACTIVE_CHECKPOINT_SINCE


# -- /jobs/:jid/config: the restart strategy, as RestartStrategyDescriptionUtils words it --

_ISO = re.compile(r"^PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+(?:\.\d+)?)S)?$")
_FIXED = re.compile(r"^Restart with fixed delay \((\S+)\)\. #(\d+) restart attempts\.$")
_RATE = re.compile(
    r"^Failure rate restart with maximum of (\d+) failures within interval (\S+) "
    r"and fixed delay (\S+)\.$"
)
_EXPONENTIAL = re.compile(
    r"^Restart with exponential delay: starting at (\S+), increasing by ([\d.,]+), "
    r"with maximum (\S+)\. Delay resets after (\S+) with jitter ([\d.,]+)"
)


def iso_ms(text: str) -> int:
    """java.time.Duration.toString (PT1S, PT1M30S, PT0.5S) in milliseconds."""
    match = _ISO.match(text)
    if match is None or text == "PT":
        raise MalformedAnswerError(f"restart strategy: {text!r} is not a java.time.Duration")
    hours, minutes, seconds = (match.group(i) or "0" for i in (1, 2, 3))
    return (int(hours) * 3600 + int(minutes) * 60) * 1000 + round(float(seconds) * 1000)


def _number(text: str) -> str:
    return str(float(text.replace(",", ".")))  # Java's %f follows the JobManager's locale


def restart_strategy(description: str) -> dict[str, str]:
    """The restart-strategy keys of a description; {} for "Cluster level default restart
    strategy" (Flink's default then applies, as it does in scalefold's core)."""
    if description == "Restart deactivated.":
        return {k.RESTART_STRATEGY: "none"}
    if fixed := _FIXED.match(description):
        return {
            k.RESTART_STRATEGY: "fixed-delay",
            k.FIXED_DELAY: f"{iso_ms(fixed.group(1))} ms",
            k.FIXED_ATTEMPTS: fixed.group(2),
        }
    if rate := _RATE.match(description):
        return {
            k.RESTART_STRATEGY: "failure-rate",
            k.RATE_MAX_FAILURES: rate.group(1),
            k.RATE_INTERVAL: f"{iso_ms(rate.group(2))} ms",
            k.RATE_DELAY: f"{iso_ms(rate.group(3))} ms",
        }
    if exp := _EXPONENTIAL.match(description):
        return {
            k.RESTART_STRATEGY: "exponential-delay",
            k.EXP_INITIAL: f"{iso_ms(exp.group(1))} ms",
            k.EXP_MULTIPLIER: _number(exp.group(2)),
            k.EXP_MAX: f"{iso_ms(exp.group(3))} ms",
            k.EXP_RESET: f"{iso_ms(exp.group(4))} ms",
            k.EXP_JITTER: _number(exp.group(5)),
        }
    return {}


def job_restart_strategy(job_config: Any) -> dict[str, str]:
    execution = field(job_config, "execution-config", dict, "config")
    return restart_strategy(field(execution, "restart-strategy", str, "config.execution-config"))


def cluster_restart_strategy(jobmanager_config: Any) -> dict[str, str]:
    """/jobmanager/config's `restart-strategy.*` entries (`[{key, value}]`): what a job
    whose own strategy REST shows as "Cluster level default restart strategy" restarts
    by. (Flink 2.3 shows a strategy a job sets in its own Configuration that way too: the
    bridge cannot see it.)"""
    entries = jobmanager_config if isinstance(jobmanager_config, list) else []
    return {
        e["key"]: e["value"]
        for e in entries
        if isinstance(e, Mapping)
        and isinstance(e.get("key"), str)
        and isinstance(e.get("value"), str)
        and e["key"].startswith("restart-strategy.")
    }


def checkpoint_interval(checkpoints_config: Any) -> int | None:
    """/jobs/:jid/checkpoints/config's interval in ms; None when checkpointing is off."""
    if checkpoints_config is None:  # Flink answers 404 for a job without checkpointing
        return None
    interval = field(checkpoints_config, "interval", int, "checkpoints/config")
    return interval if 0 < interval < CHECKPOINTING_OFF else None


def min_pause(checkpoints_config: Any) -> dict[str, str]:
    """`execution.checkpointing.min-pause` from /checkpoints/config, when it shows one."""
    if checkpoints_config is None:
        return {}
    pause = field(checkpoints_config, "min_pause", (int, type(None)), "checkpoints/config")
    return {} if pause is None else {k.MIN_PAUSE: f"{pause} ms"}


def checkpoints(answer: Any) -> list[tuple[int, bool, int]]:
    """/jobs/:jid/checkpoints' recent history as (id, completed?, when), oldest first;
    checkpoints still in progress are left out (they end in a later poll)."""
    history = field(answer, "history", list, "checkpoints")
    ended = []
    for i, entry in enumerate(history):
        where = f"checkpoints.history[{i}]"
        status = field(entry, "status", str, where)
        if status == "COMPLETED":
            ended.append((field(entry, "id", int, where), True, _ack(entry, where)))
        elif status == "FAILED":
            at = field(entry, "failure_timestamp", int, where)
            ended.append((field(entry, "id", int, where), False, at))
    return sorted(ended, key=lambda c: (c[2], c[0]))


def _ack(entry: Any, where: str) -> int:
    return int(field(entry, "latest_ack_timestamp", int, where))


# -- /taskmanagers -------------------------------------------------------------------------


@dataclass(frozen=True)
class TaskManagerView:
    """A TaskManager as /taskmanagers lists it."""

    id: str
    slots: int
    profile: Profile | None
    path: str | None = None  # its RPC address (pekko.tcp://flink@host:port/user/rpc/...)


def task_managers(answer: Any) -> tuple[TaskManagerView, ...]:
    """The listed TaskManagers, each slot's profile its total resource / its slots."""
    entries = field(answer, "taskmanagers", list, "taskmanagers")
    views = []
    for i, entry in enumerate(entries):
        where = f"taskmanagers[{i}]"
        slots = field(entry, "slotsNumber", int, where)
        total = entry.get("totalResource") if isinstance(entry, Mapping) else None
        path = entry.get("path") if isinstance(entry, Mapping) else None
        views.append(
            TaskManagerView(
                field(entry, "id", str, where),
                slots,
                _slot_profile(total, slots),
                path if isinstance(path, str) else None,
            )
        )
    return tuple(sorted(views, key=lambda v: v.id))


def _slot_profile(total: Any, slots: int) -> Profile | None:
    """ResourceProfile of one slot, the TaskManager's total divided evenly (Flink's default
    slot profile); None (UNKNOWN) when the answer shows no total."""
    if not isinstance(total, Mapping) or slots < 1:
        return None
    try:
        return Profile(
            float(total["cpuCores"]) / slots,
            int(total["taskHeapMemory"]) // slots,
            int(total["taskOffHeapMemory"]) // slots,
            int(total["managedMemory"]) // slots,
            int(total["networkMemory"]) // slots,
        )
    except (KeyError, TypeError, ValueError):
        raise MalformedAnswerError(
            f"taskmanagers: totalResource {dict(total)!r:.120} lacks a field"
        ) from None


# -- /jobs/:jid/resource-requirements ------------------------------------------------------


def requirements(answer: Any) -> tuple[Requirement, ...]:
    """Each vertex's parallelism bounds (FLIP-291), sorted by vertex id."""
    if not isinstance(answer, Mapping):
        raise MalformedAnswerError("resource-requirements: expected an object")
    result = []
    for vertex_id, entry in sorted(answer.items()):
        bounds = field(entry, "parallelism", dict, f"resource-requirements.{vertex_id}")
        where = f"resource-requirements.{vertex_id}.parallelism"
        result.append(
            Requirement(
                vertex_id,
                field(bounds, "lowerBound", int, where),
                field(bounds, "upperBound", int, where),
            )
        )
    return tuple(result)


def task_managers_hosting(answer: Any, where: str) -> frozenset[str]:
    """/jobs/:jid/vertices/:vid/taskmanagers: the TaskManagers the vertex's current
    execution attempts were assigned to (`taskmanager-id`; Flink 2.3's
    JobVertexTaskManagersHandler)."""
    listed = field(answer, "taskmanagers", list, where)
    return frozenset(field(tm, "taskmanager-id", str, f"{where}.taskmanagers[]") for tm in listed)
