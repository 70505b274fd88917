"""One poll of one Flink cluster over REST: the answers each job's `step.observe` needs.

The shell's half of a poll. An unreachable JobManager ends the poll with
`FlinkUnreachableError` (the service backs off and retries); an answer that is not
usable (a 5xx, a body that is not JSON, a shape Flink does not send) becomes a
`Letter` for the dead-letter topic and the poll goes on without it; a 404 means the
job has gone, or the rescale history is off, and is said once, in one line.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from services.bridge import rescales as rs
from services.bridge import signals as sg
from services.bridge import slotlog, step
from services.bridge import translate as tr
from services.bridge.offsets import JobOffset
from services.contracts.events import TaskManagerRegistered, Window
from services.contracts.flinkrest import (
    FlinkBadAnswerError,
    FlinkNotFoundError,
    FlinkRest,
    FlinkRestError,
    FlinkUnreachableError,
)
from services.contracts.jobconfig import HISTORY_SIZE
from services.contracts.topics import flink_job_key

log = logging.getLogger("scalefold.bridge")

NOT_SCHEDULED_YET = frozenset({"INITIALIZING"})
"""Job states before the JobMaster's scheduler exists: a real Flink 2.3.0 then answers 404
on /rescales/history and 500 on /resource-requirements (seen on the local stack), which
would read as "history off" and as bad answers. Such a job is polled again next time."""


@dataclass(frozen=True)
class Letter:
    """An unusable answer: where it came from, its body and why."""

    cluster: str
    path: str
    key: str
    body: bytes
    error_class: str
    reason: str


class NotThereError(Exception):
    """A 404 answer."""


DEFAULT_SIGNALS_INTERVAL_MS = 10_000
"""How often a running job's workload is sampled (signals.py): Flink's metric fetcher
refreshes what REST shows every `metrics.fetcher.update-interval`, 10 s by default."""
RELIST_PENDING_MS = 60_000
"""How long a vertex's metric listing without a pendingRecords metric is believed (a
source registers its operator metrics once it runs)."""

MAX_LOG_BYTES = 16 * 1024 * 1024
"""The largest TaskManager log the bridge reads for a slot offer (slotlog.py): a newly
registered TaskManager's is tens of kilobytes; Flink serves the whole file, no range."""

NO_LOG_FILE = b"on the TaskExecutor."
"""How Flink's 500 for a TaskManager without a log file ends (its cause, in the body): "The
file LOG is not available on the TaskExecutor." (no `log.file`: a console-only
deployment, as the docker-compose stack's) or "... does not exist on the TaskExecutor."."""
TRANSIENT = object()
"""A TaskManager's log Flink could not fetch this time (`ClusterPoller._task_manager_log`)."""

EndOffsets = Callable[[Sequence[sg.Partition]], Mapping[sg.Partition, tuple[int, int]]]
"""Asks the sources' broker each partition's (first, end) offsets; raises when it cannot
(brokers.py's `BrokerOffsets`)."""

KEPT_DEPARTURES = 1024
"""How many lost TaskManagers' windows a poller remembers (a job polled late still finds
its TaskManager's; older ones are not asked for)."""


def wall_ms() -> int:
    return int(time.time() * 1000)


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


@dataclass(frozen=True)
class Instant:
    """One instant on both clocks (ms): the wall clock's, which Flink's answers and the
    events use, and the monotonic one, which measures what elapsed."""

    wall: int
    monotonic: int

    def since(self, monotonic: int) -> Window:
        """From the monotonic instant `monotonic` to this one, in wall-clock terms."""
        return Window(self.wall - (self.monotonic - monotonic), self.wall)


@dataclass
class Presence:
    """When each TaskManager appeared in, and left, the cluster's listing, as windows:
    after the request of the last listing that did not show the change, by the arrival of
    the first one that did. A TaskManager appears when it is listed with slots (its slot
    report in). Those of the first listing this poller read have no window (None).

    The instants are measured on the monotonic clock and given as wall-clock instants
    counted back from the answer's arrival, so a step of the machine's clock between two
    polls cannot make a window empty or displaced."""

    listed_at: int | None = None  # the monotonic instant of the last usable listing's request
    appeared: dict[str, Window | None] = field(default_factory=dict)
    departed: dict[str, Window] = field(default_factory=dict)
    left: dict[str, step.Left] = field(default_factory=dict)
    """What each departed TaskManager was listed as, and when it had appeared."""
    _views: dict[str, tr.TaskManagerView] = field(default_factory=dict)

    def update(self, views: tuple[tr.TaskManagerView, ...], asked: int, answered: Instant) -> None:
        """A usable listing, asked at monotonic `asked`, answered at `answered`."""
        window = None if self.listed_at is None else answered.since(self.listed_at)
        offering = {tm.id: tm for tm in views if tm.slots > 0}
        for tm in sorted(offering.keys() - self.appeared.keys()):
            self.appeared[tm] = window
            self.left.pop(tm, None)
        for tm in sorted(self.appeared.keys() - offering.keys()):
            appeared = self.appeared.pop(tm)
            if window is not None:
                self.departed[tm] = window
                if (view := self._views.get(tm)) is not None:
                    self.left[tm] = step.Left(view, appeared)
        self._views = offering
        while len(self.departed) > KEPT_DEPARTURES:
            del self.departed[next(iter(self.departed))]
        while len(self.left) > KEPT_DEPARTURES:
            del self.left[next(iter(self.left))]
        self.listed_at = asked


@dataclass
class ClusterPoll:
    """What a poll of one cluster gave: each job's observation, and the unusable answers."""

    observed: list[step.Observed] = field(default_factory=list)
    letters: list[Letter] = field(default_factory=list)
    signals: list[dict[str, Any]] = field(default_factory=list)
    """`FlinkWorkloadSignal` records (signals.py), one per running job sampled."""


class ClusterPoller:
    """Polls one cluster; remembers what it said once (a vanished job, history off)."""

    def __init__(
        self,
        name: str,
        rest: FlinkRest,
        clock: Callable[[], int] = wall_ms,
        ticks: Callable[[], int] = monotonic_ms,
        signals_interval_ms: int = DEFAULT_SIGNALS_INTERVAL_MS,
        *,
        end_offsets: EndOffsets | None = None,
    ) -> None:
        self.name = name
        self.rest = rest
        self.clock, self.ticks = clock, ticks
        self.signals_interval_ms = signals_interval_ms  # 0: no workload signals
        self.end_offsets = end_offsets  # the sources' broker (None: pendingRecords alone)
        self._sampled: dict[str, int] = {}  # job -> its last sample's instant (ticks)
        self._pending: dict[tuple[str, str], tuple[sg.SourceMetrics, int]] = {}  # (job,
        # vertex) -> its pendingRecords metric's id and partitions, when listed (ticks)
        self.presence = Presence()
        self.version: str | None = None  # Flink's, from /config
        self.refresh_ms = step.DEFAULT_REFRESH_MS  # web.refresh-interval, from /config
        self.cluster_restart: dict[str, str] = {}  # /jobmanager/config's restart-strategy.*
        self._requirements_at: dict[str, int] = {}  # job -> its last answer's request (ticks)
        self._placed: dict[str, step.Placement] = {}  # job -> where its tasks last ran
        self._offers: dict[tuple[str, str], Window] = {}  # (job, TaskManager) -> its offer
        self._held: dict[str, set[str]] = {}  # job -> the TaskManagers its offsets named
        self._unusable_logs: set[str] = set()  # listed TaskManagers whose log is not read
        self._said: set[str] = set()
        self._lettered: set[tuple[str, str, str]] = set()

    def say_once(self, what: str, line: str) -> None:
        if what not in self._said:
            self._said.add(what)
            log.warning("%s", line)

    def poll(self, offsets: Mapping[str, JobOffset], now: int) -> ClusterPoll:
        """Every job the cluster lists that has something left to tell."""
        result = ClusterPoll()
        if self.version is None:
            self.version = self._version(result)
            if self.version is not None:
                self.cluster_restart = self._cluster_restart(result)
        overview = self._get("/jobs/overview", self.name, result)
        jobs = _job_ids(overview, self.name, result)
        task_managers = self._listing(result)
        if jobs is not None:  # a usable list: what it lacks is gone
            result.observed += self._vanished(offsets, set(jobs), now)
            self._forget(set(jobs))
        for jid in jobs or ():
            key = flink_job_key(self.name, jid)
            offset = offsets.get(key) or JobOffset(self.name, jid)
            if offset.terminal is not None and not _open_rescales(offset):
                continue  # reported to its end: nothing more to read
            answers = self._answers(jid, offset, task_managers, result)
            if answers is not None:
                self._sample(jid, answers, result)
                seen = step.observe(offset, answers, now)
                self._remember(jid, seen)
                result.letters += [_problem(self.name, jid, answers, *p) for p in seen.problems]
                result.observed.append(seen)
        result.letters = [x for x in result.letters if self._first_time(x)]
        return result

    def list_presence(self) -> None:
        """Between two polls: /taskmanagers alone, so that when a TaskManager came or went
        is known within this listing's interval rather than the poll's. A failure is left
        to the next poll to say."""
        with contextlib.suppress(FlinkUnreachableError):
            self._listing(ClusterPoll())

    def _listing(self, result: ClusterPoll) -> tuple[tr.TaskManagerView, ...] | None:
        """The cluster's TaskManagers, their comings and goings noted (`presence`)."""
        asked = self.ticks()
        listed = self._get("/taskmanagers", self.name, result)
        answered = self._now()
        task_managers: tuple[tr.TaskManagerView, ...] | None = self._read(
            tr.task_managers, listed, "/taskmanagers", self.name, result
        )
        if task_managers is not None:
            self.presence.update(task_managers, asked, answered)
        return task_managers

    def _now(self) -> Instant:
        return Instant(self.clock(), self.ticks())

    def _version(self, result: ClusterPoll) -> str | None:
        """Flink's version ("" when the JobManager does not serve /config: not asked again;
        None when its answer was unusable: asked again next poll), and how often its web
        monitor refreshes the job answers it caches."""
        try:
            config = self._get("/config", self.name, result, missing=True)
        except NotThereError:
            return ""
        refresh = config.get("refresh-interval") if isinstance(config, Mapping) else None
        if isinstance(refresh, int) and refresh > 0:
            self.refresh_ms = refresh
        return _version(config)

    def _cluster_restart(self, result: ClusterPoll) -> dict[str, str]:
        """The cluster's restart strategy (its jobs' default), read with its version."""
        return tr.cluster_restart_strategy(self._optional("/jobmanager/config", self.name, result))

    def _vanished(
        self, offsets: Mapping[str, JobOffset], listed: set[str], now: int
    ) -> list[step.Observed]:
        gone = []
        for offset in offsets.values():
            if offset.cluster == self.name and offset.job_id not in listed:
                seen = step.vanished(offset, now)
                if seen is not None:
                    log.warning("%s: job %s is no longer listed", self.name, offset.job_id)
                    gone.append(seen)
        return gone

    def _first_time(self, letter: Letter) -> bool:
        """A letter for an answer not lettered before (a lasting 5xx is lettered once)."""
        identity = (letter.path, rs.digest(letter.body.decode("utf-8", "replace")), letter.reason)
        if identity in self._lettered:
            return False
        self._lettered.add(identity)
        return True

    def _answers(
        self,
        jid: str,
        offset: JobOffset,
        task_managers: tuple[tr.TaskManagerView, ...] | None,
        result: ClusterPoll,
    ) -> step.Answers | None:
        key = flink_job_key(self.name, jid)
        base = f"/jobs/{jid}"
        try:
            job = self._get(base, key, result, missing=True)
        except NotThereError:
            self.say_once(f"gone {jid}", f"{self.name}: job {jid} is no longer there")
            return None
        job_answered = self.clock()
        if not isinstance(job, Mapping) or job.get("state") in NOT_SCHEDULED_YET:
            return None
        history, enabled = self._history(jid, result)
        self._read_placement(jid, job, history, result)
        needed = not offset.submitted  # the job's settings matter only for its submission
        checkpoints, known = self._checkpoints(jid, result) if needed else (None, False)
        details = {}
        for uuid in step.details_to_fetch(offset, history or []):
            answer = self._optional(f"{base}/rescales/details/{uuid}", key, result)
            if answer is not None:
                details[uuid] = answer
        asked = self.ticks()
        requirements = self._optional(f"{base}/resource-requirements", key, result)
        since = self._requirements_at.get(jid)
        answered = self._now()
        if requirements is not None:
            self._requirements_at[jid] = asked
        offers, awaiting = self._slot_offers(jid, job, offset, task_managers)
        return step.Answers(
            job=job,
            task_managers=task_managers,
            job_answered_ms=job_answered,
            requirements=requirements,
            requirements_window=None if since is None else answered.since(since),
            appeared=self.presence.appeared,
            departed=self.presence.departed,
            left=self.presence.left,
            flink_version=self.version or None,
            refresh_ms=self.refresh_ms,
            rescales_config=self._optional(f"{base}/rescales/config", key, result)
            if needed
            else None,
            job_config=self._optional(f"{base}/config", key, result) if needed else None,
            checkpoints_config=checkpoints,
            checkpointing_known=known,
            exceptions=self._optional(f"{base}/exceptions", key, result),
            checkpoints=self._optional(f"{base}/checkpoints", key, result)
            if offset.submitted
            else None,
            history=history,
            history_enabled=enabled,
            details=details,
            placement=self._placed.get(jid),
            cluster_restart=self.cluster_restart,
            offers=offers,
            awaiting_offer=awaiting,
            held=frozenset(self._held.get(jid, ())),
        )

    def _slot_offers(
        self,
        jid: str,
        job: Mapping[str, Any],
        offset: JobOffset,
        task_managers: tuple[tr.TaskManagerView, ...] | None,
    ) -> tuple[dict[str, Window], frozenset[str]]:
        """When each TaskManager new to the job got its slots offered to it, from its log
        (slotlog.py), or that its log shows no such offer yet (`awaiting`): before the job
        is submitted, every listed one; after, each listed since the job's last poll. One
        whose log cannot be read or placed is in neither: its listing's window stands (the
        job's start for those at its submission), as it does for one listed at the
        bridge's first listing once the job is submitted."""
        if offset.terminal is not None:
            return {}, frozenset()
        start = job.get("start-time")
        offers: dict[str, Window] = {}
        awaiting: set[str] = set()
        if task_managers is not None:
            self._unusable_logs &= {tm.id for tm in task_managers}
        for tm in task_managers or ():
            listed = self.presence.appeared.get(tm.id)
            if tm.slots <= 0 or tm.id in offset.task_managers or tm.id in self._unusable_logs:
                continue
            if offset.submitted and listed is None:
                continue
            found = self._offers.get((jid, tm.id))
            if found is None:
                read = self._task_manager_log(tm.id, jid)
                if read is TRANSIENT:  # a TaskManager going away answers 5xx: wait for it
                    if listed is not None:
                        awaiting.add(tm.id)
                    continue
                if not isinstance(read, slotlog.Offered):
                    continue
                shift = slotlog.clock_shift(read, listed, start if isinstance(start, int) else None)
                if shift is None:
                    self._unusable_logs.add(tm.id)
                    self.say_once(
                        "task manager log",
                        f"{self.name}: TaskManager {tm.id}'s log cannot be placed on the epoch "
                        f"(no registration or slot request within {slotlog.MAX_LAG_MS // 1000} s "
                        "of its listing or the job's start, zones taken out); when its slots "
                        "reached a job is taken from the listing (said once a cluster)",
                    )
                    continue
                found = slotlog.on_the_epoch(read, shift)
            if found is None:
                awaiting.add(tm.id)
            else:
                self._offers[(jid, tm.id)] = found
                offers[tm.id] = found
        return offers, frozenset(awaiting)

    def _task_manager_log(self, tm: str, jid: str) -> slotlog.Offered | object | None:
        """What TaskManager `tm`'s log (`/taskmanagers/:id/log`) says of job `jid`'s slots;
        `TRANSIENT` when Flink could not fetch it this time (no answer, a 5xx: the
        TaskManager is busy or shutting down); None (said once) when it cannot be read
        (no log file: a 5xx that says so, or a 404; too large) or shows no registration
        this reads."""
        path = f"/taskmanagers/{tm}/log"
        try:
            status, body = self.rest.get_raw(path)
        except FlinkRestError:
            status, body = 0, b""
        if status == 0 or (status >= 500 and NO_LOG_FILE not in body):
            return TRANSIENT
        if status == 200 and len(body) <= MAX_LOG_BYTES:
            read = slotlog.read(body.decode("utf-8", "replace"), jid)
            if read is not None:
                return read
            why = "no registration line in Flink's log pattern"
        else:
            why = "larger than 16 MiB" if status == 200 else f"HTTP {status}"
        self._unusable_logs.add(tm)
        self.say_once(
            "task manager log",
            f"{self.name}: TaskManager {tm}'s log ({path}) is not usable ({why}); when a "
            "TaskManager's slots reached a job is taken from the listing where its log is "
            "not usable (said once a cluster)",
        )
        return None

    def _sample(self, jid: str, answers: step.Answers, result: ClusterPoll) -> None:
        """A workload sample of a running job, when one is due (`signals_interval_ms`)."""
        job, at = answers.job, self.ticks()
        last = self._sampled.get(jid)
        due = last is None or at - last >= self.signals_interval_ms
        if self.signals_interval_ms <= 0 or job.get("state") != "RUNNING" or not due:
            return
        self._sampled[jid] = at
        key, found = flink_job_key(self.name, jid), {}
        try:
            vertices, sources = sg.vertex_ids(job), sg.source_ids(job)
        except tr.MalformedAnswerError:
            return  # the job's answer is the poll's to dead-letter (step.observe)
        for vid in vertices:
            path = f"/jobs/{jid}/vertices/{vid}/subtasks/metrics"
            source = (
                self._source_metrics(jid, vid, path, key, result)
                if vid in sources
                else sg.SourceMetrics(None, None)
            )
            pending = source.pending
            query = sg.metrics_query(pending, list(source.offsets) if self.end_offsets else ())
            answer = self._optional(f"{path}?{query}", key, result)
            gauges = self._read(lambda a, p=pending: sg.gauges(a, p), answer, path, key, result)
            if gauges is not None:
                backlog, received = self._source_backlog(answer, source, path, key, result)
                found[vid] = {
                    **gauges,
                    "sourcePartitions": source.partitions,
                    "sourceBacklog": backlog,
                    "sourceEndOffsets": received,
                }
        read = functools.partial(
            sg.signal,
            self.name,
            vertex_gauges=found,
            observed_at_ms=answers.job_answered_ms or self.clock(),
        )
        sample = self._read(read, job, f"/jobs/{jid}", key, result)
        if sample is not None:
            result.signals.append(sample)

    def _source_backlog(
        self, answer: Any, source: sg.SourceMetrics, path: str, key: str, result: ClusterPoll
    ) -> tuple[float | None, int | None]:
        """A Kafka source's backlog from the broker's end offsets (signals.py's module
        doc), asked right after Flink's answer, and those end offsets summed; None
        without a broker to ask, or when it did not answer (the sample then carries
        pendingRecords alone)."""
        if self.end_offsets is None or not source.offsets:
            return None, None
        current = self._read(lambda a: sg.current_offsets(a, source), answer, path, key, result)
        if not current:
            return None, None
        try:
            marks = self.end_offsets(sorted(current))
        except Exception as error:  # the broker's, whatever its kind: the next sample asks again
            self.say_once(
                f"end-offsets:{error}",
                f"bridge: {self.name}: the source's broker did not give its end offsets "
                f"({error}); the sample carries the connector's pendingRecords alone",
            )
            return None, None
        return sg.source_backlog(current, marks), sg.source_end_offsets(current, marks)

    def _forget(self, listed: set[str]) -> None:
        """Drop what sampling kept of the jobs no longer listed."""
        for jid in self._sampled.keys() - listed:
            del self._sampled[jid]
        for jid, vid in [k for k in self._pending if k[0] not in listed]:
            del self._pending[(jid, vid)]
        for jid, tm in [k for k in self._offers if k[0] not in listed]:
            del self._offers[(jid, tm)]
        for jid in self._held.keys() - listed:
            del self._held[jid]

    def _remember(self, jid: str, seen: step.Observed) -> None:
        """The TaskManagers the job's observations have registered (`step.Answers.held`),
        as long as the listing remembers them: also one registered and lost in the same
        observation, which its offset never names."""
        held = self._held.setdefault(jid, set())
        held.update(seen.offset.task_managers, seen.offset.lost_task_managers)
        held.update(e.task_manager_id for e in seen.events if isinstance(e, TaskManagerRegistered))
        held &= self.presence.appeared.keys() | self.presence.left.keys()

    def _source_metrics(
        self, jid: str, vid: str, path: str, key: str, result: ClusterPoll
    ) -> sg.SourceMetrics:
        """A source vertex's pendingRecords metric id and Kafka partitions, from its metric
        listing (kept once both are found; looked for again at each sample while not, at
        most every RELIST_PENDING_MS: a source registers its metrics once it runs, a Kafka
        reader its partitions' once they are assigned)."""
        known = self._pending.get((jid, vid))
        if known is not None:
            listed, at = known
            settled = listed.pending is not None and listed.partitions is not None
            if settled or self.ticks() - at < min(RELIST_PENDING_MS, self.signals_interval_ms):
                return listed
        answer = self._optional(path, key, result)
        found = self._read(sg.source_metrics, answer, path, key, result)
        metrics = found if found is not None else sg.SourceMetrics(None, None)
        self._pending[(jid, vid)] = (metrics, self.ticks())
        return metrics

    def _read_placement(
        self, jid: str, job: Mapping[str, Any], history: Any, result: ClusterPoll
    ) -> None:
        """Where the job's tasks run (a TaskManager lost later held them or not), read once
        per graph: when Flink's cached answer shows the running one (step.placement_current)
        and the last reading is older than that graph."""
        asked = self.clock()
        if job.get("state") != "RUNNING" or not step.placement_current(
            history, asked, self.refresh_ms
        ):
            return
        last = self._placed.get(jid)
        if last is not None and step.placement_current(history, last.asked, self.refresh_ms):
            return  # read since the graph last changed
        key, hosts = flink_job_key(self.name, jid), set[str]()
        for vertex in job.get("vertices") or []:
            vid = vertex.get("id") if isinstance(vertex, Mapping) else None
            path = f"/jobs/{jid}/vertices/{vid}/taskmanagers"
            answer = self._optional(path, key, result) if isinstance(vid, str) else None
            read = functools.partial(tr.task_managers_hosting, where=path)
            found = self._read(read, answer, path, key, result)
            if found is None:
                return
            hosts |= found
        self._placed[jid] = step.Placement(frozenset(hosts), asked)

    def _history(self, jid: str, result: ClusterPoll) -> tuple[list[Any] | None, bool]:
        key = flink_job_key(self.name, jid)
        path = f"/jobs/{jid}/rescales/history"
        try:
            answer = self._get(path, key, result, missing=True)
        except NotThereError:
            self.say_once(
                "history off",
                f"{self.name}: Flink keeps no rescale history (404 on {path}); set "
                f"{HISTORY_SIZE} (e.g. to 100) in the cluster's configuration to forward "
                "its rescales; the bridge goes on with the other observations",
            )
            return None, False
        if answer is None:
            return None, True
        return self._read(rs.summaries, answer, path, key, result), True

    def _checkpoints(self, jid: str, result: ClusterPoll) -> tuple[Any, bool]:
        path = f"/jobs/{jid}/checkpoints/config"
        try:
            answer = self._get(path, flink_job_key(self.name, jid), result, missing=True)
        except NotThereError:
            return None, True  # Flink's answer for a job without checkpointing
        return answer, answer is not None

    def _optional(self, path: str, key: str, result: ClusterPoll) -> Any:
        try:
            return self._get(path, key, result, missing=True)
        except NotThereError:
            return None

    def _get(self, path: str, key: str, result: ClusterPoll, missing: bool = False) -> Any:
        """The parsed answer, or None (lettered) if unusable; NotThereError for a 404 if `missing`."""
        try:
            return self.rest.get_json(path)
        except FlinkNotFoundError:
            if missing:
                raise NotThereError(path) from None
            result.letters.append(Letter(self.name, path, key, b"", "FlinkNotFound", "404"))
        except FlinkBadAnswerError as error:
            reason = str(error).split(": ", 1)[-1]
            result.letters.append(
                Letter(self.name, path, key, error.body, "FlinkBadAnswer", reason)
            )
        return None

    def _read(self, reader: Any, answer: Any, path: str, key: str, result: ClusterPoll) -> Any:
        if answer is None:
            return None
        try:
            return reader(answer)
        except tr.MalformedAnswerError as error:
            body = repr(answer).encode()[:4096]
            result.letters.append(Letter(self.name, path, key, body, "MalformedAnswer", str(error)))
            return None


def _problem(cluster: str, jid: str, answers: step.Answers, where: str, why: str) -> Letter:
    """The letter of an answer `step.observe` found unusable, with that answer as payload."""
    parts = {
        "job": answers.job,
        "resource-requirements": answers.requirements,
        "exceptions": answers.exceptions,
        "checkpoints": answers.checkpoints,
    }
    uuid = where.rsplit("/", 1)[-1]
    answer = (
        answers.details.get(uuid) if where.startswith("rescales/details/") else parts.get(where)
    )
    body = json.dumps(answer).encode()
    return Letter(
        cluster, f"/jobs/{jid}/{where}", flink_job_key(cluster, jid), body, "MalformedAnswer", why
    )


def _version(config: Any) -> str | None:
    """Flink's version from the web UI's /config ("flink-version": "2.3.0")."""
    version = config.get("flink-version") if isinstance(config, Mapping) else None
    return version if isinstance(version, str) and version else None


def _open_rescales(offset: JobOffset) -> bool:
    return any(not r.final for r in offset.rescales)


def _job_ids(overview: Any, cluster: str, result: ClusterPoll) -> list[str] | None:
    """The listed jobs' ids; None when the answer was unusable (lettered)."""
    if overview is None:
        return None
    try:
        jobs = tr.field(overview, "jobs", list, "jobs/overview")
        return sorted(tr.field(j, "jid", str, "jobs/overview.jobs[]") for j in jobs)
    except tr.MalformedAnswerError as error:
        body = repr(overview).encode()[:4096]
        result.letters.append(
            Letter(cluster, "/jobs/overview", cluster, body, "MalformedAnswer", str(error))
        )
        return None
