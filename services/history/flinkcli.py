"""`scalefold flink compare`: how well scalefold predicted the rescales a real Flink recorded.

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
    except lake.HistoryNotFoundError as error:
        print(f"scalefold flink compare: {no_history(str(error))}", file=sys.stderr)
        return 1
    except lake.HistoryUnreadableError as error:
        print(f"scalefold flink compare: {error}", file=sys.stderr)
        return 1
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
