"""A real Flink's rescales paired with scalefold's predictions of them. Pure DataFrame transforms.

The Flink bridge submits each job it observes on a real Flink to scalefold's
scheduler under `flink_job_key(cluster, jobId)` (`<cluster>.<jobId>`), and the
scheduler predicts its rescales in shadow mode. Both sides number a job's
rescales in order: the n-th rescale Flink recorded for job J (by
`start_timestamp_ms`, ties by `rescale_attempt_id`, then uuid) is paired with
the n-th rescale scalefold recorded for `<cluster>.<J>` (the same order). A full
outer join on (job, n): a rescale one side has and the other has not is a
pair too (`paired` = `flink_only` or `predicted_only`), and agrees in nothing.

Compared, per pair: the trigger cause, the terminal state, the terminated
reason, the pre- and post-rescale parallelism per vertex (Flink's vertex ids
on both sides), the post-rescale slots per slot-sharing group (by the group's
NAME, its id where it has none: the scheduler knows a group only as the bridge
named it), and the sequence of scheduler states. Each is a column on either
side (`flink_<field>`, `predicted_<field>`) and `<field>_agrees`; the
per-vertex and per-group values are arrays of `{key, value}` sorted by key.

A pair the observation cannot decide (its prediction depends on where in its window an
input fell: `flink_verdicts`, verdicts.py) is `ambiguous`, and `ambiguity` says which
input and which deadline; `judged` is false until the history service has judged it.

`flink_agreement` counts, per job and field and over all jobs, the *settled*
pairs (no side still in progress: an open rescale may yet agree; the prediction's
children all committed: `CHILD_FIELDS`) and those
that agree: `rate` = agreed / compared; then the same over the pairs the observation
decides (`decidable`, `decidable_agreed`, `decidable_rate`) and how many it does not
(`ambiguous`). The field `all_fields` is a pair that agrees in every field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

CONFORMANCE = "flink_conformance"
AGREEMENT = "flink_agreement"
FIELDS = (
    "trigger_cause",
    "terminal_state",
    "terminated_reason",
    "pre_parallelism",
    "post_parallelism",
    "slots",
    "scheduler_states",
)
ALL_FIELDS = "all_fields"
DURATIONS = "state_durations"
"""Each span's duration on either side (`flink_state_durations`, `predicted_...`): they
agree within the observation's resolution (`state_durations_agree`), which the history's
judge knows (verdicts.py); no other field needs it, so it is not among FIELDS."""
ORDER = ("start_timestamp_ms", "rescale_attempt_id", "rescale_uuid")
"""The order in which each side numbers a job's rescales."""
JOB = ("cluster", "flink_job_id", "job_key")
CHILD_FIELDS = ("post_parallelism", "slots", "scheduler_states")
"""The fields of a prediction read from its children; a terminated rescale has all three
(its vertices, their slot-sharing groups, the state it began in). They are arrays of its
row now, but a history written before 2026-12-04 had each in a child table of its own,
appended after the latest revision's commit: a prediction missing one of them is not
settled, its children are on their way."""
_ENTRIES = "array<struct<key:string,value:int>>"


def _entries(array: Column, key: str, value: str) -> Column:
    """`array`'s structs as `{key, value}` sorted by key: comparable (a map is not)."""
    from pyspark.sql import functions as F

    pairs = F.transform(array, lambda e: F.struct(e[key].alias("key"), e[value].alias("value")))
    return F.array_sort(pairs).cast(_ENTRIES)


def _group(e: Column) -> Column:
    from pyspark.sql import functions as F

    return F.coalesce(e["slot_sharing_group_name"], e["slot_sharing_group_id"])


def _flink_side(latest: DataFrame) -> DataFrame:
    """Flink's rescales (the `flink_rescales` view), in the compared columns."""
    from pyspark.sql import functions as F

    slots = F.transform(
        "slots", lambda s: F.struct(_group(s).alias("g"), s["post_rescale_slots"].alias("v"))
    )
    return latest.select(
        "cluster",
        F.col("job_id").alias("flink_job_id"),
        "job_key",
        *ORDER,
        "in_progress",
        "trigger_cause",
        "terminal_state",
        "terminated_reason",
        _entries(F.col("vertices"), "job_vertex_id", "pre_rescale_parallelism").alias(
            "pre_parallelism"
        ),
        _entries(F.col("vertices"), "job_vertex_id", "post_rescale_parallelism").alias(
            "post_parallelism"
        ),
        _entries(slots, "g", "v").alias("slots"),
        F.transform("scheduler_states", lambda s: s["state"]).alias("scheduler_states"),
        F.transform("scheduler_states", lambda s: s["duration_ms"]).alias(DURATIONS),
    )


def predictions(
    rescales: DataFrame, vertices: DataFrame, slots: DataFrame, states: DataFrame
) -> DataFrame:
    """scalefold's rescales (the `rescales` view and its children), in the compared columns."""
    from pyspark.sql import functions as F

    def collected(key: Column, value: str) -> Column:
        entries = F.collect_list(F.struct(key.alias("key"), F.col(value).alias("value")))
        return F.array_sort(entries).cast(_ENTRIES)

    vertex = F.col("job_vertex_id")
    per_vertex = vertices.groupBy("rescale_uuid").agg(
        collected(vertex, "pre_rescale_parallelism").alias("pre_parallelism"),
        collected(vertex, "post_rescale_parallelism").alias("post_parallelism"),
    )
    per_group = slots.groupBy("rescale_uuid").agg(
        collected(
            F.coalesce("slot_sharing_group_name", "slot_sharing_group_id"), "post_rescale_slots"
        ).alias("slots")
    )
    ordered = F.array_sort(F.collect_list(F.struct("span_index", "state", "duration_ms")))
    spans = states.groupBy("rescale_uuid").agg(
        F.transform(ordered, lambda s: s["state"]).alias("scheduler_states"),
        F.transform(ordered, lambda s: s["duration_ms"]).alias(DURATIONS),
    )
    joined = (
        rescales.select(
            F.col("job_id").alias("job_key"),
            *ORDER,
            "in_progress",
            "trigger_cause",
            "terminal_state",
            "terminated_reason",
        )
        .join(per_vertex, "rescale_uuid", "left")
        .join(per_group, "rescale_uuid", "left")
        .join(spans, "rescale_uuid", "left")
    )
    # A rescale without children has empty arrays, as Flink's side does.
    empty = F.array().cast(_ENTRIES)
    for name in ("pre_parallelism", "post_parallelism", "slots"):
        joined = joined.withColumn(name, F.coalesce(name, empty))
    states_empty = F.array().cast("array<string>")
    joined = joined.withColumn("scheduler_states", F.coalesce("scheduler_states", states_empty))
    return joined.withColumn(DURATIONS, F.coalesce(DURATIONS, F.array().cast("array<bigint>")))


def _numbered(side: DataFrame, prefix: str) -> DataFrame:
    """`side` with `pair_index` (1, 2, ... per job in ORDER), its other columns prefixed."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = Window.partitionBy("job_key").orderBy(*ORDER)
    numbered = side.withColumn("pair_index", F.row_number().over(order))
    keep = ("job_key", "pair_index", "cluster", "flink_job_id")
    return numbered.select(
        *keep, *[F.col(c).alias(f"{prefix}{c}") for c in side.columns if c not in keep]
    )


def conformance(
    flink_latest: DataFrame, predicted: DataFrame, verdicts: DataFrame | None = None
) -> DataFrame:
    """One row per pair (see the module doc): both sides' fields, and which agree; with
    `verdicts` (the table `flink_verdicts`), whether the observation decides it."""
    from pyspark.sql import functions as F

    flink = _flink_side(flink_latest)
    jobs = flink.select(*JOB).distinct()
    ours = predicted.join(jobs, "job_key")  # only the jobs a real Flink ran
    f = _numbered(flink, "flink_").alias("f")
    p = _numbered(ours, "predicted_").alias("p")
    joined = f.join(p, ["job_key", "pair_index"], "full_outer")
    has_flink = F.col("flink_rescale_uuid").isNotNull()
    has_ours = F.col("predicted_rescale_uuid").isNotNull()
    agrees = {
        name: (has_flink & has_ours & F.col(f"flink_{name}").eqNullSafe(F.col(f"predicted_{name}")))
        for name in FIELDS
    }
    every = F.lit(True)
    for column in agrees.values():
        every = every & column
    # a prediction whose children are not all committed yet is not settled (CHILD_FIELDS)
    children_missing = F.lit(False)
    for name in CHILD_FIELDS:
        children_missing = children_missing | (F.size(f"predicted_{name}") == 0)
    children_missing = has_ours & children_missing
    done = (
        ~F.coalesce(F.col("flink_in_progress"), F.lit(False))
        & ~F.coalesce(F.col("predicted_in_progress"), F.lit(False))
        & ~children_missing
    )
    if verdicts is not None:
        judged = verdicts.select(
            "job_key",
            "pair_index",
            F.lit(True).alias("judged"),
            F.col("ambiguous").alias("_ambiguous"),
            "ambiguity",
            F.col("durations_agree").alias(f"{DURATIONS}_agree"),
        )
        joined = joined.join(judged, ["job_key", "pair_index"], "left")
    else:
        joined = joined.select(
            "*",
            F.lit(None).cast("boolean").alias("judged"),
            F.lit(None).cast("boolean").alias("_ambiguous"),
            F.lit(None).cast("string").alias("ambiguity"),
            F.lit(None).cast("boolean").alias(f"{DURATIONS}_agree"),
        )
    return joined.select(
        F.coalesce("f.cluster", "p.cluster").alias("cluster"),
        F.coalesce("f.flink_job_id", "p.flink_job_id").alias("flink_job_id"),
        "job_key",
        "pair_index",
        F.when(has_flink & has_ours, "both")
        .when(has_flink, "flink_only")
        .otherwise("predicted_only")
        .alias("paired"),
        done.alias("settled"),
        "flink_rescale_uuid",
        "predicted_rescale_uuid",
        "flink_start_timestamp_ms",
        "predicted_start_timestamp_ms",
        *[
            column
            for name in FIELDS
            for column in (
                f"flink_{name}",
                f"predicted_{name}",
                agrees[name].alias(f"{name}_agrees"),
            )
        ],
        every.alias(f"{ALL_FIELDS}_agree"),
        f"flink_{DURATIONS}",
        f"predicted_{DURATIONS}",
        F.coalesce("judged", F.lit(False)).alias("judged"),
        F.coalesce("_ambiguous", F.lit(False)).alias("ambiguous"),
        "ambiguity",
        f"{DURATIONS}_agree",
    )


def agreement(paired: DataFrame) -> DataFrame:
    """Per job and field, and over every job (`scope` = `total`): settled pairs compared,
    those that agree, and the rate."""
    from pyspark.sql import functions as F

    names = [*FIELDS, ALL_FIELDS]
    verdicts = [f"{name}_agrees" for name in FIELDS] + [f"{ALL_FIELDS}_agree"]
    cells = F.explode(
        F.array(
            *[
                F.struct(
                    F.lit(i).alias("field_index"), F.lit(n).alias("field"), F.col(v).alias("ok")
                )
                for i, (n, v) in enumerate(zip(names, verdicts, strict=True))
            ]
        )
    )
    rows = (
        paired.where("settled")
        .select(*JOB, "ambiguous", cells.alias("c"))
        .select(*JOB, "ambiguous", "c.*")
    )
    decided = ~F.col("ambiguous")
    counts = [
        F.count("*").alias("compared"),
        F.sum(F.col("ok").cast("long")).alias("agreed"),
        F.sum(F.col("ambiguous").cast("long")).alias("ambiguous"),
        F.sum(decided.cast("long")).alias("decidable"),
        F.sum((decided & F.col("ok")).cast("long")).alias("decidable_agreed"),
    ]
    per_job = rows.groupBy(*JOB, "field_index", "field").agg(*counts)
    total = rows.groupBy("field_index", "field").agg(*counts)
    total = total.select(*[F.lit(None).cast("string").alias(c) for c in JOB], *total.columns)
    both = per_job.withColumn("scope", F.lit("job")).unionByName(
        total.withColumn("scope", F.lit("total"))
    )
    return both.select(
        "scope",
        *JOB,
        "field",
        "compared",
        "agreed",
        (F.col("agreed") / F.col("compared")).alias("rate"),
        "ambiguous",
        "decidable",
        "decidable_agreed",
        F.when(F.col("decidable") > 0, F.col("decidable_agreed") / F.col("decidable"))
        .otherwise(F.lit(None).cast("double"))
        .alias("decidable_rate"),
        "field_index",
    )
