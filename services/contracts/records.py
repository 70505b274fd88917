"""The Avro full names of every record scalefold reads or writes."""

from __future__ import annotations

TASK_MANAGER_REGISTERED = "scalefold.events.TaskManagerRegistered"
TASK_MANAGER_LOST = "scalefold.events.TaskManagerLost"
JOB_SUBMITTED = "scalefold.events.JobSubmitted"
JOB_LIFECYCLE_EVENT = "scalefold.events.JobLifecycleEvent"
RESOURCE_REQUIREMENTS_UPDATED = "scalefold.events.ResourceRequirementsUpdated"
JOB_CONFIGURATION_UPDATED = "scalefold.events.JobConfigurationUpdated"
TIMER_FIRED = "scalefold.events.TimerFired"

INPUT_EVENTS = frozenset(
    {
        TASK_MANAGER_REGISTERED,
        TASK_MANAGER_LOST,
        JOB_SUBMITTED,
        JOB_LIFECYCLE_EVENT,
        RESOURCE_REQUIREMENTS_UPDATED,
        JOB_CONFIGURATION_UPDATED,
        TIMER_FIRED,
    }
)
"""Everything a job's scheduler folds; all of it travels on the job-events topic."""

RESCALE = "scalefold.rescale.Rescale"
SCHEDULER_DECISIONS = "scalefold.decisions.SchedulerDecisions"
SCALING_COMMAND = "scalefold.commands.ScalingCommand"
COMMAND_OUTCOME = "scalefold.commands.CommandOutcome"
DEAD_LETTER = "scalefold.deadletter.DeadLetter"
FLINK_RESCALE = "scalefold.flink.FlinkRescale"
"""A rescale a real Flink recorded, forwarded by the Flink bridge (services/bridge)."""
FLINK_BRIDGE_OFFSET = "scalefold.flink.FlinkBridgeOffset"
"""The Flink bridge's source offset of one Flink job (what it has forwarded of it)."""
ACTUATOR_SNAPSHOT = "scalefold.actuator.ActuatorSnapshot"
"""The actuator's embedded cluster as a rebuild from the log up to some offsets computes it."""
JOB_SNAPSHOT = "scalefold.scheduler.JobSnapshot"
"""One job's scheduler state at a job-events offset: where a fold of the job starts once
its earlier inputs have left job-events."""
FLINK_WORKLOAD_SIGNAL = "scalefold.flink.FlinkWorkloadSignal"
"""One sample of a running Flink job's per-vertex workload metrics, from the Flink bridge."""
FLINK_KEYED = frozenset({FLINK_RESCALE, FLINK_BRIDGE_OFFSET, FLINK_WORKLOAD_SIGNAL})
"""The records of real Flink jobs: keyed `<cluster>.<jobId>` (topics.flink_job_key)."""


def short_name(full_name: str) -> str:
    """`scalefold.events.JobSubmitted` -> `JobSubmitted`."""
    return full_name.rsplit(".", 1)[-1]


def full_input_name(short: str) -> str:
    """The full name of an input event given its simple name; KeyError if unknown."""
    by_short = {short_name(n): n for n in INPUT_EVENTS}
    return by_short[short]
