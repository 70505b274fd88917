"""Each autoscaler's runs of bench/autoscale_bench.py under different shared settings, as
points of backlog p99 against slot-seconds: a trade-off curve a controller (not a test).

    .venv/bin/python -m bench.autoscale_curve 0.5=.run/curve/sine-0.5.json \\
        0.7=.run/curve/sine-0.7.json 0.9=.run/curve/sine-0.9.json [--picture FILE]

Each argument is a label (the setting the run differed by, e.g. its utilization target)
and the run's `--json` results. The goal of issue 50 compares two points, one run each;
a curve compares what each autoscaler can reach by its settings: one curve below the
other (a lower p99 at as many slot-seconds) is a better controller whatever setting is
chosen. A table per trace (markdown) and a picture, a panel per trace.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from services.localstack.layout import PROJECT_ROOT

COLOURS = {"peer": "tab:orange", "scalefold": "tab:blue"}


@dataclass(frozen=True)
class Point:
    label: str
    trace: str
    controller: str
    rescales: int
    downtime_s: float
    backlog_p99: float
    slot_seconds: float


def points(label: str, results: list[dict[str, Any]]) -> list[Point]:
    """One point a run of a results file (bench/autoscale_bench.py's `--json`)."""
    return [
        Point(
            label,
            str(r["trace"]),
            str(r["controller"]),
            int(r["rescales"]),
            float(r["downtime_s"]),
            float(r["backlog_p99"]),
            float(r["slot_seconds"]),
        )
        for r in results
    ]


def table(found: list[Point]) -> list[str]:
    lines = [
        "| trace | setting | autoscaler | rescales | downtime s | backlog p99 | slot-s |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for p in sorted(found, key=lambda p: (p.trace, p.controller, p.label)):
        lines.append(
            f"| {p.trace} | {p.label} | {p.controller} | {p.rescales} | {p.downtime_s:.1f} "
            f"| {p.backlog_p99:.0f} | {p.slot_seconds:.0f} |"
        )
    return lines


def picture(found: list[Point], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    traces = list(dict.fromkeys(p.trace for p in found))
    fig, axes = plt.subplots(1, len(traces), figsize=(5 * len(traces), 4), squeeze=False)
    for ax, trace in zip(axes[0], traces, strict=True):
        for controller in dict.fromkeys(p.controller for p in found):
            mine = sorted(
                (p for p in found if p.trace == trace and p.controller == controller),
                key=lambda p: p.slot_seconds,
            )
            colour = COLOURS.get(controller, "tab:gray")
            xs, ys = [p.slot_seconds for p in mine], [p.backlog_p99 for p in mine]
            ax.plot(xs, ys, "o-", color=colour, label=controller)
            for p in mine:
                ax.annotate(p.label, (p.slot_seconds, p.backlog_p99), fontsize=7, color=colour)
        ax.set_title(trace, fontsize=9)
        ax.set_xlabel("slot-seconds")
        ax.set_ylabel("backlog p99 (records)")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)


def labelled(text: str) -> tuple[str, Path]:
    label, equals, path = text.partition("=")
    if not equals or not label or not path:
        raise argparse.ArgumentTypeError(f"{text!r}: LABEL=RESULTS.json")
    return label, Path(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=labelled, metavar="LABEL=RESULTS.json")
    parser.add_argument(
        "--picture", type=Path, default=PROJECT_ROOT / "docs" / "autoscaling-curve.png"
    )
    args = parser.parse_args(argv)
    found: list[Point] = []
    for label, path in args.runs:
        try:
            found += points(label, json.loads(path.read_text()))
        except (OSError, ValueError, KeyError) as error:
            print(f"{path}: {error}", file=sys.stderr)
            return 2
    print("\n".join(table(found)))
    picture(found, args.picture)
    print(f"picture: {args.picture}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
