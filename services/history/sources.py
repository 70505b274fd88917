"""The streams the history keeps, each declared once.

A `Source` is one Kafka topic of one Avro record and everything the history makes of
it: how a record is decoded and keyed (decode.py), the raw table of every received
revision (a record's arrays stay arrays in its row), what identifies one rescale (`keys`)
and the table of each rescale's latest revision MERGEd by them, the views over its
tables, the checkpoints of its two queries, and the columns the planner reads of it.
One writer (writers.py) and one query starter (queries.py) serve every source; the
planner (planning.py) consumes them like any other query. A new source is one more
declaration here.

Each source has two queries (queries.py), so that the freshest view never waits for
the bulk of the writes:
- **latest**: decode, MERGE the batch's latest revisions into the latest table (what
  `history summary`, the REST API, the SQL views and the planner's restart read);
  one Delta commit a batch, on a short trigger;
- **tables**: decode once, append the raw table, produce the dead letters: two
  commits a batch, on a longer trigger, so they come fewer and larger (checkpoints
  keep their names of before: an existing history carries on where it was).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from services.contracts import SchemaRegistry, records
from services.contracts.topics import Topics
from services.history import flink_tables, flink_views, pytables, signal_tables, tables, views
from services.history.decode import RescaleSchemas
from services.history.jobview import PLANNER_COLUMNS, Rescale
from services.history.pytables import Message, Row

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

Transform = Callable[["DataFrame"], "DataFrame"]
Views = Callable[
    [Mapping[str, "DataFrame"], Mapping[str, "DataFrame"], RescaleSchemas], dict[str, "DataFrame"]
]
"""(this source's tables by name, the views of the sources declared before it, its
schemas) -> its views by name."""


@dataclass(frozen=True)
class Source:
    """One stream the history keeps (see the module doc)."""

    name: str
    record: str
    """The Avro record on the topic (its versions decode it: decode.RescaleSchemas)."""
    topic: Callable[[Topics], str]
    raw_table: str
    transform: Transform
    """Decoded, valid records -> rows of the raw table (one per received revision)."""
    legacy: tuple[str, ...]
    """Tables an earlier scalefold appended beside the raw one and this one no longer
    writes: the views read them for the rows of then (tables.LEGACY_TABLES)."""
    latest_table: str
    keys: tuple[str, ...]
    """What identifies one rescale: the latest table's MERGE keys."""
    views: Views
    view_names: tuple[str, ...]
    row: Callable[[Message], Row]
    """`transform` in Python, one decoded message's raw-table row (pytables.py): what the
    latest writer MERGEs and the planner folds."""
    planner: Callable[[Mapping[str, Any]], Rescale] | None
    """A raw-table row -> what the planner reads of it (jobview.PLANNER_COLUMNS); None:
    the planner does not read this source (`PLANNED`)."""
    tables_checkpoint: str
    latest_checkpoint: str

    def schemas(self, registry: SchemaRegistry) -> RescaleSchemas:
        """The versions of its record, keyed as its topic is."""
        return RescaleSchemas.of(registry, self.record)

    @property
    def appended(self) -> tuple[str, ...]:
        """The tables its tables query appends to: the raw one (one write a batch)."""
        return (self.raw_table,)

    @property
    def all_tables(self) -> tuple[str, ...]:
        return (*self.appended, self.latest_table)


def _flink_planner(row: Mapping[str, Any]) -> Rescale:
    """Flink's row under the job key scalefold predicts the job by; what Flink's REST API
    does not show (available slots, the scheduler's settings) is None."""
    renamed = {"job_id": row["job_key"], "updated_at_ms": row["observed_at_ms"]}
    return Rescale.from_row({**dict.fromkeys(PLANNER_COLUMNS), **row, **renamed})


RESCALES = Source(
    name="rescales",
    record=records.RESCALE,
    topic=lambda topics: topics.rescales,
    raw_table="rescales",
    transform=tables.rescales,
    legacy=tables.LEGACY_TABLES,
    latest_table=tables.LATEST_TABLE,
    keys=("rescale_uuid",),
    views=views.scalefold_views,
    view_names=views.SCALEFOLD_VIEWS,
    row=pytables.rescale_row,
    planner=Rescale.from_row,
    tables_checkpoint="tables",
    latest_checkpoint="latest",
)
"""The rescales scalefold's scheduler recorded (FLIP-495 records, `rescale.v*`)."""

FLINK_RESCALES = Source(
    name="flink_rescales",
    record=records.FLINK_RESCALE,
    topic=lambda topics: topics.flink_rescales,
    raw_table=flink_tables.RAW_TABLE,
    transform=flink_tables.flink_rescales,
    legacy=(),
    latest_table=flink_tables.LATEST_TABLE,
    keys=flink_tables.KEYS,
    views=flink_views.flink_views,
    view_names=flink_views.VIEWS,
    row=pytables.flink_rescale_row,
    planner=_flink_planner,
    tables_checkpoint="flink_tables",
    latest_checkpoint="flink_latest",
)
"""The rescales real Flink clusters recorded, as the bridge forwards them (their children
are arrays in each row, as scalefold's are: flink_views.py explodes them)."""

FLINK_SIGNALS = Source(
    name="flink_signals",
    record=records.FLINK_WORKLOAD_SIGNAL,
    topic=lambda topics: topics.flink_signals,
    raw_table=signal_tables.RAW_TABLE,
    transform=signal_tables.flink_signals,
    legacy=(),
    latest_table=signal_tables.LATEST_TABLE,
    keys=signal_tables.KEYS,
    views=signal_tables.signal_views,
    view_names=signal_tables.VIEWS,
    row=pytables.flink_signal_row,
    planner=None,
    tables_checkpoint="flink_signals_tables",
    latest_checkpoint="flink_signals_latest",
)
"""Real Flink jobs' workload samples, as the bridge sends them (issue 50: the inputs of
the parallelism decision; signal_tables.py)."""

SOURCES = (RESCALES, FLINK_RESCALES, FLINK_SIGNALS)
"""In dependency order: a source's views may use those of the sources before it."""
PLANNED = tuple(source for source in SOURCES if source.planner is not None)
"""The sources the planner folds (planning.py)."""


def by_topic(topics: Topics) -> dict[str, Source]:
    return {source.topic(topics): source for source in SOURCES}
