"""Every parallelism decision and non-decision the history service's autoscaler makes, with
its evidence and reason: the table `scaling_decisions` (issue 50, item 3), and the pure
step that makes one (`evaluate`); the autoscaler (autoscaler.py) is its shell.

A job's step, each `--autoscaler-interval` (10 s): the samples of its newest run
within the window (advice.newest_run) -> the rules (parallelism.decide) -> a change
worth its downtime (parallelism.worth) -> what the adaptive scheduler does with it
(the scheduler's fold: contracts/foresight.py) -> sent, or advised. Each step ends in
one `Outcome`; a row is written when a job's outcome or targets change, and at least
every `record_every_ms` while they do not (the evidence of a long hold, without a row
every ten seconds).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from services.contracts.foresight import Forecast
from services.history import advice
from services.history import parallelism as pl
from services.history.lake import Lake, quoted
from services.history.render import utc

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

TABLE = "scaling_decisions"


class Outcome(StrEnum):
    """How a job's step ended."""

    SENT = "SENT"
    """A SET_PARALLELISM command went to the actuator (mode `scale`)."""
    ADVISED = "ADVISED"
    """It would have been sent (mode `advise`)."""
    KEPT = "KEPT"
    """The rules keep every vertex (within the boundary, stabilizing, a scale-down waiting)."""
    NOT_WORTH = "NOT_WORTH"
    """The rescale's downtime costs more than it gains (parallelism.worth)."""
    NO_RESCALE = "NO_RESCALE"
    """The adaptive scheduler would start no rescale with it (the scheduler's fold)."""
    FORECAST_UNKNOWN = "FORECAST_UNKNOWN"
    """The scheduler's fold could not be asked: nothing is sent on an unchecked decision."""
    NO_WINDOW = "NO_WINDOW"
    """Too few usable samples: fewer than two of one run, or some unusable."""
    NO_SIGNALS = "NO_SIGNALS"
    """The job's newest sample is older than `stale_ms`: its signals stopped."""
    SEND_FAILED = "SEND_FAILED"
    """The broker did not take the command; the next step decides again."""


VERTEX = (
    "struct<vertex_id:string,name:string,current:int,target:int,reached:int,"
    "target_rate:double,capacity:double,busy:double,reason:string>"
)
COLUMNS = (
    ("cluster", "string"),
    ("flink_job_id", "string"),
    ("job_key", "string"),
    ("decided_at_ms", "bigint"),
    ("mode", "string"),
    ("outcome", "string"),
    ("reason", "string"),
    ("window_first_ms", "bigint"),
    ("window_last_ms", "bigint"),
    ("samples", "int"),
    ("input_rate", "double"),
    ("backlog", "double"),
    ("restart_ms", "bigint"),
    ("forecast", "string"),
    ("command_id", "string"),
    ("vertices", f"array<{VERTEX}>"),
)
"""A row per recorded step: `reason` the rules' and, when not sent, why not; `forecast`
what the scheduler's fold foresaw; per vertex its parallelism, its target, the
parallelism the fold foresaw it reaching, and the evidence (target rate, capacity of a
subtask, busy share, the rules' reason)."""


@dataclass(frozen=True)
class Step:
    """One job's step before its forecast (`evaluate`)."""

    job_key: str
    decision: pl.Decision
    outcome: Outcome | None
    """None: a rescale worth sending; the forecast and the mode decide the outcome."""
    reason: str
    first_ms: int | None = None
    last_ms: int | None = None
    samples: int = 0


def evaluate(
    job_key: str,
    samples: Sequence[pl.Sample],
    state: pl.PolicyState,
    *,
    config: pl.PolicyConfig,
    window_ms: int,
    stale_ms: int,
    now_ms: int,
    restart_ms: int | None,
    skews: Mapping[str, Mapping[int, float]] | None = None,
) -> tuple[Step, pl.PolicyState]:
    """A job's step up to its forecast, from its samples (time order), and the policy's
    state if nothing is sent; `skews`: the job's recorded skews (parallelism.decide)."""
    if not samples or now_ms - samples[-1].at_ms > stale_ms:
        age = (
            "no workload sample within the window"
            if not samples
            else f"no workload sample for {(now_ms - samples[-1].at_ms) // 1000} s"
        )
        step = Step(job_key, pl.Decision(False, "no signals"), Outcome.NO_SIGNALS, age)
        return step, state
    run = advice.newest_run(samples, window_ms)
    first, last = run[0].at_ms, run[-1].at_ms
    why = advice.unfilled(run, window_ms)
    if why is not None:
        step = Step(job_key, pl.Decision(False, why), Outcome.NO_WINDOW, why, first, last, len(run))
        return step, state
    loads, problems = pl.window(run[0], run[-1], run[1:-1])
    if problems:
        why = "the samples cannot be used: " + "; ".join(problems)
        step = Step(job_key, pl.Decision(False, why), Outcome.NO_WINDOW, why, first, last, len(run))
        return step, state
    rise = advice.recent(run, config.scale_up_window_ms)
    decision, after = pl.decide(loads, config, state, now_ms, restart_ms, recent=rise, skews=skews)
    if not decision.send:
        return Step(job_key, decision, Outcome.KEPT, decision.reason, first, last, len(run)), after
    costly = pl.worth(decision, config)
    outcome = None if costly is None else Outcome.NOT_WORTH
    reason = decision.reason if costly is None else f"{decision.reason}: not worth it: {costly}"
    return Step(job_key, decision, outcome, reason, first, last, len(run)), after


def concluded(forecast: Forecast | None, sends: bool) -> Outcome:
    """The outcome of a step worth sending, once the fold was asked (`forecast` None: it
    could not be), in a mode that `sends` or advises."""
    if forecast is None:
        return Outcome.FORECAST_UNKNOWN
    if not forecast.rescales:
        return Outcome.NO_RESCALE
    return Outcome.SENT if sends else Outcome.ADVISED


def mark(step: Step, outcome: Outcome) -> tuple[Any, ...]:
    """What makes a step worth a row of its own: its outcome and targets."""
    return (outcome, tuple(sorted(step.decision.targets.items())))


def row(
    step: Step,
    outcome: Outcome,
    reason: str,
    *,
    mode: str,
    now_ms: int,
    forecast: Forecast | None = None,
    command_id: str | None = None,
) -> dict[str, Any]:
    """The step's row of `scaling_decisions`."""
    cluster, _, flink_job_id = step.job_key.partition(".")
    d = step.decision
    reached: Mapping[str, int] = forecast.reached if forecast is not None else {}
    return {
        "cluster": cluster,
        "flink_job_id": flink_job_id or None,
        "job_key": step.job_key,
        "decided_at_ms": now_ms,
        "mode": mode,
        "outcome": str(outcome),
        "reason": reason,
        "window_first_ms": step.first_ms,
        "window_last_ms": step.last_ms,
        "samples": step.samples,
        "input_rate": d.input_rate,
        "backlog": d.backlog,
        "restart_ms": d.restart_ms,
        "forecast": forecast.described if forecast is not None else None,
        "command_id": command_id,
        "vertices": [
            {
                "vertex_id": v.vertex_id,
                "name": v.name,
                "current": v.current,
                "target": v.target,
                "reached": reached.get(v.vertex_id),
                "target_rate": v.target_rate,
                "capacity": v.capacity,
                "busy": v.busy,
                "reason": v.reason,
            }
            for v in d.vertices
        ],
    }


def spark_schema() -> StructType:
    from pyspark.sql.types import StructType

    schema = StructType.fromDDL(", ".join(f"{name} {kind}" for name, kind in COLUMNS))
    assert isinstance(schema, StructType)
    return schema


def arrow_schema() -> pa.Schema:
    import pyarrow as pa

    vertex = pa.struct(
        [
            ("vertex_id", pa.string()),
            ("name", pa.string()),
            ("current", pa.int32()),
            ("target", pa.int32()),
            ("reached", pa.int32()),
            ("target_rate", pa.float64()),
            ("capacity", pa.float64()),
            ("busy", pa.float64()),
            ("reason", pa.string()),
        ]
    )
    kinds = {
        "string": pa.string(),
        "int": pa.int32(),
        "bigint": pa.int64(),
        "double": pa.float64(),
    }
    return pa.schema([(name, kinds.get(kind, pa.list_(vertex))) for name, kind in COLUMNS])


def summary_lines(lake: Lake, job_key: str | None) -> list[str]:
    """`history summary`'s lines on the decisions: how many of each outcome, and each
    job's newest with its reason (`job_key`: one job; None: every job)."""
    if not lake.committed(TABLE):
        return []
    where = f"WHERE job_key = {quoted(job_key)}" if job_key else ""
    counts = lake.rows(
        f"SELECT outcome, count(*) AS n FROM d {where} GROUP BY outcome ORDER BY n DESC, outcome",
        {"d": TABLE},
    )
    if not counts:
        return []
    newest = lake.rows(
        "SELECT job_key, decided_at_ms, outcome, reason FROM ("
        "SELECT *, row_number() OVER (PARTITION BY job_key ORDER BY decided_at_ms DESC) AS n "
        f"FROM d {where}) WHERE n = 1 ORDER BY job_key",
        {"d": TABLE},
    )
    total = sum(int(row["n"]) for row in counts)
    tally = ", ".join(f"{row['n']} {row['outcome']}" for row in counts)
    lines = [f"Parallelism decisions (scaling_decisions): {total} recorded: {tally}"]
    for row in newest:
        at = utc(int(row["decided_at_ms"]))
        lines.append(f"  {row['job_key']}, newest at {at}: {row['outcome']}: {row['reason']}")
    return lines
