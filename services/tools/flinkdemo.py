"""`scalefold demo --flink` (`make demo-flink`): the demo's story on a real Flink 2.3.

A fresh local stack in `.run/demo-flink`: the broker, a Flink 2.3.0 session cluster with
one TaskManager (one slot), the bridge polling it as cluster `local`, the scheduler
predicting its job, the history service planning commands for it (`--command-flink
local`) and the actuator with a Flink backend for it (`--flink-local local=DIR`).

1. The sample job starts on Flink wanting 4 slots (Bucket and Sum at parallelism 2, in two
   slot-sharing groups) with only the one: it waits for resources.
2. The history service sees the predicted rescale wait and commands TaskManagers; the
   actuator starts them as real processes; Flink rescales onto them.
3. One TaskManager the job uses is killed (SIGKILL): Flink restarts the job on what is
   left (RECOVERABLE_FAILOVER); the history service provisions the missing slot, and the
   job recovers its parallelism.
4. Flink's own records and scalefold's predictions, side by side (and `scalefold flink
   compare`), and a timeline picture of each.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from services.bridge.step import OFFER_WAIT_MS
from services.contracts import Codec, SchemaRegistry, Settings
from services.contracts.kafka import ensure_topics
from services.localstack.layout import PROJECT_ROOT, RUN_ROOT

if TYPE_CHECKING:
    from services.clicontext import Context
    from services.contracts.flinkrest import FlinkRest
    from services.localstack.flink import FlinkCluster
    from services.localstack.processes import ServiceProcess
    from services.tools.demo import Watcher

RUN_DIR = RUN_ROOT / "demo-flink"
SUBMISSION_STABILIZATION_MS = 10_000
"""Long enough for the TaskManagers the actuator starts at once to register inside it:
at 2 s, one of their registrations (about a second apart) fell across its end in 2 of 8
busy runs (2026-12-03), which left the story's every pair ambiguous (docs/benchmarks.md,
"The Flink demo's agreement on a busy machine")."""
RESTART_DELAY_MS = 10_000
"""The cluster's fixed restart delay (the job sets none: REST shows a job's own strategy
only as "Cluster level default", so the bridge could not see it): longer than the heartbeat timeout (6 s) and its interval,
so a killed TaskManager's slots are released before Flink restarts. At 1 s, Flink
restarted onto them first in 2 of those 8 runs (a race inside the JobManager no REST
answer shows: such a failover and every pair after it are ambiguous)."""
CLUSTER = "local"
PARALLELISM = 2
STEP_LIMIT_S = 240
"""The longest wait for one step of the story, a hang guard: on a quiet machine each takes
well under a minute, and the whole story less than 5 minutes."""
SETUP_LIMIT_S = 600
"""The longest wait for the history service's Spark to start (set-up, not the story)."""


def run_flink_demo(context: Context, *, verbose: bool = False) -> int:
    from services.localstack import flinkstack, stack
    from services.localstack.broker import LocalBroker
    from services.localstack.flinkconf import Waits
    from services.localstack.jars import kafka_jars
    from services.tools.demo import _say

    broker = LocalBroker(RUN_DIR, kafka_jars(context.cache_dir, progress=_say))
    stack.stop_all(RUN_DIR, _say)
    flinkstack.down(RUN_DIR, _say)
    for old in ("history", "scheduler", "flink"):
        shutil.rmtree(RUN_DIR / old, ignore_errors=True)
    waits = Waits(  # a killed TaskManager noticed in seconds; rescales without long waits
        resource_wait=300_000,
        submission_stabilization=SUBMISSION_STABILIZATION_MS,
        cooldown=2_000,
        executing_stabilization=3_000,
        heartbeat_interval=1_000,
        heartbeat_timeout=6_000,
        restart_delay=RESTART_DELAY_MS,
    )
    begun = time.monotonic()
    try:
        bootstrap = broker.start(fresh=True, progress=_say)
        settings = context.settings.with_overrides(bootstrap_servers=bootstrap)
        ensure_topics(settings, settings.topics.all())
        cluster = flinkstack.up(RUN_DIR, context.cache_dir, 1, _say, waits=waits)
        processes = start_services(settings, cluster)
        _say(f"set up in {time.monotonic() - begun:.0f} s; the story takes at most 5 minutes")
        return story(context, settings, cluster, processes)
    finally:
        stack.stop_all(RUN_DIR, _say)
        flinkstack.down(RUN_DIR, _say)
        broker.stop(progress=_say)
        _say(f"the demo took {time.monotonic() - begun:.0f} s")


def start_services(settings: Settings, cluster: FlinkCluster) -> list[ServiceProcess]:
    from services.localstack import ports, stack
    from services.tools.demo import _say

    rest_url = cluster.rest_url() or ""
    scheduler_port, actuator_port = ports.free_ports(2)
    processes = [
        stack.scheduler_process(RUN_DIR, scheduler_port),
        stack.actuator_process(
            RUN_DIR, actuator_port, "--flink-local", f"{CLUSTER}={cluster.directory}"
        ),
        stack.history_process(
            RUN_DIR,
            *("--trigger-seconds", "1", "--plan-interval", "2", "--command-flink", CLUSTER),
            *("--provision-grace", "6", "--release-grace", "60"),
        ),
        stack.bridge_process(RUN_DIR, rest_url, "--poll-interval", "1"),
    ]
    for process in processes:
        stack.start(process, settings)
    _say("starting the scheduler, the actuator (Flink backend), the history service, the bridge")
    for process in processes:
        if process.name == "history":  # Spark: minutes on a busy machine
            stack.wait_logged(process, stack.HISTORY_READY, timeout=SETUP_LIMIT_S)
        else:
            stack.wait_ready(process)
        _say(f"{process.name} ready")
    return processes


def story(
    context: Context, settings: Settings, cluster: FlinkCluster, processes: list[ServiceProcess]
) -> int:
    from services.localstack.flinkdist import flink_home, sample_job
    from services.tools.demo import Watcher

    codec = Codec(SchemaRegistry.load(settings.schemas_dir))
    rest = cluster.rest(timeout=30.0)
    watcher = Watcher(settings, codec, time.monotonic())
    watcher.start()
    flink = FlinkWatch(rest, watcher.say)
    jar = sample_job(context.cache_dir, flink_home(context.cache_dir))
    watcher.say(f"> a job starts on Flink wanting {2 * PARALLELISM} slots, with 1 TaskManager")
    arguments = [
        *("--parallelism", str(PARALLELISM), "--max-parallelism", "4", "--rate", "10"),
        *("--restart", "cluster"),
    ]
    jid = rest.run_jar(rest.upload_jar(jar.name, jar.read_bytes()), arguments)
    flink.jid = jid
    watcher.say(f"  Flink job {jid}: scalefold predicts it as {CLUSTER}.{jid}")
    ok = flink.until(
        f"Flink runs the job at parallelism {PARALLELISM}, all its tasks running",
        lambda: flink.parallelism() == PARALLELISM and flink.settled(),
    )
    if not ok:  # no TaskManager came: the loop is broken, the rest of the story cannot follow
        return _stopped(watcher, processes, 1)
    victim = flink.busy()[-1]
    failovers = flink.failovers()
    watcher.say(f"> TaskManager {victim} is killed (SIGKILL)")
    cluster.stop_taskmanager(victim, kill=True)
    flink.until("Flink notices the loss", lambda: victim not in flink.registered())
    ok &= flink.until(
        "Flink restarts the job: a failover ends", lambda: flink.failovers() > failovers
    )
    ok &= flink.until(
        f"the job recovers: parallelism {PARALLELISM} again",
        lambda: flink.parallelism() == PARALLELISM and flink.settled(),
    )
    flink.until("the history holds both sides' records", lambda: _kept(flink), seconds=120)
    # read while the history service runs: `flink compare` reads its committed tables
    status = report(context, settings, f"{CLUSTER}.{jid}", flink.records()) if ok else 1
    return _stopped(watcher, processes, status)


def _stopped(watcher: Watcher, processes: list[ServiceProcess], status: int) -> int:
    watcher.stopping.set()
    watcher.join(5)
    for process in processes:
        process.stop()
    return status or (0 if watcher.slots_kept() else 1)


class FlinkWatch:
    """Flink's side of the story, read from its REST API and printed as it happens."""

    def __init__(self, rest: FlinkRest, say: Callable[[str], None]) -> None:
        self.rest, self.say = rest, say
        self.jid = ""
        self.shown: dict[str, str] = {}

    def poll(self) -> None:
        for entry in reversed(self.rest.rescale_history(self.jid)):
            state = f"{entry['triggerCause']} -> {entry['terminatedReason'] or 'in progress'}"
            if self.shown.get(entry["rescaleUuid"]) != state and entry["terminatedReason"]:
                details = self.rest.rescale_details(self.jid, entry["rescaleUuid"])
                post = ", ".join(
                    f"{v['jobVertexName']}={v['postRescaleParallelism']}"
                    for v in details["vertices"].values()
                )
                self.say(f"flink   rescale {state} ({post})")
            self.shown[entry["rescaleUuid"]] = state

    def until(self, what: str, done: Callable[[], bool], seconds: float = STEP_LIMIT_S) -> bool:
        from services.contracts.flinkrest import FlinkNotFoundError, FlinkRestError

        self.say(f"  (waiting until {what})")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self.poll()
                if done():
                    return True
            except FlinkNotFoundError:
                pass  # an initializing job has no rescale history yet
            except FlinkRestError as error:
                self.say(f"  (Flink: {error})")
            time.sleep(1.0)
        self.say(f"  (not so after {seconds:.0f} s)")
        return False

    def parallelism(self) -> int | None:
        """The lowest parallelism of the vertices that rescale (the source stays at 1)."""
        job = self.rest.job(self.jid)
        if job["state"] != "RUNNING":
            return None
        return min(int(v["parallelism"]) for v in job["vertices"] if v["maxParallelism"] > 1)

    def settled(self) -> bool:
        tasks = [v["tasks"] for v in self.rest.job(self.jid)["vertices"]]
        return not any(n for t in tasks for state, n in t.items() if state != "RUNNING")

    def failovers(self) -> int:
        """How many RECOVERABLE_FAILOVER rescales of the job Flink has ended."""
        history = self.rest.rescale_history(self.jid)
        return sum(
            1 for e in history if e["triggerCause"] == "RECOVERABLE_FAILOVER" and e["terminalState"]
        )

    def registered(self) -> set[str]:
        return {tm["id"] for tm in self.rest.taskmanagers()}

    def busy(self) -> list[str]:
        listed = self.rest.taskmanagers()
        return sorted(tm["id"] for tm in listed if tm["freeSlots"] < tm["slotsNumber"])

    def records(self) -> list[dict[str, Any]]:
        """Flink's own rescale records of the job, oldest first, with their details."""
        history = reversed(self.rest.rescale_history(self.jid))
        return [self.rest.rescale_details(self.jid, e["rescaleUuid"]) for e in history]


PREDICTION_LAG_MS = OFFER_WAIT_MS + 10_000
"""How far the prediction may trail Flink's own record of a rescale: the bridge holds a new
TaskManager until its slots' offer (bridge/step.py), and the job's clock runs Flink's
refresh interval behind; the history commits a few seconds after."""


def _kept(flink: FlinkWatch) -> bool:
    """Whether each side's records are in the history's tables: every rescale Flink shows
    ended is settled in flink_rescales, and scalefold's prediction has no rescale in
    progress and the children of each committed (all its pairs settled). Not equal
    counts: a different number of rescales is a disagreement to report, once the
    prediction has had `PREDICTION_LAG_MS` after Flink's last rescale to catch up."""
    from services.history import pairing
    from services.history.flink_tables import LATEST_TABLE as FLINK_TABLE
    from services.history.lake import HistoryNotFoundError, HistoryUnreadableError, Lake
    from services.history.tables import LATEST_TABLE

    history = flink.rest.rescale_history(flink.jid)
    ended = {e["rescaleUuid"] for e in history if e["terminalState"]}
    last_end = max(
        (e["endTimestampInMillis"] or 0 for e in history if e["terminalState"]), default=0
    )
    job = f"{CLUSTER}.{flink.jid}"
    try:
        lake = Lake.at(RUN_DIR / "history")
        if not (lake.committed(FLINK_TABLE) and lake.committed(LATEST_TABLE)):
            return False
        kept = lake.rows(
            f"SELECT rescale_uuid FROM f WHERE job_id = '{flink.jid}' "
            "AND terminal_state IS NOT NULL",
            {"f": FLINK_TABLE},
        )
        predicted = lake.rows(
            f"SELECT rescale_uuid, in_progress FROM r WHERE job_id = '{job}'",
            {"r": LATEST_TABLE},
        )
        pairs = pairing.compare(lake, job).pairs
    except (HistoryNotFoundError, HistoryUnreadableError):
        return False
    flink_in = ended <= {row["rescale_uuid"] for row in kept}
    # the prediction's children come after its latest revision (the tables' slower trigger)
    children = all(
        pairing.children_committed(p, "predicted_") for p in pairs if p["predicted_rescale_uuid"]
    )
    ours_in = bool(predicted) and not any(row["in_progress"] for row in predicted) and children
    # the prediction trails Flink by the bridge's holds: fewer rescales than Flink's are
    # waited for that long after Flink's last one ended, then reported as they are
    trailing = len(predicted) < len(ended) and time.time() * 1000 < last_end + PREDICTION_LAG_MS
    return flink_in and ours_in and not trailing


def report(
    context: Context, settings: Settings, job: str, flink_records: list[dict[str, Any]]
) -> int:
    """Both histories side by side, `flink compare`, the verdict (non-zero when a pair the
    observation decides disagrees), and a timeline picture of each."""
    from services.history import timeline as chart
    from services.history.lake import Lake, timeline_spans
    from services.history.tables import LATEST_TABLE
    from services.tools.demo import _say
    from services.tools.flinkreport import flink_timeline_rows, side_by_side

    lake = Lake.at(RUN_DIR / "history")
    predicted = lake.rows(
        "SELECT trigger_cause, terminated_reason, total_post_rescale_slots, start_timestamp_ms "
        f"FROM r WHERE job_id = '{job}' ORDER BY start_timestamp_ms, rescale_uuid",
        {"r": LATEST_TABLE},
    )
    print(f"\nFlink's own rescale records of {job} and scalefold's predictions, side by side:\n")
    print("\n".join(side_by_side(flink_records, predicted)))
    compare = [sys.executable, "-m", "services.cli", "flink", "compare", "--job", job]
    compare += ["--strict", "--data-dir", str(RUN_DIR / "history")]
    print(f"\n$ scalefold flink compare --job {job} --strict\n", flush=True)
    judged = subprocess.run(compare, cwd=PROJECT_ROOT, env=_broker_env(settings), check=False)
    pictures = {
        "flink": (flink_timeline_rows(flink_records), f"Flink's rescales of {job}"),
        "scalefold": (
            chart.timeline_rows(timeline_spans(lake, job, 20)),
            f"scalefold's predicted rescales of {job}",
        ),
    }
    for name, (rows, title) in pictures.items():
        out = (RUN_DIR / f"timeline-{name}.png").resolve()
        if rows:
            chart.render_png(rows, out, title, relative=False)
            _say(f"timeline picture ({name}): {out}")
    return 1 if judged.returncode or not (flink_records and predicted) else 0


def _broker_env(settings: Settings) -> dict[str, str]:
    """The environment of a command that reads the demo's broker, as its services reach
    it (stack.start): `flink compare` asks the job's recorded inputs there which pairs
    the observation cannot decide."""
    from services.localstack.secure import PLAINTEXT_ENV

    return {
        **os.environ,
        **(PLAINTEXT_ENV if settings.security.protocol == "PLAINTEXT" else {}),
        "SCALEFOLD_BOOTSTRAP_SERVERS": settings.bootstrap_servers,
        "SCALEFOLD_TOPIC_PREFIX": settings.topic_prefix,
    }
