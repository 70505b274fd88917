"""The slots a job holds against its need, folded from the scheduler's decisions. Pure."""

from __future__ import annotations

from typing import Any

from services.tools.slots import SlotLedger


def decisions(job: str, *items: tuple[str, dict[str, str]], at: int = 0) -> dict[str, Any]:
    return {
        "jobId": job,
        "items": [
            {"kind": kind, "timestamp": at + i, "details": details}
            for i, (kind, details) in enumerate(items)
        ],
    }


def need(slots: int) -> tuple[str, dict[str, str]]:
    return "DECLARE_RESOURCES", {"desired_slots": str(slots), "runtime": "external"}


def registered(tm: str, slots: int = 1) -> tuple[str, dict[str, str]]:
    return "RESOURCES_CHANGED", {
        "change": "registered",
        "taskManager": tm,
        "taskManagerSlots": str(slots),
    }


def lost(tm: str) -> tuple[str, dict[str, str]]:
    return "RESOURCES_CHANGED", {"change": "lost", "taskManager": tm, "taskManagerSlots": "1"}


def test_a_provisioned_taskmanager_beyond_need_and_spare_is_a_breach() -> None:
    ledger = SlotLedger(spare=1)
    ledger.fold(decisions("j", need(2), registered("j-tm-1"), registered("j-tm-2")))
    ledger.fold(decisions("j", registered("j-cmd-provision-ab-0")))  # 3 = 2 + 1 spare: fine
    assert ledger.breaches == []
    ledger.fold(decisions("j", registered("j-cmd-provision-ab-1"), at=50))
    (breach,) = ledger.breaches
    assert (breach.job_id, breach.held, breach.need, breach.at_ms) == ("j", 4, 2, 50)
    assert "j-cmd-provision-ab-1" in str(breach)
    assert ledger.over() == {"j": (4, 2)}


def test_taskmanagers_a_person_added_or_a_lowered_need_are_no_breach() -> None:
    ledger = SlotLedger()
    ledger.fold(decisions("j", need(4), *[registered(f"tm-{n}") for n in range(6)]))
    ledger.fold(decisions("k", need(4), registered("tm-provision-x-0"), lost("tm-provision-x-0")))
    ledger.fold(decisions("k", need(1)))  # requirements lowered: a release's business
    assert ledger.breaches == []
    assert ledger.jobs["j"].peak == 6
    assert ledger.over() == {"j": (6, 4)}
    assert ledger.jobs["k"].total == 0
