"""`scalefold flink compare`: how well scalefold predicted the rescales a real Flink recorded;
`scalefold flink advise`: the parallelism its jobs need now (advice.py).

It computes what the views `flink_conformance` and `flink_agreement` show
(conformance.py) from the committed Delta tables with delta-rs (pairing.py), as
`history summary` reads them: no Spark, whether a history service runs or not.
It prints the agreement rate per field, per job and in total, then every settled
pair that disagrees, field by field. For one job (`--job`) it asks the scheduler's fold of
the job's recorded inputs (through the broker) which pairs the observation cannot decide
(verdict.py), and ends with the verdict pair by pair: agreement over the decidable pairs
and over all of them; `--strict` exits 1 when a decidable pair disagrees. `register(verbs)` adds the verb to the
`scalefold flink` group (services/cli.py).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.contracts.ambiguity import Findings
from services.history.conformance import ALL_FIELDS, FIELDS
from services.history.mistakes import no_history, no_rescales
from services.history.verdict import Verdict, shown, verdict
from services.history.verdicts import ask

if TYPE_CHECKING:
    from services.clicontext import Context

SHORT = {
    "trigger_cause": "trigger",
    "terminal_state": "state",
    "terminated_reason": "reason",
    "pre_parallelism": "pre",
    "post_parallelism": "post",
    "slots": "slots",
    "scheduler_states": "states",
    ALL_FIELDS: "all",
}
"""The text table's column heads."""


def register(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `compare` to the `scalefold flink` group's verbs."""
    from services.history.cli import DEFAULT_DATA_DIR

    compare = verbs.add_parser(
        "compare",
        help="how well scalefold predicted the rescales Flink recorded: agreement per field, "
        "per job, in total",
        description="Pair each rescale a real Flink recorded (flink_rescales) with scalefold's "
        "prediction for the same job (the n-th with the n-th) and print the agreement per "
        "field (trigger, terminal state, reason, pre/post parallelism per vertex, slots per "
        "slot-sharing group, scheduler states), per job and in total, then the pairs that "
        "disagree. Only settled pairs count (neither side in progress). Reads the committed "
        "Delta tables without Spark (the views flink_conformance and flink_agreement show "
        "the same in SQL). With --job, the job's recorded inputs are folded again (from the "
        "broker, if one answers) with each input the bridge saw only between two polls at "
        "either end of its window: a pair whose prediction changes is ambiguous at this "
        "observation resolution, counted apart, and the verdict names it.",
    )
    compare.add_argument("--job", help="one job: Flink's job id, or <cluster>.<job id>")
    compare.add_argument(
        "--format", choices=["text", "json"], default="text", help="text tables or one JSON object"
    )
    compare.add_argument(
        "--ambiguities",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="with --job: ask the job's recorded inputs which pairs are ambiguous (default: "
        "yes, when a broker answers within 3 s)",
    )
    compare.add_argument(
        "--strict",
        action="store_true",
        help="exit 1 when a pair the observation decides disagrees (with --job)",
    )
    where = compare.add_mutually_exclusive_group()
    where.add_argument(
        "--data-dir",
        type=Path,
        default=DEFAULT_DATA_DIR,
        help=f"the history's tables (default: {DEFAULT_DATA_DIR})",
    )
    where.add_argument(
        "--run-dir",
        type=Path,
        help="a local stack (as the other `flink` verbs take it): its RUN_DIR/history",
    )
    compare.set_defaults(handler=compare_command)
    _register_advise(verbs, DEFAULT_DATA_DIR)
    _register_backtest(verbs, DEFAULT_DATA_DIR)


def _register_advise(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], data: Path
) -> None:
    advise = verbs.add_parser(
        "advise",
        help="the parallelism each vertex of a real Flink job needs now, from its workload "
        "samples (advisor mode: nothing is sent)",
        description="Decide, from the workload samples the bridge recorded (flink_signals), "
        "each vertex's parallelism as the parallelism decision would (DS2: records per busy "
        "second of a subtask against the input rate, the backlog to catch up and a "
        "rescale's downtime, from the job's own recorded rescales), and print it with its "
        "evidence. Nothing is sent. Reads the committed Delta tables without Spark.",
    )
    advise.add_argument("--job", help="one job: Flink's job id, or <cluster>.<job id>")
    advise.add_argument(
        "-D",
        dest="settings",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="a setting of the decision, by the Flink Kubernetes operator's key: "
        "job.autoscaler.utilization.target (0.7), .target.utilization.boundary (0.2), "
        ".catch-up.duration (5 min), .restart.time (30 s, when the job has no recorded "
        "rescale), .scale-down.interval (10 min), .stabilization.interval (2 min), "
        ".scale-down.max-factor (1: no limit), .vertex.max-parallelism, .metrics.window (60 s), "
        ".scaling.key-group.partitions.adjust.mode (EVENLY_SPREAD); scalefold's own "
        "scalefold.autoscaler.scale-up.window (30 s)",
    )
    advise.add_argument(
        "--format", choices=["text", "json"], default="text", help="text lines or JSON"
    )
    advise.add_argument(
        "--data-dir", type=Path, default=data, help=f"the history's tables (default: {data})"
    )
    advise.set_defaults(handler=advise_command)


def _register_backtest(
    verbs: argparse._SubParsersAction[argparse.ArgumentParser], data: Path
) -> None:
    backtest = verbs.add_parser(
        "backtest",
        help="the parallelism decision replayed over a job's recorded workload under other "
        "settings: rescales, downtime, backlog, slot-seconds per setting",
        description="Measure a real Flink job's model from its workload samples (each "
        "vertex's records per busy second of a subtask, its selectivity) and the rate its "
        "records arrived at, then replay that trace through the model as it ran (no "
        "decision) and under the decision with each setting: rescales, total downtime, "
        "backlog p50/p99/max, slot-seconds. The downtime of a rescale is the job's own "
        "recorded one (flink_rescales), else job.autoscaler.restart.time.",
    )
    backtest.add_argument("--job", required=True, help="Flink's job id, or <cluster>.<job id>")
    backtest.add_argument(
        "--try",
        dest="tries",
        metavar="KEY=VALUE[,KEY=VALUE...]",
        action="append",
        default=[],
        help="a setting to replay (the keys of `flink advise -D`); repeat for more. The "
        "defaults are always replayed",
    )
    backtest.add_argument(
        "--data-dir", type=Path, default=data, help=f"the history's tables (default: {data})"
    )
    backtest.set_defaults(handler=backtest_command)


def backtest_command(args: argparse.Namespace, context: Context) -> int:
    from services.history import advice, lake
    from services.history import backtest as bt

    try:
        tries = [("defaults", *advice.settings([]))]
        for text in args.tries:
            tries.append((text, *advice.settings(text.split(","))))
    except ValueError as error:
        print(f"scalefold flink backtest: {error}", file=sys.stderr)
        return 2
    try:
        history = lake.Lake.at(Path(args.data_dir))
        jobs = advice.job_samples(history, args.job)
        restart = {key: advice.restart_ms(history, key) for key in jobs}
    except (lake.HistoryNotFoundError, lake.HistoryUnreadableError) as error:
        return _unreadable("backtest", error)
    if len(jobs) != 1:
        named = f"names {len(jobs)} jobs ({', '.join(jobs)})" if jobs else "has no samples"
        print(
            f"scalefold flink backtest: job {args.job} {named} in {args.data_dir}", file=sys.stderr
        )
        return 1
    ((key, samples),) = jobs.items()
    model, trace = bt.measure(samples)
    if model is None:
        print(f"scalefold flink backtest: no usable window in job {key}'s samples", file=sys.stderr)
        return 1
    print("\n".join(bt.as_text(key, model, trace, tries, restart[key])))
    return 0


def advise_command(args: argparse.Namespace, context: Context) -> int:
    import time

    from services.history import advice, lake

    try:
        config, window = advice.settings(args.settings)
    except ValueError as error:
        print(f"scalefold flink advise: {error}", file=sys.stderr)
        return 2
    try:
        found = advice.advise(
            lake.Lake.at(Path(args.data_dir)), args.job, config, window, int(time.time() * 1000)
        )
    except (lake.HistoryNotFoundError, lake.HistoryUnreadableError) as error:
        return _unreadable("advise", error)
    if not found:
        which = f"job {args.job}" if args.job else "any job"
        print(
            f"scalefold flink advise: no workload samples of {which} in {args.data_dir}",
            file=sys.stderr,
        )
        return 1
    if args.format == "json":
        print(json.dumps(advice.as_json(found), indent=2))
    else:
        print("\n".join(advice.as_text(found)))
    return 0


def _unreadable(verb: str, error: Exception) -> int:
    """Say why the history could not be read (where the stack keeps its own, when there
    is none); exit status 1."""
    from services.history.lake import HistoryNotFoundError

    why = no_history(str(error)) if isinstance(error, HistoryNotFoundError) else str(error)
    print(f"scalefold flink {verb}: {why}", file=sys.stderr)
    return 1


def compare_command(args: argparse.Namespace, context: Context) -> int:
    from services.history import lake, pairing
    from services.history.handlers import verbose

    if args.run_dir:  # the local stack's history
        args.data_dir = Path(args.run_dir) / "history"
    data_dir = Path(args.data_dir)
    try:
        history = lake.Lake.at(data_dir)
        found = pairing.compare(history, args.job)
        pairs, rates = found.pairs, found.rates
        known = pairing.flink_jobs(history) if not pairs and args.job else []
    except (lake.HistoryNotFoundError, lake.HistoryUnreadableError) as error:
        return _unreadable("compare", error)
    verbose(args, f"read the committed Delta tables under {data_dir / 'tables'}")
    if not pairs:
        answer = (
            no_rescales(args.job, data_dir, known, kind="Flink job")
            if args.job
            else f"no rescales of a real Flink in {data_dir}"
        )
        print(f"scalefold flink compare: {answer}", file=sys.stderr)
        return 1
    disagreeing = [p for p in pairs if p["settled"] and not p[f"{ALL_FIELDS}_agree"]]
    judged = _judged(args, context, pairs, found.names)
    if args.format == "json":
        report = as_json(rates, pairs, disagreeing)
        if judged is not None:
            report["verdict"] = {"lines": list(judged.lines), "status": judged.status}
        print(json.dumps(report, indent=2, default=str))
    else:
        print(as_text(rates, pairs, disagreeing, found.names))
        if judged is not None:
            print("\n".join(verdict_text(pairs, judged)))
    return judged.status if judged is not None and args.strict else 0


def _judged(
    args: argparse.Namespace,
    context: Context,
    pairs: list[dict[str, Any]],
    names: Mapping[str, str],
) -> Verdict | None:
    """The verdict on one job's pairs, with the ambiguous ones the scheduler's fold finds
    (none, and a line saying so, when it cannot tell); None for several jobs."""
    if not args.job:
        return None
    findings: Findings | None = None
    unknown = None
    if not args.ambiguities:
        unknown = "not asked (--no-ambiguities)"
    else:
        findings, unknown = ask(context.ambiguities, context.settings, args.job)
    if findings is not None:
        return verdict(pairs, findings.pairs, names, findings.resolution_ms)
    judged = verdict(pairs, (), names)
    note = f"(which pairs are ambiguous is not known: {unknown}; each counts as decidable)"
    return replace(judged, lines=(note, *judged.lines))


def verdict_text(pairs: list[dict[str, Any]], judged: Verdict) -> list[str]:
    """The agreement over the pairs the observation decides (when some are not), then
    the verdict pair by pair."""
    from services.history.pairing import agreement

    lines = [""]
    decidable = [p for p in pairs if p["pair_index"] not in judged.ambiguous]
    if judged.ambiguous:
        lines.append("Agreement over the pairs the observation decides")
        lines += rate_table(agreement(decidable))
        lines.append("")
    lines.append("Verdict, pair by pair")
    return [*lines, *(f"  {line}" for line in judged.lines)]


def as_json(
    rates: list[dict[str, Any]], pairs: list[dict[str, Any]], disagreeing: list[dict[str, Any]]
) -> dict[str, Any]:
    """`{"agreement": [...], "pending": N, "disagreements": [...]}`."""
    shown = [{k: v for k, v in row.items() if k != "field_index"} for row in rates]
    return {
        "agreement": shown,
        "pending": sum(1 for p in pairs if not p["settled"]),
        "disagreements": disagreeing,
    }


def _percent(row: Mapping[str, Any] | None) -> str:
    if row is None or not row["compared"]:
        return "-"
    return f"{round(100 * row['agreed'] / row['compared'])} %"


def rate_table(rates: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per job and one for the total: pairs compared, how many of them the
    observation cannot decide (the history's verdicts: `flink_verdicts`), each field's
    rate, then every field's over the decidable pairs."""
    by_scope: dict[str, dict[str, Mapping[str, Any]]] = {}
    for row in rates:
        name = row["job_key"] if row["scope"] == "job" else "total"
        by_scope.setdefault(name, {})[row["field"]] = row
    names = [*FIELDS, ALL_FIELDS]
    head = ["job", "pairs", "ambiguous", *[SHORT[n] for n in names], "all decidable"]

    def decidable(row: Mapping[str, Any]) -> str:
        if not row.get("decidable"):
            return "-"
        return f"{round(100 * row['decidable_agreed'] / row['decidable'])} %"

    body = [
        [
            scope,
            str(fields[ALL_FIELDS]["compared"]),
            str(fields[ALL_FIELDS].get("ambiguous", 0)),
            *[_percent(fields.get(n)) for n in names],
            decidable(fields[ALL_FIELDS]),
        ]
        for scope, fields in sorted(by_scope.items(), key=lambda kv: (kv[0] == "total", kv[0]))
    ]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]

    def line(cells: list[str]) -> str:
        return "  " + " | ".join(
            c.ljust(w) if i == 0 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        )

    rule = "  " + "-+-".join("-" * w for w in widths)
    return [line(head), rule, *[line(cells) for cells in body]]


def pair_lines(pair: Mapping[str, Any], names: Mapping[str, str] | None = None) -> list[str]:
    """A disagreeing pair: which rescales, then each field that differs (`names`: the
    vertices' names by id)."""
    names = names or {}
    flink = pair["flink_rescale_uuid"] or "(none)"
    ours = pair["predicted_rescale_uuid"] or "(none)"
    lines = [f"  {pair['job_key']} #{pair['pair_index']}: flink {flink}, predicted {ours}"]
    if pair["paired"] != "both":
        side = "Flink recorded" if pair["paired"] == "flink_only" else "scalefold predicted"
        return [*lines, f"    only {side} this rescale"]
    for name in FIELDS:
        if not pair[f"{name}_agrees"]:
            lines.append(
                f"    {name}: flink {shown(pair[f'flink_{name}'], names)}; "
                f"predicted {shown(pair[f'predicted_{name}'], names)}"
            )
    return lines


def as_text(
    rates: list[dict[str, Any]],
    pairs: list[dict[str, Any]],
    disagreeing: list[dict[str, Any]],
    names: Mapping[str, str] | None = None,
) -> str:
    pending = sum(1 for p in pairs if not p["settled"])
    lines = ["Agreement of scalefold's predictions with the rescales Flink recorded"]
    lines += rate_table(rates)
    if pending:
        lines.append(f"  ({pending} pairs still in progress are not counted yet)")
    lines += ["", f"Disagreeing rescales ({len(disagreeing)})"]
    for pair in disagreeing:
        lines += pair_lines(pair, names)
    return "\n".join(lines)
