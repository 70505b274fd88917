"""Where each sink of an earlier scalefold's queries left off, and where a query starts.

**Carrying on from the per-table queries of an earlier scalefold.** Each of their
checkpoints (`checkpoints/<table>`, `checkpoints/dead_letters`) says up to which Kafka
offsets its table holds the topic. On the first start of the one `tables` query (no
`checkpoints/tables` yet) those positions are read once into
`checkpoints/tables.resume.json`; the query then reads the topic from its beginning and
each table skips the records it held already (`not_before`), so nothing is lost or
written twice. A later start, or a batch run again, reads the same file.

**Where a new query starts.** A query with no checkpoint yet starts where another query
of the same topic has committed (`committed_positions`): the latest queries start where
the `tables` queries of an earlier scalefold (which MERGEd the latest table in the same
batch) left off, the planner where the latest queries did (its state is read from their
tables: planning.py). Partitions neither knows start from the earliest offset.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from services.history.paths import Layout
from services.history.sinklog import wrote_batch
from services.history.tables import TABLES
from services.history.upsert import query_id

if TYPE_CHECKING:
    from pyspark.sql import Column

log = logging.getLogger(__name__)

CHECKPOINT = "tables"
"""`checkpoints/tables`: the rescales' `tables` query's checkpoint (sources.RESCALES)."""
DEAD_LETTERS = "dead_letters"
"""The dead letters' name among the sinks (and their old query's checkpoint)."""
SINKS = (*TABLES, DEAD_LETTERS)
Ends = dict[str, dict[int, int]]
"""Per sink, per Kafka partition: the first offset the sink does not hold yet."""
Positions = dict[str, dict[int, int]]
"""Per topic, per partition: the next offset to read."""
EARLIEST = -2
"""Spark's Kafka source's code for a partition's earliest offset in `startingOffsets`."""


def not_before(ends: dict[int, int]) -> Column:
    """Kafka source rows at or after `ends[partition]` (every row of another partition)."""
    from pyspark.sql import functions as F

    pairs = [F.lit(x) for partition, offset in sorted(ends.items()) for x in (partition, offset)]
    first = F.element_at(F.create_map(*pairs), F.col("partition"))
    return F.col("offset") >= F.coalesce(first, F.lit(0))


def resume_points(layout: Layout) -> Ends:
    """What each sink of the per-table queries held, read once and then kept (module doc)."""
    kept = layout.resume_file
    if kept.exists():
        saved = json.loads(kept.read_text(encoding="utf-8"))
        return {sink: {int(p): o for p, o in ends.items()} for sink, ends in saved.items()}
    if (layout.checkpoint(CHECKPOINT) / "metadata").exists():
        return {}  # started before, on a directory no per-table query wrote
    ends: Ends = {}
    for sink in SINKS:
        end = held(layout.checkpoint(sink), _holds(layout, sink))
        if end is not None:
            ends[sink] = end
    if ends:
        kept.parent.mkdir(parents=True, exist_ok=True)
        partial = kept.with_suffix(".tmp")
        partial.write_text(json.dumps(ends, sort_keys=True), encoding="utf-8")
        os.replace(partial, kept)
        log.info("carrying on from the per-table queries' checkpoints: %s", ends)
    return ends


def held(checkpoint: Path, holds: Callable[[int], bool]) -> dict[int, int] | None:
    """Up to which offsets an old query's sink holds the topic; None if it never ran.

    The last batch with a commit marker is in the sink; a batch planned after it
    (offsets written, no commit marker: the query stopped in it) is too when
    `holds(batch)`, the sink's own record of it, says so."""
    planned, committed = batches(checkpoint / "offsets"), batches(checkpoint / "commits")
    if not planned:
        return None
    last = max(planned)
    if last in committed or holds(last):
        return _offsets(checkpoint / "offsets" / str(last))
    done = [b for b in committed if b < last]
    return _offsets(checkpoint / "offsets" / str(max(done))) if done else {}


def _holds(layout: Layout, sink: str) -> Callable[[int], bool]:
    """Whether an old query's batch reached its sink: Delta's idempotent-write version of
    the query (its streaming sink uses the query id, the rescales writer its own id), or
    the Parquet file sink's log of an earlier scalefold still."""
    if sink == DEAD_LETTERS:
        return lambda _: False  # sent again
    table, checkpoint = layout.table(sink), layout.checkpoint(sink)

    def holds(batch: int) -> bool:
        sink_log = table / "_spark_metadata"
        if (sink_log / str(batch)).exists() or (sink_log / f"{batch}.compact").exists():
            return True
        if not (checkpoint / "metadata").exists():
            return False
        query = query_id(checkpoint)
        return wrote_batch(table, batch, query, f"history-{sink}-{query}")

    return holds


def batches(directory: Path) -> set[int]:
    """The batch ids of a checkpoint's log directory (`offsets`, `commits`); none if absent."""
    try:
        return {int(p.name) for p in directory.iterdir() if p.name.isdigit()}
    except OSError:
        return set()


def _offsets(path: Path) -> dict[int, int]:
    """The Kafka source's end offsets in a checkpoint's offset log entry (its one topic)."""
    return {p: o for topic in _topic_offsets(path).values() for p, o in topic.items()}


def _topic_offsets(path: Path) -> Positions:
    """Per topic, the Kafka source's end offsets in a checkpoint's offset log entry."""
    lines = path.read_text(encoding="utf-8").splitlines()
    sources = [json.loads(line) for line in lines[2:] if line.strip()]
    return {
        topic: {int(p): int(o) for p, o in offsets.items()}
        for source in sources
        for topic, offsets in source.items()
    }


def committed_positions(checkpoint: Path) -> Positions:
    """Per topic, up to where the query of `checkpoint` committed (empty: no commit yet)."""
    committed = batches(checkpoint / "commits")
    if not committed:
        return {}
    return _topic_offsets(checkpoint / "offsets" / str(max(committed)))


def starting_offsets(partitions: Mapping[str, Iterable[int]], *known: Positions) -> str:
    """Spark's `startingOffsets` for `partitions` (topic -> its partitions): each partition
    at the first of `known` that has it, else its earliest offset. Spark wants every
    partition the broker has named; a topic with none (not created yet) is left out, and
    read from its start when it comes (Spark's rule for partitions found later)."""
    chosen = {
        topic: {
            str(p): next((k[topic][p] for k in known if p in k.get(topic, {})), EARLIEST)
            for p in sorted(numbers)
        }
        for topic, numbers in partitions.items()
    }
    chosen = {topic: offsets for topic, offsets in chosen.items() if offsets}
    return json.dumps(chosen, sort_keys=True) if chosen else "earliest"
