"""The README's steps on a running local stack, and the slots each job ended with (issue 46).

    .venv/bin/python -m bench.busy --hogs 2 --fleet .run/rs -- sh -c '.venv/bin/scalefold \\
        local up --fresh --run-dir .run/rs && .venv/bin/python -m bench.readme_steps --run-dir .run/rs'

Does what the README tells a new user to do, with the CLI: produces its `views` job (one
vertex of parallelism 4 and no TaskManager: the history service provisions them) and its
`clicks` job (`produce --from examples/tm-join-one-by-one.jsonl --now`, which brings its
own four TaskManagers, one every 11 s). Then it reads the stack's topics from the start
until both jobs run on 4 slots, and 40 s more (past the planner's grace of any record it
saw): each job's peak slots against its need (tools/slots.py, from `decisions`), every
command with its outcome, and the breaches of issue 46's invariant (a TaskManager scalefold
provisioned taking a job above its need plus the spare). Under `bench.busy` the fleet's jobs
are counted too; `jobs_above_need_at_peak` counts those whose peak passed their need by any
TaskManager, their own logs' included, which is not a breach (a log that adds TaskManagers
after a provision was applied, or lowers its requirements). Exits 1 on a breach, or when a job did not get its slots in `--timeout`.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from bench.load import load_average
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts import records as r
from services.contracts.commands import CommandOutcome, ScalingCommand
from services.contracts.kafka import librdkafka_config
from services.localstack.layout import RUN_ROOT
from services.tools.slots import SlotLedger

ROOT = Path(__file__).resolve().parents[1]
README_JOBS = ("views", "clicks")
NEED = 4
VIEWS = [{"id": "source", "name": "Source", "slotSharingGroupId": "default", "parallelism": 4}]


def produce_the_readme_jobs(env: dict[str, str]) -> None:
    """The README's two `produce` commands, as a user types them."""
    cli = [sys.executable, "-m", "services.cli", "produce"]
    views = [
        "job-submitted",
        "--job-id",
        "views",
        "--vertices",
        json.dumps(VIEWS),
        "--checkpoint-interval-millis",
        "10000",
    ]
    subprocess.run([*cli, *views], env=env, cwd=ROOT, check=True, capture_output=True)
    clicks = ["--from", str(ROOT / "examples" / "tm-join-one-by-one.jsonl"), "--now"]
    subprocess.Popen([*cli, *clicks], env=env, cwd=ROOT, stdout=subprocess.DEVNULL)


class Reading:
    """What the stack's topics said: slots, commands and outcomes, and which jobs got there."""

    def __init__(self) -> None:
        self.ledger = SlotLedger(spare=0)
        self.commands: list[ScalingCommand] = []
        self.outcomes: dict[str, CommandOutcome] = {}
        self.running: set[str] = set()  # README jobs with a completed rescale on NEED slots

    def take(self, schema: str, record: dict[str, Any]) -> None:
        if schema == r.SCHEDULER_DECISIONS:
            self.ledger.fold(record)
        elif schema == r.SCALING_COMMAND:
            self.commands.append(ScalingCommand.from_record(record))
        elif schema == r.COMMAND_OUTCOME:
            outcome = CommandOutcome.from_record(record)
            self.outcomes[outcome.command_id] = outcome
        elif schema == r.RESCALE and record["terminalState"] == "COMPLETED":
            slots = sum(s["postRescaleSlots"] or 0 for s in record["slots"])
            if record["jobId"] in README_JOBS and slots == NEED:
                self.running.add(record["jobId"])

    def report(self, waited_s: float) -> dict[str, Any]:
        answered = {c.command_id: self.outcomes.get(c.command_id) for c in self.commands}
        statuses = Counter(str(o.status) if o else "none" for o in answered.values())
        fleet = [j for j in self.ledger.jobs.values() if j.need is not None and j.peak]
        return {
            "waited_s": round(waited_s, 1),
            "readme_jobs": {
                job: {"peak": self.ledger.jobs[job].peak, "need": self.ledger.jobs[job].need}
                for job in README_JOBS
                if job in self.ledger.jobs
            },
            "running": sorted(self.running),
            "jobs_with_slots": len(fleet),
            "jobs_above_need_at_peak": sum(j.peak > (j.need or 0) for j in fleet),
            "commands": len(self.commands),
            "outcomes": dict(statuses),
            "readme_commands": [
                {
                    "job": c.job_id,
                    "action": str(c.action),
                    "amount": c.amount,
                    "reason": c.reason,
                    "outcome": str(o.status) if (o := answered[c.command_id]) else None,
                    "answer": o.message if o else None,
                }
                for c in self.commands
                if c.job_id in README_JOBS
            ],
            "breaches": [str(b) for b in self.ledger.breaches],
            "load_1min": load_average(),
        }


def read(settings: Settings, timeout_s: float, after_s: float) -> dict[str, Any]:
    from confluent_kafka import Consumer

    codec = Codec(SchemaRegistry.load(settings.schemas_dir))
    topics = settings.topics
    consumer = Consumer(
        librdkafka_config(
            settings,
            **{"group.id": f"bench-readme-{uuid.uuid4().hex[:8]}", "auto.offset.reset": "earliest"},
        )
    )
    consumer.subscribe(
        [topics.rescales, topics.decisions, topics.commands, topics.command_outcomes]
    )
    reading, started = Reading(), time.monotonic()
    there: float | None = None
    try:
        while time.monotonic() < (started + timeout_s if there is None else there + after_s):
            message = consumer.poll(0.2)
            value = message.value() if message is not None and not message.error() else None
            if value:
                decoded = codec.decode(value)
                reading.take(decoded.schema, decoded.record)
            if there is None and reading.running == set(README_JOBS):
                there = time.monotonic()
                print(
                    f"readme_steps: both jobs run on {NEED} slots after "
                    f"{there - started:.0f} s; {after_s:.0f} s more",
                    file=sys.stderr,
                    flush=True,
                )
    finally:
        consumer.close()
    return reading.report((there or time.monotonic()) - started)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", type=Path, default=RUN_ROOT / "local")
    parser.add_argument("--timeout", type=float, default=420.0, help="seconds for both jobs")
    parser.add_argument("--after", type=float, default=40.0, help="seconds read after that")
    args = parser.parse_args(argv)
    bootstrap = (args.run_dir / "bootstrap").read_text().strip()
    env = {**os.environ, "SCALEFOLD_BOOTSTRAP_SERVERS": bootstrap}
    settings = Settings.from_env(env)
    produce_the_readme_jobs(env)
    result = read(settings, args.timeout, args.after)
    print(json.dumps(result, indent=2))
    return 0 if not result["breaches"] and result["running"] == sorted(README_JOBS) else 1


if __name__ == "__main__":
    sys.exit(main())
