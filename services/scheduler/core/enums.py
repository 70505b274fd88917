"""The scheduler core's enumerations: the states, phases and statuses a job's state
holds, how a rescale started and ended, and the kinds of the effects.

This module is compiled with the core's logic (native.py), so that the compiled code
reads a member as a constant; an enum class imported from an interpreted module costs
a lookup through Python 3.11's `EnumType.__getattr__` hook on every use.
msgspec encodes a member by its value, whichever module defines the class."""

from __future__ import annotations

from enum import StrEnum
from typing import Final


class StateName(StrEnum):
    """Flink's scheduler states, by class name."""

    CREATED = "Created"
    WAITING_FOR_RESOURCES = "WaitingForResources"
    CREATING_EXECUTION_GRAPH = "CreatingExecutionGraph"
    EXECUTING = "Executing"
    RESTARTING = "Restarting"
    STOP_WITH_SAVEPOINT = "StopWithSavepoint"
    CANCELING = "Canceling"
    FAILING = "Failing"
    FINISHED = "Finished"


class Phase(StrEnum):
    """The phases of DefaultStateTransitionManager (FLIP-461)."""

    COOLDOWN = "Cooldown"
    IDLING = "Idling"
    STABILIZING = "Stabilizing"
    STABILIZED = "Stabilized"
    TRANSITIONING = "Transitioning"


class JobStatus(StrEnum):
    """Flink's JobStatus, in Flink's order; a job ends FINISHED, FAILED, CANCELED or SUSPENDED."""

    INITIALIZING = "INITIALIZING"
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    FAILING = "FAILING"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELED = "CANCELED"
    FINISHED = "FINISHED"
    RESTARTING = "RESTARTING"
    SUSPENDED = "SUSPENDED"
    RECONCILING = "RECONCILING"

    @property
    def ends_the_job(self) -> bool:
        """Globally terminal (FINISHED, FAILED, CANCELED) or locally terminal (SUSPENDED)."""
        return self in _TERMINAL


_TERMINAL: Final = frozenset(
    {JobStatus.FINISHED, JobStatus.FAILED, JobStatus.CANCELED, JobStatus.SUSPENDED}
)


class TriggerCause(StrEnum):
    INITIAL_SCHEDULE = "INITIAL_SCHEDULE"
    UPDATE_REQUIREMENT = "UPDATE_REQUIREMENT"
    NEW_RESOURCE_AVAILABLE = "NEW_RESOURCE_AVAILABLE"
    RECOVERABLE_FAILOVER = "RECOVERABLE_FAILOVER"


class TerminalState(StrEnum):
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    IGNORED = "IGNORED"


class TerminatedReason(StrEnum):
    SUCCEEDED = "SUCCEEDED"
    EXCEPTION_OCCURRED = "EXCEPTION_OCCURRED"
    RESOURCE_REQUIREMENTS_UPDATED = "RESOURCE_REQUIREMENTS_UPDATED"
    NO_RESOURCES_OR_PARALLELISMS_CHANGE = "NO_RESOURCES_OR_PARALLELISMS_CHANGE"
    JOB_FINISHED = "JOB_FINISHED"
    JOB_FAILED = "JOB_FAILED"
    JOB_CANCELED = "JOB_CANCELED"
    JOB_FAILOVER_RESTARTING = "JOB_FAILOVER_RESTARTING"  # defined by Flink, never set


class DecisionKind(StrEnum):
    STATE_TRANSITION = "STATE_TRANSITION"
    PHASE_TRANSITION = "PHASE_TRANSITION"
    CHANGE_RECORDED = "CHANGE_RECORDED"
    CHANGE_IGNORED = "CHANGE_IGNORED"
    TRIGGER_IGNORED = "TRIGGER_IGNORED"
    RESCALE_TRIGGERED = "RESCALE_TRIGGERED"
    RESTART_DECIDED = "RESTART_DECIDED"
    ACTIVE_CHECKPOINT = "ACTIVE_CHECKPOINT"  # FLINK-36753: asked, deferred, skipped, dropped
    TIMEOUT = "TIMEOUT"  # a wait ended by its timeout, and what happens now
    REQUIREMENTS_UPDATED = "REQUIREMENTS_UPDATED"
    REQUIREMENTS_UNCHANGED = "REQUIREMENTS_UNCHANGED"
    CONFIGURATION_UPDATED = "CONFIGURATION_UPDATED"
    RESOURCES_CHANGED = "RESOURCES_CHANGED"
    EVENT_IGNORED = "EVENT_IGNORED"
    CLOCK_CLAMPED = "CLOCK_CLAMPED"
    JOB_RELEASED = "JOB_RELEASED"  # a finished job's state let go (jobstore.expiration-time)


class RequestKind(StrEnum):
    """What the scheduler asks of the runtime (a real cluster or the embedded one)."""

    DECLARE_RESOURCES = "DECLARE_RESOURCES"
    CREATE_EXECUTION_GRAPH = "CREATE_EXECUTION_GRAPH"
    DEPLOY = "DEPLOY"
    CANCEL_EXECUTION_GRAPH = "CANCEL_EXECUTION_GRAPH"
    STOP_WITH_SAVEPOINT = "STOP_WITH_SAVEPOINT"
    TRIGGER_CHECKPOINT = "TRIGGER_CHECKPOINT"


class RejectionKind(StrEnum):
    """Why an input was dead-lettered (the DeadLetter's errorClass)."""

    UNKNOWN_JOB = "UnknownJob"
    INVALID_EVENT = "InvalidEvent"
