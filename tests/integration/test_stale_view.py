"""A paused history service resumes with a stale view and must not act on it (issue 46).

The README's `clicks` job (`produce --from examples/tm-join-one-by-one.jsonl --now`) brings
its own four TaskManagers, one every 11 s. The history service is paused (SIGSTOP to it and
its JVM, as a starved or paused JVM would be) for 30 s right after the job's first rescale
record, its wait for resources with no slot, reached the latest table. Before issue 46 the
planner, reading that record when it resumed, provisioned four more TaskManagers for a job
that already had its four: it ended with eight. Now the planner decides nothing from a view
older than its staleness bound, and a command whose basis no longer holds is SUPERSEDED by
the actuator: the job ends with its four slots, and no job ever holds more than its need
plus the spare (tools/slots.py) through a TaskManager scalefold provisioned.

Run with the planner's guard off (`--max-staleness 3600`, 2026-12-02, 1 passed in 154 s),
the planner sent PROVISION 4 decided on 0 of the 1 slot with a 35 s old view, and the
actuator answered SUPERSEDED naming the 3 slots the job held: it ended on its four. That
run is not in the suite (its five minutes of CI); the actuator's side of it is, in
tests/integration/test_actuator.py (a PROVISION decided on 0 slots for a job holding 2).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from services.contracts import Codec, Settings
from services.contracts.commands import CommandOutcome, OutcomeStatus, ScalingCommand
from services.history.lake import Lake
from services.localstack import stack
from services.localstack.processes import ServiceProcess
from services.tools.slots import SlotLedger
from tests.integration.scheduler_support import ROOT, ActuatorProcess, SchedulerProcess
from tests.kafka_support import cli_env, consume
from tests.patience import give_up_at

pytestmark = [pytest.mark.integration, pytest.mark.spark]

JOB = "clicks"
PAUSE_S = 30


def _first_record_merged(data_dir: Path) -> bool:
    lake = Lake(data_dir)
    if not lake.committed("rescales_latest"):
        return False
    sql = f"SELECT available_slots FROM r WHERE job_id = '{JOB}'"
    return bool(lake.rows(sql, {"r": "rescales_latest"}))


def _decoded(codec: Codec, settings: Settings, topic: str) -> list[dict[str, Any]]:
    return [
        codec.decode(m.value).record
        for m in consume(settings, topic, lambda got: False, timeout=5)
        if m.value
    ]


def test_the_readme_job_with_its_history_paused_for_30_s_ends_with_its_own_slots(
    kafka: Settings, codec: Codec, tmp_path: Path
) -> None:
    scheduler = SchedulerProcess(kafka, tmp_path / "scheduler", "-Dscalefold.runtime.mode=external")
    actuator = ActuatorProcess(kafka, tmp_path / "actuator", "--provisioning-delay", "1")
    history = ServiceProcess(
        "history", ("history", "run", "--data-dir", str(tmp_path / "history")), tmp_path
    )
    scheduler.start()
    actuator.start()
    stack.start(history, kafka)
    env = cli_env(kafka)
    producing = None
    try:
        scheduler.wait_ready()
        actuator.wait_ready()
        stack.wait_logged(history, stack.HISTORY_READY)
        log = ROOT / "examples" / "tm-join-one-by-one.jsonl"
        producing = subprocess.Popen(
            [sys.executable, "-m", "services.cli", "produce", "--from", str(log), "--now"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = give_up_at(120)
        while not _first_record_merged(tmp_path / "history"):
            assert time.monotonic() < deadline, "the job's first rescale never reached the table"
            time.sleep(0.2)
        group = history.pid()
        assert group is not None
        os.killpg(group, signal.SIGSTOP)  # the service and its JVM
        time.sleep(PAUSE_S)
        os.killpg(group, signal.SIGCONT)
        assert producing.wait(120) == 0

        def settled(records: list[Any]) -> bool:  # the job on its four slots
            return any(
                (rec := codec.decode(m.value).record)["jobId"] == JOB
                and rec["terminalState"] == "COMPLETED"
                and rec["slots"][0]["postRescaleSlots"] == 4
                for m in records
            )

        consume(kafka, kafka.topics.rescales, settled, timeout=240)
        time.sleep(40)  # past the provisioning grace of every record it saw: nothing comes late

        ledger = SlotLedger(spare=0)
        for record in _decoded(codec, kafka, kafka.topics.decisions):
            ledger.fold(record)
        assert ledger.breaches == []
        assert ledger.jobs[JOB].total == 4 and ledger.jobs[JOB].need == 4
        assert ledger.over() == {}
        ours = [
            command
            for command in map(
                ScalingCommand.from_record, _decoded(codec, kafka, kafka.topics.commands)
            )
            if command.job_id == JOB
        ]
        outcomes = {
            outcome.command_id: outcome.status
            for outcome in map(
                CommandOutcome.from_record, _decoded(codec, kafka, kafka.topics.command_outcomes)
            )
        }
        # a command decided on the stale view, if any got out, was not applied
        assert all(outcomes.get(c.command_id) is OutcomeStatus.SUPERSEDED for c in ours), [
            (c.reason, outcomes.get(c.command_id)) for c in ours
        ]
    finally:
        if producing is not None and producing.poll() is None:
            producing.kill()
        group = history.pid()
        if group is not None:
            os.killpg(group, signal.SIGCONT)
        history.stop()
        actuator.stop()
        scheduler.stop()
