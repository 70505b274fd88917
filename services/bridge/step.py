"""One poll of one Flink job, folded into what to send: `observe(offset, answers, now)`.

Pure: Flink's parsed answers and the job's source offset in; the rescale records, the
scalefold input events (under `flink_job_key`) and the new offset out; time is an
argument. What REST cannot show is approximated here, and docs/bridge.md says how:
- a TaskManager's registration instant: TaskManagers listed at the job's first
  observation are registered at the job's start, later ones when a poll first lists them;
  each such input carries the window it is known to lie in (`Window`: after the last
  answer that did not show it, by the first that did), as does a requirements change
  and a loss seen as absence, so that what cannot be decided is known;
- a failure caused by a lost TaskManager is not sent as a task failure: the scheduler
  derives it from `TaskManagerLost`, as Flink derives it from the lost heartbeat. Such a
  failure is an entry of a TaskManager no longer listed, or one whose message names it
  by id ("TaskManager with id X is no longer reachable", "task manager '... [ X ]'")
  or by address (an RPC to it that found no recipient). Flink 2.3's adaptive scheduler
  records its failures without a task, so each is sent as a global failure: one caused by
  the loss after the prediction restarted for the loss would fail the predicted job;
- a TaskManager's loss: at Flink's failover for it, from the exception history (held
  back, `_held`, until an answer that would show it has been read), else at the end of
  the listing's window that no longer showed it. Flink's graph cannot finish cancelling
  before its JobMaster has released the lost TaskManager's slots, so the restart a
  failure starts ends without them (docs/flink-conformance.md, "Against a real Flink
  2.3.0"); the loss stamped at the poll would let the scheduler restart on them first.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from services.bridge import rescales as rs
from services.bridge import translate as tr
from services.bridge.offsets import JobOffset, RescaleOffset
from services.contracts import jobconfig as k
from services.contracts.events import (
    Event,
    JobEventKind,
    JobLifecycle,
    JobSubmitted,
    Requirement,
    RequirementsUpdated,
    TaskManagerLost,
    TaskManagerRegistered,
    TimerFired,
    VertexSpec,
    Window,
)

DEFAULT_REFRESH_MS: Final = 3_000
"""Flink's `web.refresh-interval`: how old a cached answer of /jobs/:jid, /exceptions and
/checkpoints may be (ExecutionGraphCache), when /config does not say."""
CLOCK_MARGIN_MS: Final = 500
"""What the job's clock stays behind besides the refresh interval (the requests' own time)."""
OFFER_WAIT_MS: Final = 15_000
"""How long after its listing a new TaskManager whose log shows no offer of its slots to
the job yet is held back (and the job's clock with it) for that offer (slotlog.py). One
the job does not take (its upper bounds met) is registered then, at the poll."""
SSG_NAME_WAIT_MS: Final = 30_000
"""How long after a job's start the bridge waits for its first rescale's details (the only
place REST names the slot-sharing groups) before it submits the job with the groups' ids."""

TERMINAL: Final = {
    "FINISHED": (JobEventKind.FINISHED, True),
    "CANCELED": (JobEventKind.CANCEL, True),
    "CANCELLING": (JobEventKind.CANCEL, True),
    "FAILED": (JobEventKind.GLOBAL_FAILURE, False),
    "SUSPENDED": (JobEventKind.SUSPEND, True),
}
"""Flink's terminal (or terminating) job states, and the input each becomes, once."""
UNRECOVERABLE_STATES: Final = frozenset({"FAILING", "FAILED"})
LOST_TASK_MANAGER: Final = re.compile(
    r"TaskManager with id (\S+?)\.?(?:\s|$)|task manager '[^']*\[ (\S+) \] ?'"
)
"""How Flink's exceptions name a TaskManager by its id: the JobMaster's heartbeat listener
("TaskManager with id %s is no longer reachable.", "Heartbeat of ... timed out.") and a
task's lost connection, each of the network stack's messages ("Connection unexpectedly
closed by remote task manager 'host/ip:port [ id ] '", "Lost connection to task manager
'... [ id ] '", "Fatal error at remote task manager '... [ id ] '")."""
UNREACHABLE_TASK_MANAGER: Final = re.compile(
    r"to recipient \[Actor\[(pekko(?:\.ssl)?\.tcp://\S+?/user/rpc/taskmanager_\d+)(?:#-?\d+)?\]\]"
)
"""How an RPC to a TaskManager that is gone fails (RecipientUnreachableException: "Could
not send message [...submitTask...] from sender [...] to recipient [Actor[<its path>]]";
Flink 2.3 adds the actor's uid, `[Actor[<its path>#-1618999474]]`)."""


@dataclass(frozen=True)
class Left:
    """A TaskManager the listing no longer shows: what it was listed as, and the window it
    had appeared in (None: at the poller's first listing)."""

    view: tr.TaskManagerView
    appeared: Window | None


@dataclass(frozen=True)
class Answers:
    """What one poll read of one job; None where the answer was missing or unusable."""

    job: Mapping[str, Any]
    task_managers: tuple[tr.TaskManagerView, ...] | None
    job_answered_ms: int | None = None
    """When `job`'s answer arrived (the bridge's wall clock): a workload sample's instant."""
    requirements: Any = None
    rescales_config: Any = None
    job_config: Any = None
    checkpoints_config: Any = None
    checkpointing_known: bool = False  # the checkpoints/config answer (or its 404) arrived
    exceptions: Any = None
    checkpoints: Any = None  # /jobs/:jid/checkpoints
    history: Sequence[Mapping[str, Any]] | None = None  # None: disabled or unavailable
    history_enabled: bool = True
    details: Mapping[str, Any] = field(default_factory=dict)
    requirements_window: Window | None = None  # since the previous requirements answer
    appeared: Mapping[str, Window | None] = field(default_factory=dict)  # poll.Presence
    departed: Mapping[str, Window] = field(default_factory=dict)
    left: Mapping[str, Left] = field(default_factory=dict)  # poll.Presence, by departure
    flink_version: str | None = None  # the JobManager's (/config), if known
    refresh_ms: int = DEFAULT_REFRESH_MS  # its web.refresh-interval (/config)
    placement: Placement | None = None  # the poller's last reading of where tasks run
    cluster_restart: Mapping[str, str] = field(default_factory=dict)  # /jobmanager/config
    offers: Mapping[str, Window] = field(default_factory=dict)
    """New TaskManagers' slot offers to the job, from their logs (poll, slotlog.py)."""
    awaiting_offer: frozenset[str] = frozenset()
    """New TaskManagers whose logs show no offer to the job yet."""
    held: frozenset[str] = frozenset()
    """The TaskManagers the job's observations have registered since the poller started
    (memory only: poll.ClusterPoller._remember)."""


@dataclass(frozen=True)
class Placement:
    """The TaskManagers holding a job's tasks, as an answer asked at `asked` (wall ms)
    showed them; read only when Flink's cached graph was the one running (current)."""

    hosts: frozenset[str]
    asked: int


def placement_current(
    history: Sequence[Mapping[str, Any]] | None, asked: int, refresh_ms: int
) -> bool:
    """Whether an answer asked at `asked` shows the running graph's placement: the last
    rescale that ended (entered Executing, its graph deployed) did so more than Flink's
    cache's age (its web.refresh-interval, and a margin) before; one in progress has
    deployed nothing yet. Unknown without the rescale history."""
    if not history:
        return False
    since = asked - refresh_ms - CLOCK_MARGIN_MS
    return all(ended <= since for ended in _ends(history))


def hosted(tm: str, answers: Answers, before: int) -> bool | None:
    """Whether `tm` held the job's tasks when it was lost (by `before`), as the placement
    last read shows; None when unknown: not read, or a rescale ended (a graph deployed)
    between that answer's graph and `before` (the tasks may have moved)."""
    read, history = answers.placement, answers.history
    if read is None or history is None:
        return None
    since = read.asked - answers.refresh_ms - CLOCK_MARGIN_MS
    if any(since < ended <= before for ended in _ends(history)):
        return None
    return tm in read.hosts


def _ends(history: Sequence[Mapping[str, Any]]) -> list[int]:
    """When each ended rescale of `history` ended."""
    return [
        e["endTimestampInMillis"]
        for e in history
        if not rs.in_progress(e) and isinstance(e["endTimestampInMillis"], int)
    ]


@dataclass(frozen=True)
class Observed:
    offset: JobOffset
    rescales: tuple[dict[str, Any], ...]
    events: tuple[Event, ...]
    problems: tuple[tuple[str, str], ...]  # (which answer, why it was unusable)


def details_to_fetch(offset: JobOffset, history: Sequence[Mapping[str, Any]]) -> list[str]:
    """The rescales whose details this poll needs: not yet sent in final form, and before the
    job is submitted also its first rescale (the slot-sharing groups' names are there)."""
    uuids = rs.wanted(history, offset.finished_rescales())
    if not offset.submitted and history and history[0]["rescaleUuid"] not in uuids:
        uuids.insert(0, history[0]["rescaleUuid"])
    return uuids


def observe(offset: JobOffset, answers: Answers, now: int) -> Observed:
    """The records and events one poll of a job gives, and the job's offset after them."""
    problems: list[tuple[str, str]] = []
    state = answers.job.get("state")
    name = answers.job.get("name")
    offset = replace(offset, job_name=name if isinstance(name, str) else offset.job_name)
    offset, records = _rescales(offset, answers, now, problems)
    events: list[Event] = []
    if not offset.submitted:
        offset, events = _submit(offset, answers, now, problems)
    if offset.submitted and offset.terminal is None:
        offset, more, cap = _changes_awaiting(offset, answers, now, problems)
        events += more
        offset, events = _advanced(offset, answers, now, events, cap)
    offset = replace(offset, job_state=state if isinstance(state, str) else None, updated_at=now)
    events.sort(key=lambda e: e.timestamp)  # stable: same-time events keep their order
    return Observed(offset, tuple(records), tuple(events), tuple(problems))


def vanished(offset: JobOffset, now: int) -> Observed | None:
    """A job the JobManager no longer lists (a JobManager restarted without HA loses its
    jobs, as Flink suspends them): SUSPEND once, if the scheduler was told of it and not
    yet of its end."""
    if not offset.submitted or offset.terminal is not None:
        return None
    event = JobLifecycle(
        offset.key, now, JobEventKind.SUSPEND, True, "the JobManager lists it no more"
    )
    return Observed(replace(offset, terminal="VANISHED", updated_at=now), (), (event,), ())


def _rescales(
    offset: JobOffset, answers: Answers, now: int, problems: list[tuple[str, str]]
) -> tuple[JobOffset, list[dict[str, Any]]]:
    records = []
    for uuid, details in answers.details.items():
        fingerprint = rs.digest(details)
        sent = offset.rescale(uuid)
        if sent is not None and sent.digest == fingerprint:
            continue  # an in-progress rescale that has not changed since
        revision = 1 if sent is None else sent.revision + 1
        try:
            record = rs.record(
                offset.cluster,
                offset.job_id,
                offset.job_name,
                details,
                revision=revision,
                observed_at=now,
            )
        except tr.MalformedAnswerError as error:
            problems.append((f"rescales/details/{uuid}", str(error)))
            continue
        final = not rs.in_progress(details)
        offset = offset.with_rescale(RescaleOffset(uuid, revision, fingerprint, final))
        records.append(record)
    if answers.history is not None:
        offset = offset.keeping_rescales(frozenset(e["rescaleUuid"] for e in answers.history))
    return offset, records


def _ssg_names(answers: Answers) -> dict[str, str] | None:
    """Slot-sharing group id -> name from the first rescale's details; None: wait for them."""
    history = answers.history or ()
    first = answers.details.get(history[0]["rescaleUuid"]) if history else None
    if isinstance(first, Mapping) and isinstance(first.get("vertices"), Mapping):
        return {
            str(v.get("slotSharingGroupId")): str(v.get("slotSharingGroupName"))
            for v in first["vertices"].values()
            if isinstance(v, Mapping) and v.get("slotSharingGroupName")
        }
    return None


def _submit(
    offset: JobOffset, answers: Answers, now: int, problems: list[tuple[str, str]]
) -> tuple[JobOffset, list[Event]]:
    """JobSubmitted (+ the TaskManagers already there, + requirements off the defaults)."""
    job = answers.job
    start = job.get("start-time")
    if not isinstance(start, int) or answers.requirements is None or answers.task_managers is None:
        return offset, []
    if not answers.checkpointing_known or answers.job_config is None:
        return offset, []
    names = _ssg_names(answers)
    if names is None and answers.history_enabled and now - start < SSG_NAME_WAIT_MS:
        return offset, []
    try:
        bounds = tr.requirements(answers.requirements)
        initial = _initial(answers, bounds)
        submitted = _submitted(offset, answers, start, names or {}, initial)
    except tr.MalformedAnswerError as error:
        problems.append(("job", str(error)))
        return offset, []
    offering = _offering(answers.task_managers, ())
    events: list[Event] = [submitted]
    events += [_at_submission(offset, answers, tm, start) for tm in offering]
    if any(q.lower != 1 for q in initial):
        events.append(RequirementsUpdated(offset.key, start, initial))
    if initial != bounds:  # changed between the start and this poll: when, unknown
        events.append(RequirementsUpdated(offset.key, now, bounds, Window(start, now)))
    offset = replace(
        offset,
        submitted=True,
        task_managers=tuple(tm.id for tm in offering),
        requirements=bounds,
        last_exception_ms=start,
        checkpoint_floor=now,
        advanced_to=start,
    )
    return offset, events


def _initial(answers: Answers, bounds: tuple[Requirement, ...]) -> tuple[Requirement, ...]:
    """The requirements the job started with: today's, unless Flink's record of its initial
    schedule shows other upper bounds (desiredParallelism; a vertex's upper bound of -1
    is its max parallelism there): changed before the bridge first saw the job, they
    were those."""
    history = answers.history or ()
    first = answers.details.get(history[0]["rescaleUuid"]) if history else None
    if not isinstance(first, Mapping) or first.get("triggerCause") != "INITIAL_SCHEDULE":
        return bounds
    vertices = first.get("vertices")
    desired = {
        str(v.get("jobVertexId")): v.get("desiredParallelism")
        for v in (vertices.values() if isinstance(vertices, Mapping) else ())
        if isinstance(v, Mapping)
    }
    return tuple(
        replace(q, lower=min(q.lower, wanted), upper=wanted)
        if isinstance(wanted := desired.get(q.vertex_id), int) and q.upper not in (-1, wanted)
        else q
        for q in bounds
    )


def _at_submission(
    offset: JobOffset, answers: Answers, view: tr.TaskManagerView, start: int
) -> TaskManagerRegistered:
    """A TaskManager listed at the job's submission: the job's when its slots were offered
    to it (its log: `answers.offers`), else from the job's start (`_since_start`). A
    standing TaskManager's slots reach a starting job once its JobMaster has declared what
    it needs and the ResourceManager has allocated them: 0.1-2 s after the start here,
    which the first schedule's stabilization waits from."""
    offer = answers.offers.get(view.id)
    if offer is not None and offered_at(offer) > start:
        window = Window(max(offer.after, start), offer.by)
        return TaskManagerRegistered(
            offset.key, offered_at(offer), view.id, view.slots, view.profile, window
        )
    since = _since_start(answers, view.id, start)
    return TaskManagerRegistered(offset.key, start, view.id, view.slots, view.profile, since)


def offered_at(offer: Window) -> int:
    """When a TaskManager's slots reached the job, in the window its log gives (slotlog.py):
    its start, the offer's sending. The JobMaster takes an offer as it arrives; the
    TaskManager logs the acceptance when the answer is back, which a busy JobMaster sends
    late: in a demo run beside two hogs (2026-12-05) Flink's scheduler moved to
    Stabilizing on the new slots 29 ms after the offer line and had restarted the job
    when the TaskManager logged their activation, 0.7 s after it. Stamped at the window's
    end, the prediction missed the checkpoint Flink rescaled on, and rescaled 4.8 s later."""
    return offer.after + 1


def _since_start(answers: Answers, tm: str, start: int) -> Window | None:
    """A TaskManager listed at the job's submission is the job's from its start, unless it
    may have come after: then it lies in (start - 1, when it was first listed]."""
    window = answers.appeared.get(tm)
    if window is None or window.by <= start:
        return None
    return Window(max(window.after, start - 1), window.by)


def _within(window: Window | None, at: int) -> Window | None:
    """The window of an input stamped `at`, if it holds that instant (an observation made
    in an earlier poll than the input's does not describe it)."""
    return window if window is not None and window.after < at <= window.by else None


def _seen(window: Window | None, last_poll: int, now: int) -> tuple[int, Window | None]:
    """When a TaskManager's coming or going is stamped, and the window it lies in: the end
    of the listing's window that first showed it (a listing between polls may have seen
    it since the last poll), else the poll. A window from before the job's last poll is
    not this change's (the TaskManager came and went unseen by this job's polls)."""
    if window is not None and last_poll < window.by <= now:
        return window.by, window
    return now, _within(window, now)


def _submitted(
    offset: JobOffset,
    answers: Answers,
    start: int,
    names: Mapping[str, str],
    bounds: tuple[Requirement, ...],
) -> JobSubmitted:
    upper = {q.vertex_id: q.upper for q in bounds}
    vertices = []
    for i, v in _from_sources(tr.field(answers.job, "vertices", list, "job"), answers.job):
        where = f"job.vertices[{i}]"
        vid = tr.field(v, "id", str, where)
        ssg = tr.field(v, "slotSharingGroupId", str, where)
        maximum = tr.field(v, "maxParallelism", int, where)
        vertices.append(
            VertexSpec(
                id=vid,
                name=tr.field(v, "name", str, where),
                ssg_id=ssg,
                ssg_name=names.get(ssg, ssg),
                parallelism=upper.get(vid, tr.field(v, "parallelism", int, where)),
                max_parallelism=None if maximum < 1 else maximum,
            )
        )
    return JobSubmitted(
        job_id=offset.key,
        timestamp=start,
        job_name=offset.job_name or "",
        vertices=tuple(vertices),
        checkpoint_interval_ms=tr.checkpoint_interval(answers.checkpoints_config),
        configuration=tuple(sorted(_configuration(offset.cluster, answers).items())),
    )


def _from_sources(vertices: list[Any], job: Mapping[str, Any]) -> list[tuple[int, Any]]:
    """The job's vertices (with their places in the answer) in topological order from the
    sources, by the plan's inputs; ties in the answer's order. Flink builds its map of
    slot-sharing groups by iterating the job graph's vertices, sources first, and the
    group that comes last in it gets a spare slot where two groups hash alike
    (allocator.flink_order); /jobs/:jid lists them in another order (the Writer first for
    the sample job).

    Until a job's first execution graph is built (while it waits for resources, as every
    job does for the submission's resource stabilization), Flink 2.3 answers from a sparse
    archived graph: its plan has no nodes and it lists the vertices in the job graph's
    creation order, the sinks first (the graph generator makes a chain's downstream
    vertices before its head); reversed, they come from the sources, as a plan orders them.
    Taken as listed instead, the spare slot went to the other group in 3 of 12 demo runs
    (the two groups hashed alike in exactly those: 2026-12-03, docs/flink-conformance.md).
    A plan that names other vertices than the answer, or none, leaves the answer's order."""
    listed = list(enumerate(vertices))
    ids = [str(v.get("id")) if isinstance(v, Mapping) else "" for v in vertices]
    plan = job.get("plan")
    if isinstance(plan, Mapping) and plan.get("nodes") == []:
        return listed[::-1]  # the sparse graph's
    inputs = _plan_inputs(job)
    if set(ids) != set(inputs):
        return listed
    placed: list[tuple[int, Any]] = []
    done: set[str] = set()
    while len(placed) < len(listed):
        ready = [(i, v) for i, v in listed if ids[i] not in done and inputs[ids[i]] <= done]
        if not ready:  # a cycle: not a plan Flink makes
            return listed
        placed.append(ready[0])
        done.add(ids[ready[0][0]])
    return placed


def _plan_inputs(job: Mapping[str, Any]) -> dict[str, set[str]]:
    """Each plan node's id -> the ids of the nodes it reads from ({} without a plan)."""
    plan = job.get("plan")
    nodes = plan.get("nodes") if isinstance(plan, Mapping) else None
    inputs: dict[str, set[str]] = {}
    for node in nodes if isinstance(nodes, list) else []:
        if isinstance(node, Mapping) and isinstance(node.get("id"), str):
            wired = node.get("inputs")
            inputs[node["id"]] = {
                str(i["id"])
                for i in (wired if isinstance(wired, list) else [])
                if isinstance(i, Mapping) and "id" in i
            }
    return inputs


def _offering(
    listed: tuple[tr.TaskManagerView, ...], known: tuple[str, ...]
) -> list[tr.TaskManagerView]:
    """The listed TaskManagers not known yet that offer slots. A TaskManager registers
    with the ResourceManager before its first slot report: until then /taskmanagers
    lists it with slotsNumber 0, and it is announced at the poll that sees its slots
    (the scheduler refuses a TaskManager of no slots). One known already stays known."""
    return [tm for tm in listed if tm.id not in known and tm.slots > 0]


def _configuration(cluster: str, answers: Answers) -> dict[str, str]:
    entries = {k.RUNTIME_MODE: "simulated", k.OBSERVED_CLUSTER: cluster}
    if answers.rescales_config is not None:
        entries.update(tr.scheduler_settings(answers.rescales_config))
    entries.update(tr.job_restart_strategy(answers.job_config) or answers.cluster_restart)
    entries.update(tr.min_pause(answers.checkpoints_config))
    if answers.flink_version is not None and not tr.triggers_active_checkpoints(
        answers.flink_version
    ):
        entries[k.ACTIVE_CHECKPOINT] = "false"
    return entries


def _changes_awaiting(
    offset: JobOffset, answers: Answers, now: int, problems: list[tuple[str, str]]
) -> tuple[JobOffset, list[Event], int | None]:
    """`_changes`, with the new TaskManagers `_awaiting` says to hold back left out, and
    the instant the job's clock stays at or before while they are (the earliest their
    slots' offer may lie at). Not held when another input of this poll lies after that
    instant: the scheduler folds inputs in the order sent."""
    proven = _proven(offset, answers)
    awaiting = {tm: w for tm, w in _awaiting(offset, answers, now).items() if tm not in proven}
    if awaiting:
        found: list[tuple[str, str]] = []
        cap = min(w.after for w in awaiting.values())
        held, events = _changes(
            offset, answers, now, found, awaiting=frozenset(awaiting), cap=cap, proven=proven
        )
        if all(e.timestamp <= cap for e in events):
            problems += found
            return held, events, cap
    return (*_changes(offset, answers, now, problems, proven=proven), None)


def _proven(offset: JobOffset, answers: Answers) -> dict[str, int]:
    """New TaskManagers (listed, or dropped by the listing since: `Answers.left`; never
    the job's, as its offsets named them: `Answers.held`) whose slots the exception
    history's new entries show reached the job, whatever their log says: an entry places
    a task of the job on one, or names one as lost (the JobMaster watches only the
    TaskManagers it took slots from; a task's connection or an RPC reaches only one that
    holds tasks). id -> the first such entry's instant. A TaskManager killed seconds
    after its offer answers no log request: beside two hogs (2026-12-06) the bridge never
    read the offer and held it back until the listing dropped it, so the job's failover
    for it was lost and the prediction scheduled without its slot."""
    if answers.exceptions is None or answers.task_managers is None:
        return {}
    try:
        new = _new_entries(offset, answers.exceptions)
    except tr.MalformedAnswerError:
        return {}  # `_failures` reports it
    views = [*answers.task_managers, *(gone.view for gone in answers.left.values())]
    by_path = {tm.path: tm.id for tm in views if tm.path}
    known = {*offset.task_managers, *offset.lost_task_managers, *answers.held}
    proven: dict[str, int] = {}
    for at, entry in new:
        for tm in (*_task_managers_of(entry), *_named_lost(entry, by_path)):
            if tm not in known and _appearance(answers, tm) is not None:
                proven.setdefault(tm, at)
    return proven


def _appearance(answers: Answers, tm: str) -> Window | None:
    """The window a TaskManager listed with slots appeared in, also one listed no more."""
    if tm in answers.appeared:
        return answers.appeared[tm]
    gone = answers.left.get(tm)
    return None if gone is None else gone.appeared


def _awaiting(offset: JobOffset, answers: Answers, now: int) -> dict[str, Window]:
    """The new TaskManagers to hold back, by the window their slots' offer lies in: those
    whose log shows no offer to the job yet (by their listing's window, for `OFFER_WAIT_MS`
    after it), and those offered after what this poll's answers are sure to show of the
    job (Flink caches its checkpoints and exceptions for up to its refresh interval: one
    that ended before the offer may first show in a later poll, and the scheduler folds
    inputs in the order sent). Held only while the job's clock is still before them. One
    the listing dropped while held is held on for Flink's refresh interval (and a margin)
    after that: an exceptions answer that names it (`_proven`) may still come, and Flink's
    heartbeat drops a killed TaskManager from the listing at the very instant its
    JobMaster fails the job over for it (the differential suite beside two hogs)."""
    horizon = now - answers.refresh_ms - CLOCK_MARGIN_MS
    waiting = {
        tm: window
        for tm in answers.awaiting_offer
        if (window := answers.appeared.get(tm)) is not None and now < window.by + OFFER_WAIT_MS
    }
    waiting |= {
        tm: offer
        for tm, offer in answers.offers.items()
        if horizon < offered_at(offer) and now < offer.by + OFFER_WAIT_MS
    }
    waiting |= {
        tm: gone.appeared
        for tm, gone in answers.left.items()
        if gone.appeared is not None
        and offset.advanced_to < gone.appeared.after
        and tm not in answers.held
        and (left := answers.departed.get(tm)) is not None
        and now < left.by + answers.refresh_ms + CLOCK_MARGIN_MS
    }
    waiting = {tm: w for tm, w in waiting.items() if tm not in offset.task_managers}
    if waiting and offset.advanced_to < min(w.after for w in waiting.values()):
        return waiting
    return {}


def _registered(
    offset: JobOffset,
    answers: Answers,
    view: tr.TaskManagerView,
    now: int,
    proven: Mapping[str, int],
) -> Event:
    """A new TaskManager, registered for the job when its slots were offered to it (its
    log: `answers.offers`), else when the listing showed it; one whose log showed no offer
    by this poll lies in (its listing's start, this poll]; one the exceptions show held
    the job's tasks (`proven`) before the first entry that does."""
    offer = answers.offers.get(view.id)
    window: Window | None
    if offer is None and view.id in proven and (listed := _appearance(answers, view.id)):
        shown = proven[view.id]
        at = max(offset.advanced_to + 1, min(listed.by, shown - 1))
        window = _within(Window(listed.after, shown), at)
    elif offer is not None:
        at = min(now, max(offset.advanced_to + 1, offered_at(offer)))
        window = offer if offer.after < at <= offer.by else Window(min(offer.after, at - 1), at)
    elif view.id in answers.awaiting_offer and (listed := answers.appeared.get(view.id)):
        at, window = now, Window(listed.after, now)  # may have been held since polls before
    else:
        at, window = _seen(answers.appeared.get(view.id), offset.updated_at, now)
    return TaskManagerRegistered(offset.key, at, view.id, view.slots, view.profile, window)


def _changes(
    offset: JobOffset,
    answers: Answers,
    now: int,
    problems: list[tuple[str, str]],
    *,
    awaiting: frozenset[str] = frozenset(),
    cap: int | None = None,
    proven: Mapping[str, int] | None = None,
) -> tuple[JobOffset, list[Event]]:
    """TaskManagers come and gone (bar those `awaiting` their slots' offer, while the job's
    clock stays at or before `cap`), requirements changed, failures, a terminal state."""
    events: list[Event] = []
    if answers.task_managers is not None:
        listed = {tm.id for tm in answers.task_managers}
        lost = set(offset.task_managers) - listed
        for tm in sorted(lost):
            at, window = _departure(answers.departed.get(tm), offset, now)
            held = hosted(tm, answers, window.after if window else at)
            events.append(
                TaskManagerLost(
                    offset.key, at, tm, "no longer listed by /taskmanagers", window, held
                )
            )
        events += _flapped(offset, answers, listed, now)
        gone = frozenset(offset.lost_task_managers) & listed  # lost by the JobMaster, still listed
        new = _offering(answers.task_managers, (*offset.task_managers, *gone, *awaiting))
        events += [_registered(offset, answers, view, now, proven or {}) for view in new]
        events += _gone_unseen(offset, answers, listed, now, proven or {})
        known = (set(offset.task_managers) & listed) | {tm.id for tm in new}
        offset = replace(
            offset, task_managers=tuple(sorted(known)), lost_task_managers=tuple(sorted(gone))
        )
    if answers.requirements is not None:
        try:
            bounds = tr.requirements(answers.requirements)
        except tr.MalformedAnswerError as error:
            problems.append(("resource-requirements", str(error)))
            bounds = offset.requirements
        if bounds != offset.requirements:
            window = _within(answers.requirements_window, now)
            events.append(RequirementsUpdated(offset.key, now, bounds, window))
            offset = replace(offset, requirements=bounds)
    before = offset
    offset, failures, named, failed_on = _failures(offset, answers, problems)
    events = [  # a task of the job failed there: it held tasks, whatever was read before
        replace(e, hosted_tasks=True)
        if isinstance(e, TaskManagerLost) and e.task_manager_id in failed_on
        else e
        for e in events
    ]
    if offset.last_exception_ms > before.last_exception_ms:
        first = _first_new_exception(before, answers)
        events = [  # Flink's own instant: exact
            replace(
                e,
                timestamp=_clamped(named.get(e.task_manager_id, first), before, now),
                window=None,
            )
            if isinstance(e, TaskManagerLost)
            else e
            for e in events
        ]
    else:
        offset, events = _held(offset, answers, now, events)
    holding = answers.task_managers is not None and bool(
        set(offset.task_managers) - {tm.id for tm in answers.task_managers}
    )
    waiting_after = offset.advanced_to if holding else None
    if cap is not None:  # sent now only up to where the job's clock stays while they are held
        waiting_after = cap if waiting_after is None else min(waiting_after, cap)
    offset, dropped = _lost_by_the_jobmaster(offset, _not_back(named, answers))
    offset, ended = _checkpoints(offset, answers, problems, waiting_after)
    events += dropped + failures + ended
    return _terminal(offset, answers, now, events)


def _gone_unseen(
    offset: JobOffset,
    answers: Answers,
    listed: set[str],
    now: int,
    proven: Mapping[str, int],
) -> list[Event]:
    """The TaskManagers `_proven` whose offer the bridge never read and that the listing
    dropped: registered, then lost at the first entry that showed them, having held tasks."""
    events: list[Event] = []
    for tm in sorted(proven.keys() - listed - set(offset.task_managers)):
        if (gone := answers.left.get(tm)) is None:
            continue
        joined = _registered(offset, answers, gone.view, now, proven)
        at = max(joined.timestamp, _clamped(proven[tm], offset, now))
        reason = "lost before its slots' offer was read (Flink's exceptions name it)"
        events += [joined, TaskManagerLost(offset.key, at, tm, reason, None, True)]
    return events


def _departure(window: Window | None, offset: JobOffset, now: int) -> tuple[int, Window | None]:
    """When a TaskManager no longer listed is stamped lost, and the window it lies in: the
    listing's, also one from before the job's last poll if the job's clock has not passed
    it (a loss held back for Flink's exceptions, `_held`), else as `_seen` says."""
    if window is not None and offset.advanced_to < window.by <= now:
        return window.by, window
    return _seen(window, offset.updated_at, now)


def _flapped(offset: JobOffset, answers: Answers, listed: set[str], now: int) -> list[Event]:
    """A known TaskManager the listing saw leave and come back (under the same id) since
    the job's last poll: lost and registered again, each at its listing's window (the
    loss's may lie before the last poll if the job's clock has not passed it: `_held`)."""
    events: list[Event] = []
    views = {tm.id: tm for tm in answers.task_managers or ()}
    for tm in sorted(set(offset.task_managers) & listed):
        left, back = answers.departed.get(tm), answers.appeared.get(tm)
        if left is None or back is None or not offset.updated_at < back.by <= now:
            continue
        if not (offset.advanced_to < left.by < back.by) or views[tm].slots <= 0:
            continue
        held = hosted(tm, answers, left.after)
        events += [
            TaskManagerLost(offset.key, left.by, tm, "left the listing and came back", left, held),
            TaskManagerRegistered(
                offset.key, back.by, tm, views[tm].slots, views[tm].profile, back
            ),
        ]
    return events


def _not_back(named: Mapping[str, int], answers: Answers) -> dict[str, int]:
    """The TaskManagers Flink's exceptions name as lost, bar those listed again since that
    instant (a TaskManager that came back under its id: `_flapped` sent both)."""
    return {
        tm: at
        for tm, at in named.items()
        if (back := answers.appeared.get(tm)) is None or back.after < at
    }


def _held(
    offset: JobOffset, answers: Answers, now: int, events: list[Event]
) -> tuple[JobOffset, list[Event]]:
    """Losses seen as absence from the listing, kept back (the TaskManager stays known, the
    job's clock stays before them: `_advanced`) until an exceptions answer that would show
    Flink's failover for them has been read: Flink fails a job over when a killed
    TaskManager's connections break, often seconds before the ResourceManager stops listing
    it, and its exception history has that instant, but cached for up to the refresh
    interval. Held while no new entry is read and `now` is within the refresh interval
    (and a margin) of the window's end; then sent at the window's end, with the window.
    Memory only: a restarted bridge finds the loss again, without the listing's window,
    and sends it at once.

    The job's inputs stay in time order around a held loss, as the scheduler folds them
    in the order sent: a checkpoint that ended after the job's clock waits with it
    (`_checkpoints`), and a poll with any other input (a TaskManager registered, the
    requirements changed) sends the loss at once, at the window's end, sorted with it."""
    if (
        any(not isinstance(e, TaskManagerLost) for e in events)
        or answers.job.get("state") in TERMINAL
    ):
        return offset, events
    wait = answers.refresh_ms + CLOCK_MARGIN_MS
    listed = {tm.id for tm in answers.task_managers or ()}
    held = {
        e.task_manager_id
        for e in events
        if isinstance(e, TaskManagerLost)
        and e.task_manager_id not in listed
        and e.window is not None
        and now < e.window.by + wait
    }
    if not held:
        return offset, events
    kept = [e for e in events if not (isinstance(e, TaskManagerLost) and e.task_manager_id in held)]
    return replace(offset, task_managers=tuple(sorted({*offset.task_managers, *held}))), kept


def _clamped(at: int, before: JobOffset, now: int) -> int:
    """An instant from Flink's exceptions, kept after the job's clock and by this poll."""
    return max(before.advanced_to + 1, min(now, at))


def _advanced(
    offset: JobOffset, answers: Answers, now: int, events: list[Event], cap: int | None = None
) -> tuple[JobOffset, list[Event]]:
    """The job's clock moved to what this poll has seen of it: `TimerFired` at the poll's
    instant less the age a cached answer may have (an exception or a checkpoint from
    before that is in this poll's answers; a later one may first show in the next poll's).
    The scheduler runs an observed job's timers by these, not by its wall clock: a
    deadline is met only once every input before it has been sent, however late a busy
    machine delivers them. Not sent when it would not move the clock. The poll's inputs
    are sorted by instant with it (observe), so those before it are folded first. It
    stays at or before `cap` while a new TaskManager waits for its slots' offer."""
    if offset.terminal is not None:
        return offset, events
    at = now - answers.refresh_ms - CLOCK_MARGIN_MS
    if cap is not None:
        at = min(at, cap)
    if at <= offset.advanced_to:
        return offset, events
    return replace(offset, advanced_to=at), [*events, TimerFired(offset.key, at)]


def _lost_by_the_jobmaster(
    offset: JobOffset, named: Mapping[str, int]
) -> tuple[JobOffset, list[Event]]:
    """A TaskManager Flink's exceptions name as lost (`named`: id -> the first entry's
    instant) while /taskmanagers still lists it: the JobMaster's heartbeat or an RPC to it
    failed before the ResourceManager dropped it. It is lost for the job then, at Flink's
    own instant, and not registered again while it stays listed."""
    gone = sorted(tm for tm in named if tm in offset.task_managers)
    if not gone:
        return offset, []
    events: list[Event] = [
        TaskManagerLost(
            offset.key, named[tm], tm, "lost by the JobMaster (its exceptions)", None, True
        )
        for tm in gone
    ]
    kept = tuple(tm for tm in offset.task_managers if tm not in gone)
    lost = tuple(sorted({*offset.lost_task_managers, *gone}))
    return replace(offset, task_managers=kept, lost_task_managers=lost), events


def _first_new_exception(offset: JobOffset, answers: Answers) -> int:
    """The earliest exception entry after the offset's, also one not sent because its
    TaskManager is gone (then it is when Flink's JobMaster released that TaskManager)."""
    return _new_entries(offset, answers.exceptions)[0][0]


def _new_entries(offset: JobOffset, exceptions: Any) -> list[tuple[int, Mapping[str, Any]]]:
    """The exception history's entries after the offset's, by instant, oldest first;
    `MalformedAnswerError` for an answer of another shape."""
    history = tr.field(exceptions, "exceptionHistory", dict, "exceptions")
    entries = tr.field(history, "entries", list, "exceptions.exceptionHistory")
    stamped = [(tr.field(e, "timestamp", int, "exceptions.entries[]"), e) for e in entries]
    return sorted(
        ((at, e) for at, e in stamped if at > offset.last_exception_ms), key=lambda pair: pair[0]
    )


def _failures(
    offset: JobOffset, answers: Answers, problems: list[tuple[str, str]]
) -> tuple[JobOffset, list[Event], dict[str, int], frozenset[str]]:
    """The exception history's new entries as failures, bar those of a lost TaskManager;
    the TaskManagers the entries name as lost (id -> the first one's instant); and those
    they place a failed task on or name as lost (`_task_managers_of`: they held tasks)."""
    listed = frozenset(offset.task_managers)
    if answers.exceptions is None:
        return offset, [], {}, frozenset()
    try:
        new = _new_entries(offset, answers.exceptions)
    except tr.MalformedAnswerError as error:
        problems.append(("exceptions", str(error)))
        return offset, [], {}, frozenset()
    recoverable = answers.job.get("state") not in UNRECOVERABLE_STATES
    views = answers.task_managers or ()
    by_path = {tm.path: tm.id for tm in views if tm.path}
    paths = None if answers.task_managers is None else frozenset(by_path)
    events: list[Event] = []
    named: dict[str, int] = {}
    failed_on: set[str] = set()
    newest = offset.last_exception_ms
    for at, entry in new:
        newest = max(newest, at)
        lost = _named_lost(entry, by_path)
        for tm in lost:
            named.setdefault(tm, at)
        held = _task_managers_of(entry)
        failed_on.update(held)
        if lost or any(tm not in listed for tm in held):
            continue  # its TaskManager is gone: the scheduler derives it from TaskManagerLost
        if _unreachable(entry, paths):
            continue
        kind = JobEventKind.TASK_FAILURE if entry.get("taskName") else JobEventKind.GLOBAL_FAILURE
        exception = entry.get("exceptionName")
        events.append(
            JobLifecycle(offset.key, at, kind, recoverable, str(exception) if exception else None)
        )
    return replace(offset, last_exception_ms=newest), events, named, frozenset(failed_on)


def _named_lost(entry: Mapping[str, Any], by_path: Mapping[str, str]) -> list[str]:
    """The TaskManagers an entry's message says are lost: named by id (the JobMaster's
    heartbeat, the network stack) or the recipient of an RPC that found none, by address."""
    trace = entry.get("stacktrace")
    if not isinstance(trace, str):
        return []
    named = [a or b for a, b in LOST_TASK_MANAGER.findall(trace)]
    named += [by_path[path] for path in UNREACHABLE_TASK_MANAGER.findall(trace) if path in by_path]
    return named


def _task_managers_of(entry: Mapping[str, Any]) -> list[str]:
    """The TaskManagers an exception entry is about: where its task ran, and any its
    message or its causes name as lost."""
    where = entry.get("taskManagerId")
    named = [where] if isinstance(where, str) and where else []
    trace = entry.get("stacktrace")
    if isinstance(trace, str):
        named += [a or b for a, b in LOST_TASK_MANAGER.findall(trace)]
    return named


def _unreachable(entry: Mapping[str, Any], paths: frozenset[str] | None) -> bool:
    """Whether the entry is an RPC to a TaskManager no longer listed (by its address:
    a deployment to the slots of a TaskManager that died, before Flink released them)."""
    trace = entry.get("stacktrace")
    if paths is None or not isinstance(trace, str):
        return False
    return any(path not in paths for path in UNREACHABLE_TASK_MANAGER.findall(trace))


def _checkpoints(
    offset: JobOffset,
    answers: Answers,
    problems: list[tuple[str, str]],
    waiting_after: int | None = None,
) -> tuple[JobOffset, list[Event]]:
    """Checkpoints that ended since the job's submission and were not sent yet, by id: the
    scheduler's rescale trigger waits for one (FLIP-461) and counts failed ones. Flink
    serves /checkpoints from a cache refreshed every `web.refresh-interval`, so a
    checkpoint may first show a poll or two after it ended; it is sent then. Those that
    ended after `waiting_after` (the job's clock, while a loss is held: `_held`) are left
    for a later poll, which finds them again, as if not yet shown."""
    if answers.checkpoints is None:
        return offset, []
    try:
        ended = tr.checkpoints(answers.checkpoints)
    except tr.MalformedAnswerError as error:
        problems.append(("checkpoints", str(error)))
        return offset, []
    floor = offset.updated_at if offset.checkpoint_floor is None else offset.checkpoint_floor
    sent = set(offset.checkpoints_sent)
    new = [(cid, completed, at) for cid, completed, at in ended if cid not in sent and at > floor]
    if waiting_after is not None:
        new = [(cid, completed, at) for cid, completed, at in new if at <= waiting_after]
    listed = {cid for cid, _, _ in ended}
    kept = tuple(sorted((sent & listed) | {cid for cid, _, _ in new}))
    offset = replace(offset, checkpoints_sent=kept, checkpoint_floor=floor)
    return offset, [
        JobLifecycle(
            offset.key,
            at,
            JobEventKind.CHECKPOINT_COMPLETED if completed else JobEventKind.CHECKPOINT_FAILED,
            checkpoint_id=cid,
        )
        for cid, completed, at in new
    ]


def _terminal(
    offset: JobOffset, answers: Answers, now: int, events: list[Event]
) -> tuple[JobOffset, list[Event]]:
    state = answers.job.get("state")
    if state not in TERMINAL:
        return offset, events
    kind, recoverable = TERMINAL[state]
    end = answers.job.get("end-time")
    at = end if isinstance(end, int) and end > 0 else now
    events.append(JobLifecycle(offset.key, at, kind, recoverable, f"Flink job {state}"))
    return replace(offset, terminal=str(state)), events
