"""DefaultStateTransitionManager (FLIP-461), the rescale decision of WaitingForResources
and Executing, as functions over the fold.

    Cooldown --> Idling --> Stabilizing --> Stabilized --> Transitioning
        \\___________________/^       \\____________________/^
                                        Stabilized --> Idling (insufficient)

Phase rules (reference section 3): a change in Cooldown is remembered only if
resources are sufficient then; triggers are ignored in Cooldown and Idling;
Stabilizing transitions on a trigger (or its max-delay evaluation) only with the
desired resources and never re-checks sufficiency; Stabilized transitions on a
trigger with sufficient resources, else falls back to Idling. The stabilization
window is anchored at the first change, the evaluation at the latest.

Every change and trigger yields a decision saying what happened and why not
otherwise (scalefold's addition); while a rescale is in progress its
`transitionPhases` record the phases it went through.
"""

from __future__ import annotations

from typing import Any, Final, Protocol

from services.scheduler.core.enums import DecisionKind, Phase
from services.scheduler.core.fold import Fold
from services.scheduler.core.history import (
    end_without_change,
    open_new_resource_rescale,
    track_phase,
)
from services.scheduler.core.model import InvariantError, TransitionManager
from services.scheduler.core.structs import replace

COOLDOWN_END: Final = "stm.cooldown-end"
STABILIZED: Final = "stm.stabilized"
EVALUATE: Final = "stm.evaluate"
STABILIZED_TRIGGER: Final = "stm.stabilized-trigger"
ACTIONS: Final = (COOLDOWN_END, STABILIZED, EVALUATE, STABILIZED_TRIGGER)


class Assessment:
    """The owning state's view of the resources: sufficient, desired, and in words.

    A plain class rather than a frozen dataclass: compiled, a dataclass keeps the
    interpreted `__init__` the dataclasses module writes, and a step builds several."""

    def __init__(self, sufficient: bool, desired: bool, message: str) -> None:
        self.sufficient: Final = sufficient
        self.desired: Final = desired
        self.message: Final = message


class TransitionContext(Protocol):
    """What the owning state (WaitingForResources or Executing) provides."""

    records_new_resources: bool

    def assess(self, fold: Fold) -> Assessment: ...

    def transition_to_subsequent_state(self, fold: Fold) -> None: ...

    def request_active_checkpoint(self, fold: Fold) -> None: ...


def create(fold: Fold, cooldown_ms: int, stabilization_ms: int, max_delay_ms: int) -> None:
    """A new manager in Cooldown, anchored at the owning state's entry."""
    stm = TransitionManager(
        epoch=fold.next_epoch(),
        phase=Phase.COOLDOWN,
        phase_entered_at=fold.now,
        last_rescale=fold.now,
        cooldown_ms=cooldown_ms,
        stabilization_ms=stabilization_ms,
        max_delay_ms=max_delay_ms,
    )
    fold.set_state(stm=stm)
    track_phase(fold)
    _schedule_relatively(fold, COOLDOWN_END, stm.last_rescale, cooldown_ms)


def on_change(fold: Fold, owner: TransitionContext, new_resource_driven: bool) -> None:
    stm = _stm(fold)
    if stm.phase is Phase.COOLDOWN:
        _change_in_cooldown(fold, owner, stm, new_resource_driven)
    elif stm.phase is Phase.IDLING:
        assessment = owner.assess(fold)
        if assessment.sufficient:
            _record_new_resources(fold, owner, new_resource_driven)
            fold.decide(DecisionKind.CHANGE_RECORDED, f"{assessment.message}; stabilizing")
            _to_stabilizing(fold, owner, fold.now)
        else:
            fold.decide(DecisionKind.CHANGE_IGNORED, f"idling: {assessment.message}")
    elif stm.phase is Phase.STABILIZING:
        fold.set_state(stm=replace(stm, last_change=fold.now))
        _schedule_evaluation(fold)
        owner.request_active_checkpoint(fold)
        until = (stm.first_change or fold.now) + stm.stabilization_ms
        fold.decide(DecisionKind.CHANGE_RECORDED, f"stabilizing until {until}")
    else:
        fold.decide(DecisionKind.CHANGE_IGNORED, f"change ignored in {stm.phase}")


def on_trigger(fold: Fold, owner: TransitionContext) -> None:
    stm = _stm(fold)
    if stm.phase is Phase.COOLDOWN:
        until = stm.last_rescale + stm.cooldown_ms
        fold.decide(DecisionKind.TRIGGER_IGNORED, f"in cooldown until {until}")
    elif stm.phase is Phase.STABILIZING:
        _transition_if_desired(fold, owner, "trigger")
    elif stm.phase is Phase.STABILIZED:
        assessment = owner.assess(fold)
        if assessment.sufficient:
            fold.decide(DecisionKind.RESCALE_TRIGGERED, f"stabilized: {assessment.message}")
            _to_transitioning(fold, owner)
        else:
            fold.decide(
                DecisionKind.TRIGGER_IGNORED, f"stabilized but {assessment.message}; idling"
            )
            _to_idling(fold, owner)
    else:
        fold.decide(DecisionKind.TRIGGER_IGNORED, f"trigger ignored in {stm.phase}")


def on_timer(fold: Fold, owner: TransitionContext, action: str) -> None:
    stm = _stm(fold)
    if action == COOLDOWN_END:
        if stm.first_change is None:
            _to_idling(fold, owner)
        else:
            _to_stabilizing(fold, owner, stm.first_change)
    elif action == STABILIZED:
        _to_stabilized(fold, owner, stm.first_change if stm.first_change is not None else fold.now)
    elif action == EVALUATE:
        fold.set_state(stm=replace(stm, evaluation_scheduled=False))
        _transition_if_desired(fold, owner, "max-trigger-delay evaluation")
    elif action == STABILIZED_TRIGGER:
        on_trigger(fold, owner)
    else:
        raise InvariantError(f"unknown transition-manager action {action}")


def _change_in_cooldown(
    fold: Fold, owner: TransitionContext, stm: TransitionManager, new_resource_driven: bool
) -> None:
    until = stm.last_rescale + stm.cooldown_ms
    if stm.first_change is not None:
        fold.decide(
            DecisionKind.CHANGE_IGNORED, f"in cooldown until {until}; a change is already recorded"
        )
        return
    assessment = owner.assess(fold)
    if not assessment.sufficient:
        fold.decide(DecisionKind.CHANGE_IGNORED, f"in cooldown until {until}: {assessment.message}")
        return
    fold.set_state(stm=replace(stm, first_change=fold.now))
    _record_new_resources(fold, owner, new_resource_driven)
    fold.decide(
        DecisionKind.CHANGE_RECORDED,
        f"{assessment.message}; in cooldown until {until}, then stabilizing",
    )


def _transition_if_desired(fold: Fold, owner: TransitionContext, cause: str) -> None:
    assessment = owner.assess(fold)
    stm = _stm(fold)
    if assessment.desired:
        fold.decide(DecisionKind.RESCALE_TRIGGERED, f"{cause}: {assessment.message}")
        _to_transitioning(fold, owner)
    else:
        until = (stm.first_change or fold.now) + stm.stabilization_ms
        fold.decide(
            DecisionKind.TRIGGER_IGNORED,
            f"{cause}: desired resources not met ({assessment.message}); stabilizing until {until}",
        )


def _record_new_resources(fold: Fold, owner: TransitionContext, new_resource_driven: bool) -> None:
    """recordRescaleForNewAvailableResources: only Executing, only for new slots."""
    if owner.records_new_resources and new_resource_driven:
        open_new_resource_rescale(fold)


def _progress(fold: Fold, phase: Phase, **changes: Any) -> TransitionManager:
    stm = _stm(fold)
    if stm.phase is Phase.TRANSITIONING:
        raise InvariantError("the state transition has already been triggered")
    new = replace(stm, epoch=fold.next_epoch(), phase=phase, phase_entered_at=fold.now, **changes)
    fold.set_state(stm=new)
    fold.decide(
        DecisionKind.PHASE_TRANSITION, f"{stm.phase} -> {phase}", source=stm.phase, target=phase
    )
    track_phase(fold)
    return new


def _to_idling(fold: Fold, owner: TransitionContext) -> None:
    _progress(fold, Phase.IDLING, first_change=None, evaluation_scheduled=False)
    if owner.records_new_resources:  # Idling in Executing ends what did not rescale
        end_without_change(fold)


def _to_stabilizing(fold: Fold, owner: TransitionContext, first_change: int) -> None:
    stm = _progress(
        fold,
        Phase.STABILIZING,
        first_change=first_change,
        last_change=first_change,
        evaluation_scheduled=False,
    )
    _schedule_relatively(fold, STABILIZED, first_change, stm.stabilization_ms)
    _schedule_evaluation(fold)
    owner.request_active_checkpoint(fold)


def _to_stabilized(fold: Fold, owner: TransitionContext, first_change: int) -> None:
    stm = _progress(fold, Phase.STABILIZED, first_change=first_change)
    _schedule_relatively(fold, STABILIZED_TRIGGER, first_change, stm.max_delay_ms)
    owner.request_active_checkpoint(fold)


def _to_transitioning(fold: Fold, owner: TransitionContext) -> None:
    _progress(fold, Phase.TRANSITIONING)
    owner.transition_to_subsequent_state(fold)


def _schedule_evaluation(fold: Fold) -> None:
    stm = _stm(fold)
    if stm.evaluation_scheduled:
        return
    fold.set_state(stm=replace(stm, evaluation_scheduled=True))
    anchor = stm.last_change if stm.last_change is not None else fold.now
    _schedule_relatively(fold, EVALUATE, anchor, stm.max_delay_ms)


def _schedule_relatively(fold: Fold, action: str, start: int, timeout_ms: int) -> None:
    """scheduleRelativelyTo: after max(0, timeout - (now - start)), guarded by the phase."""
    if start > fold.now:
        raise InvariantError(f"the start of a timeout ({start}) lies in the future ({fold.now})")
    fold.run_if_phase(action, max(0, timeout_ms - (fold.now - start)))


def _stm(fold: Fold) -> TransitionManager:
    stm = fold.state.stm
    if stm is None:
        raise InvariantError(f"{fold.state.name} has no state transition manager")
    return stm
