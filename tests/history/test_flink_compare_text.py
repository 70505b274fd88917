"""`scalefold flink compare`'s text: the rates table and a disagreeing pair. Pure: no Spark."""

from __future__ import annotations

from typing import Any

from services.history.conformance import ALL_FIELDS, FIELDS
from services.history.flinkcli import as_json, as_text, pair_lines, rate_table


def _rates(
    scope: str, job: str | None, agreed: dict[str, int], compared: int
) -> list[dict[str, Any]]:
    return [
        {
            "scope": scope,
            "cluster": None,
            "flink_job_id": None,
            "job_key": job,
            "field": name,
            "compared": compared,
            "agreed": agreed.get(name, compared),
            "rate": agreed.get(name, compared) / compared,
            "field_index": i,
        }
        for i, name in enumerate([*FIELDS, ALL_FIELDS])
    ]


def _pair(**kw: Any) -> dict[str, Any]:
    pair: dict[str, Any] = {
        "cluster": "local",
        "flink_job_id": "j1",
        "job_key": "local.j1",
        "pair_index": 2,
        "paired": "both",
        "settled": True,
        "flink_rescale_uuid": "f-2",
        "predicted_rescale_uuid": "p-2",
    }
    for name in FIELDS:
        pair |= {f"flink_{name}": "X", f"predicted_{name}": "X", f"{name}_agrees": True}
    pair[f"{ALL_FIELDS}_agree"] = True
    return pair | kw


def test_the_rates_table_has_a_line_per_job_then_the_total() -> None:
    rates = [
        *_rates("total", None, {"post_parallelism": 1, ALL_FIELDS: 1}, 3),
        *_rates("job", "local.j1", {"post_parallelism": 1, ALL_FIELDS: 1}, 2),
        *_rates("job", "local.j0", {}, 1),
    ]
    head, rule, first, second, total = rate_table(rates)
    assert head.split("|")[0].strip() == "job" and "post" in head and "all" in head
    assert set(rule.strip()) <= {"-", "+"}
    assert first.split("|")[0].strip() == "local.j0" and second.split("|")[0].strip() == "local.j1"
    cells = [c.strip() for c in total.split("|")]
    assert cells[:3] == ["total", "3", "0"]  # pairs, of which ambiguous
    assert cells[3 + FIELDS.index("post_parallelism")] == "33 %"
    assert cells[3 + FIELDS.index("trigger_cause")] == "100 %"
    assert cells[-1] == "-"  # no pair is known to be decidable


def test_a_disagreeing_pair_shows_only_the_fields_that_differ() -> None:
    entries = [{"key": "cbc357ccb763df2852fee8c4fc7d55f2", "value": 2}, {"key": "sums", "value": 1}]
    pair = _pair(
        flink_post_parallelism=entries,
        predicted_post_parallelism=[{**entries[0], "value": 1}, entries[1]],
        post_parallelism_agrees=False,
        flink_scheduler_states=["Executing", "Restarting"],
        predicted_scheduler_states=["Executing"],
        scheduler_states_agrees=False,
    )
    assert pair_lines(pair) == [
        "  local.j1 #2: flink f-2, predicted p-2",
        (
            "    post_parallelism: flink cbc357ccb763df2852fee8c4fc7d55f2=2, sums=1; "
            "predicted cbc357ccb763df2852fee8c4fc7d55f2=1, sums=1"
        ),
        "    scheduler_states: flink Executing > Restarting; predicted Executing",
    ]
    # a vertex by the name Flink gave it, where it gave one
    named = pair_lines(pair, {"cbc357ccb763df2852fee8c4fc7d55f2": "Source: Numbers -> Slow map"})
    assert named[1] == (
        "    post_parallelism: flink Source: Numbers -> Slow map=2, sums=1; "
        "predicted Source: Numbers -> Slow map=1, sums=1"
    )
    missing = _pair(paired="flink_only", predicted_rescale_uuid=None)
    assert pair_lines(missing)[-1] == "    only Flink recorded this rescale"


def test_pending_pairs_are_said_and_counted() -> None:
    rates = _rates("total", None, {}, 1)
    pairs = [_pair(), _pair(pair_index=3, settled=False)]
    assert "(1 pairs still in progress are not counted yet)" in as_text(rates, pairs, [])
    report = as_json(rates, pairs, [])
    assert report["pending"] == 1 and "field_index" not in report["agreement"][0]


def _context(finder: Any) -> Any:
    from pathlib import Path

    from services.clicontext import Context
    from services.contracts import Settings

    return Context(Settings.from_env({}), Path("/nonexistent"), {}, finder)


def test_the_verdict_asks_the_scheduler_which_pairs_are_ambiguous() -> None:
    import argparse

    from services.contracts.ambiguity import AmbiguitiesUnknownError, AmbiguousPair, Findings
    from services.history.flinkcli import _judged, verdict_text

    wrong = _pair(slots_agrees=False, flink_slots="4", predicted_slots="3")
    pairs = [_pair(pair_index=1), wrong]
    args = argparse.Namespace(job="local.j1", ambiguities=True)
    asked: list[str] = []

    def finder(settings: Any, job: str) -> Findings:
        asked.append(job)
        return Findings((AmbiguousPair(job, 2, ("slots",), "TaskManagerRegistered tm-3, ..."),), 0)

    judged = _judged(args, _context(finder), pairs, {})
    assert asked == ["local.j1"] and judged is not None
    assert judged.status == 0 and judged.ambiguous == {2}
    text = verdict_text(pairs, judged)
    assert "Agreement over the pairs the observation decides" in text
    assert (
        "  pair 2: ambiguous at this observation resolution: TaskManagerRegistered tm-3, ..."
        in text
    )

    def unreachable(settings: Any, job: str) -> Findings:
        raise AmbiguitiesUnknownError("no broker answered at 127.0.0.1:9")

    judged = _judged(args, _context(unreachable), pairs, {})
    assert judged is not None and judged.status == 1  # every pair counts as decidable
    assert judged.lines[0].startswith("(which pairs are ambiguous is not known: no broker")
    assert "pair 2 disagrees: slots Flink 4 / scalefold 3" in judged.lines
    several = argparse.Namespace(job=None, ambiguities=True)
    assert _judged(several, _context(finder), pairs, {}) is None
