"""The cap on the TaskManagers the actuator starts on a local Flink cluster. Pure.

A local Flink cluster's TaskManagers are JVMs on the actuator's own machine (a 700 MB
process each, and a share of its cores while they start): a job that wants 16 slots had
the actuator start 16 of them on two cores (load 36, the job CREATED for minutes).
`--flink-max-taskmanagers` caps the TaskManagers running when a PROVISION starts more,
as a Kubernetes ResourceQuota caps a namespace's pods: a provision starts only what fits
under the cap, and one with no room left is REJECTED with the reason. Every running
TaskManager of the cluster counts, also those started by hand (`scalefold flink
taskmanager add`, `local up --flink-taskmanagers`); those are never refused (the cap
binds the actuator, not the operator), so more than the cap may run.
"""

from __future__ import annotations

DEFAULT_LOCAL_MAX = 5
"""A 2-core machine: `scalefold demo --flink`'s job (4 slots) fits with a spare for the
TaskManager the demo kills (with 4, the job ran on 3 until a provision came, 110 s at
load 25), and four JVMs started at once registered in 14-19 s at load 10-25."""
FLAG = "--flink-max-taskmanagers"


def capped_count(asked: int, running: int, cap: int | None) -> int:
    """How many of `asked` new TaskManagers a provision starts: all without a cap, else
    as many as fit beside the `running` ones (none when they fill it or exceed it)."""
    if cap is None:
        return max(0, asked)
    return max(0, min(asked, cap - running))


def no_room(cluster: str, asked: int, running: int, cap: int) -> str:
    """A REJECTED provision's reason: the cap, and the flags that set it."""
    return (
        f"started 0 of {asked} TaskManager(s) asked: {running} run on Flink cluster "
        f"{cluster}, its cap is {cap} (the actuator's {FLAG} {cluster}={cap}; "
        f"`scalefold local up {FLAG} N`)"
    )


def applied(
    asked: int, started: int, *, per: int, waited: float, running: int, cap: int | None
) -> str:
    """An applied provision in one line: how many started of those asked, and the cap
    when it held some back."""
    each = f"{per} slot(s) each, registered in {waited:.0f} s"
    if cap is None or started >= asked:
        return f"{started} TaskManager(s) with {each}"
    return (
        f"started {started} of {asked} TaskManager(s) asked, {each}: cap {cap} ({FLAG}), "
        f"{running} ran before"
    )
