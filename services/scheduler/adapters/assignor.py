"""A partition assignment that never drops a topic the worker declared.

Faust's `PartitionAssignor` sizes each subscribed topic from the group leader's cluster
metadata and leaves out, with the warning "Ignoring missing topic", any topic that
metadata does not list. Right after a broker restart it may not list them yet (a
topic's leader unknown for a moment), and the assignment then gives the group none of
`job-events`' partitions. aiokafka's leader would rebalance when the next metadata
lists them, but only a leader that performed the assignment watches for that: a worker
killed before it happened comes back as the same static member (`group.instance.id`),
the coordinator hands it the cached, empty assignment without a rebalance (KIP-345),
and aiokafka 0.14 does not make it the leader again (KIP-814's skip-assignment), so
nothing ever rebalances. The worker then runs, healthy by every sign, folding nothing
(seen in the chaos test, 2026-12-05: the scheduler stuck with the log growing).

`DeclaredPartitionAssignor` sizes a topic the metadata does not list by the partition
count the app declared for it (`job-events`, the tables' changelogs, Faust's leader
topic: each is created with that count before the worker starts), so the assignment is
the one the full metadata would give. A topic whose metadata is there is sized by it,
as before. Faust's own assignment does everything else.
"""

from __future__ import annotations

import logging
from typing import Any

from faust.assignor import PartitionAssignor

log = logging.getLogger("scalefold.scheduler")


def declared_partitions(channels: Any) -> dict[str, int]:
    """Each topic name's partition count, from the channels that declare one."""
    return {
        name: channel.partitions
        for channel in channels
        if getattr(channel, "partitions", None)
        for name in getattr(channel, "topics", ())
    }


class KnownPartitions:
    """Cluster metadata in which a topic it lacks has its declared partitions."""

    def __init__(self, cluster: Any, declared: dict[str, int]) -> None:
        self.cluster = cluster
        self.declared = declared

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        known = self.cluster.partitions_for_topic(topic)
        if known or topic not in self.declared:
            return known  # type: ignore[no-any-return]
        count = self.declared[topic]
        log.info(  # also a topic just created, at a fresh start: not a fault
            "topic %s is missing from the cluster metadata of this assignment: "
            "assigning the %d partitions it was created with",
            topic,
            count,
        )
        return set(range(count))

    def __getattr__(self, name: str) -> Any:
        return getattr(self.cluster, name)


class DeclaredPartitionAssignor(PartitionAssignor):
    """Faust's assignor, sizing a topic missing from the metadata by its declaration."""

    def assign(self, cluster: Any, member_metadata: Any) -> Any:
        declared = declared_partitions(self.app.topics)  # the worker's subscribed channels
        return super().assign(KnownPartitions(cluster, declared), member_metadata)
