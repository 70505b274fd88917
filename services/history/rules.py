"""The planner's four rules: one job's rescales (jobview.JobView) in, a decision or None out.

Pure; the thresholds are jobview.PlannerConfig's, the rules are planner.py's module doc.
"""

from __future__ import annotations

from itertools import pairwise

from services.history.jobview import (
    COMPLETED,
    DEFAULT_COOLDOWN_MS,
    MIN_RAISED_COOLDOWN_MS,
    PROVISION,
    RAISE_COOLDOWN,
    RELEASE,
    WAITING_FOR_RESOURCES,
    Decision,
    JobView,
    PlannerConfig,
    Rescale,
)


def provision_waiting(job: JobView, now_ms: int, config: PlannerConfig) -> Decision | None:
    """A rescale stuck in WaitingForResources below its minimum, for the grace period."""
    for rescale in reversed(job.in_progress):
        available, minimal = rescale.available_slots, rescale.total_minimal_required_slots
        desired, entered = rescale.total_desired_slots, rescale.current_state_enter_ms
        if (
            rescale.current_state != WAITING_FOR_RESOURCES
            or not rescale.current_state_open
            or None in (available, minimal, desired, entered)
        ):
            continue
        assert available is not None and minimal is not None and desired is not None
        assert entered is not None
        waited = now_ms - entered
        if available >= minimal or waited < config.provision_grace_ms:
            continue
        amount = min(desired - available, config.max_slots_per_job - available)
        if amount <= 0:
            continue
        reason = (
            f"Rescale {rescale.rescale_uuid} has waited for resources for {_for_people(waited)} "
            f"with {available} of the {minimal} slots it needs at least; provision {amount} "
            f"slots toward the {desired} desired."
        )
        return Decision(PROVISION, amount, reason, (rescale,), rescale, (available, desired))
    return None


def _for_people(ms: int) -> str:
    """A waiting time in the unit a person would use."""
    for unit, size in (("days", 86_400_000), ("h", 3_600_000), ("min", 60_000)):
        if ms >= 2 * size:
            return f"{ms // size} {unit}"
    return f"{ms // 1000} s"


def _newer_in_progress(job: JobView, than: Rescale) -> bool:
    return any(r.start_timestamp_ms >= than.start_timestamp_ms for r in job.in_progress)


def provision_below_desired(job: JobView, now_ms: int, config: PlannerConfig) -> Decision | None:
    """The job settled on fewer slots than it wants, and nothing is under way to fix it."""
    latest = job.latest_terminated
    if latest is None or latest.terminal_state != COMPLETED or latest.end_timestamp_ms is None:
        return None
    post, desired = latest.total_post_rescale_slots, latest.total_desired_slots
    available = latest.available_slots
    if post is None or desired is None or available is None or post >= desired:
        return None
    if (latest.reactive_mode and not config.provision_reactive) or _newer_in_progress(job, latest):
        return None
    if now_ms - latest.end_timestamp_ms < config.provision_grace_ms:
        return None
    amount = min(desired - available, config.max_slots_per_job - available)
    if amount <= 0:
        return None
    reason = (
        f"Rescale {latest.rescale_uuid} completed with {post} of {desired} desired slots "
        f"({available} available); provision {amount} slots."
    )
    return Decision(PROVISION, amount, reason, (latest,), latest, (available, desired))


def release_idle(job: JobView, now_ms: int, config: PlannerConfig) -> Decision | None:
    """Slots the job has held unused since its last completed rescale, for the grace period."""
    latest = job.latest_terminated
    if latest is None or latest.terminal_state != COMPLETED or latest.end_timestamp_ms is None:
        return None
    post, available = latest.total_post_rescale_slots, latest.available_slots
    if post is None or available is None or available <= post or job.in_progress:
        return None
    desired = latest.total_desired_slots
    if desired is not None and post < desired and not latest.reactive_mode:
        return None
    if now_ms - latest.end_timestamp_ms < config.release_grace_ms:
        return None
    idle = available - post
    reason = (
        f"Rescale {latest.rescale_uuid} completed using {post} of {available} available "
        f"slots; release the {idle} idle slots."
    )
    return Decision(RELEASE, idle, reason, (latest,), latest, (available, post))


def flapping(job: JobView, window_ms: int) -> tuple[int, list[Rescale]]:
    """The flapping score and the COMPLETED rescales of the window (see `aggregates.py`)."""
    if not job.completed:
        return 0, []
    anchor = max(r.end_timestamp_ms or 0 for r in job.completed)
    window = [r for r in job.completed if (r.end_timestamp_ms or 0) >= anchor - window_ms]
    return reversals(window), window


def reversals(rescales: list[Rescale]) -> int:
    """How often the total post-rescale slots changed direction (up <-> down)."""
    slots = [r.total_post_rescale_slots for r in rescales if r.total_post_rescale_slots is not None]
    directions = [(b > a) - (b < a) for a, b in pairwise(slots)]
    moves = [d for d in directions if d != 0]
    return sum(1 for a, b in pairwise(moves) if a != b)


def raise_cooldown(job: JobView, config: PlannerConfig) -> Decision | None:
    """The job keeps rescaling up and down: ask for a longer cooldown after rescaling.

    Only the rescales recorded with the job's current cooldown count, so every
    raise needs new flapping under the cooldown it replaces: failovers right
    after a raise (which no cooldown prevents) do not raise it again at once.
    """
    current = job.newest.cooldown_ms
    current = DEFAULT_COOLDOWN_MS if current is None else current
    _, window = flapping(job, config.flap_window_ms)
    window = [r for r in window if (r.cooldown_ms or DEFAULT_COOLDOWN_MS) == current]
    score = reversals(window)
    if score < config.flap_threshold or current >= config.max_cooldown_ms:
        return None
    new = min(max(2 * current, MIN_RAISED_COOLDOWN_MS), config.max_cooldown_ms)
    reason = (
        f"Job {job.newest.job_id} reversed its scaling direction {score} times within an "
        f"hour of completed rescales under its cooldown of {current} ms; raise it to {new} ms."
    )
    newest = max(window, key=lambda r: (r.updated_at_ms, r.end_timestamp_ms or 0))
    return Decision(RAISE_COOLDOWN, new, reason, tuple(window), newest, (current,))
