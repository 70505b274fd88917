"""`scalefold actuator`: the service. Its control endpoint's operations are
`scalefold cluster ...` (services/tools/cluster.py)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from services.actuator import flinkargs
from services.contracts.topics import COMMAND_OUTCOMES

if TYPE_CHECKING:
    from services.clicontext import Context

FAULT_PLAN_EXAMPLE = '[{"at": 30, "fault": "kill-taskmanager", "job": "j1"}, {"at": 60, "fault": "fail-checkpoints", "job": "j1", "count": 3}]'


def register(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    actuator = commands.add_parser(
        "actuator",
        help="run the actuator with the embedded cluster (TaskManagers and a job runtime)",
        description="Apply scaling commands to the embedded cluster (each once, with one "
        "outcome), and play the runtime of jobs whose scheduler runs with "
        "scalefold.runtime.mode=external: create and cancel execution graphs, complete "
        "checkpoints at the job's interval. Control endpoint on 127.0.0.1 (see `scalefold cluster`).",
    )
    actuator.add_argument("--web-host", default="127.0.0.1")
    actuator.add_argument("--web-port", type=int, default=6067)
    actuator.add_argument("--provisioning-delay", type=float, default=3.0, metavar="SECONDS")
    actuator.add_argument("--creation-delay", type=float, default=0.3, metavar="SECONDS")
    actuator.add_argument("--cancellation-delay", type=float, default=1.5, metavar="SECONDS")
    actuator.add_argument("--slots-per-taskmanager", type=int, default=1)
    actuator.add_argument("--seed", type=int, help="make fault targets and delays reproducible")
    actuator.add_argument(
        "--faults", metavar="PLAN.json", help=f"scheduled faults, e.g. {FAULT_PLAN_EXAMPLE}"
    )
    actuator.add_argument(
        "--spare-slots",
        type=_at_least_zero,
        default=0,
        metavar="N",
        help="the slots a job may hold beyond what its requirements need: a command with a "
        "basis (the planner's) that would give it more is capped, or SUPERSEDED when it "
        "already has them (default 0; docs/actuator.md, 'Commands checked before they act')",
    )
    actuator.add_argument(
        "--apply-delay",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="wait between consuming a command and applying it (to test crash safety)",
    )
    actuator.add_argument(
        "--snapshot-minutes",
        type=float,
        default=60.0,
        metavar="MINUTES",
        help="how often to write the embedded cluster's snapshot, from which a restart reads "
        "the log on (default 60; 0: only at each start). The decisions topic's retention "
        "must outlast it (7 days by default)",
    )
    actuator.add_argument(
        "--command-memory-hours",
        type=float,
        default=COMMAND_OUTCOMES.retention_ms / 3_600_000,
        metavar="HOURS",
        help="how long the actuator remembers a finished command and a released job, so "
        "that a command delivered again is not applied twice (default %(default).0f: as long "
        "as the command-outcomes topic keeps an outcome; a restart knows no more than that)",
    )
    flinkargs.add_arguments(actuator)
    actuator.set_defaults(handler=_actuator)


def _actuator(args: argparse.Namespace, context: Context) -> int:
    import logging
    import signal
    import time

    from services.actuator.cluster import EmbeddedCluster, Timing
    from services.actuator.control import serve
    from services.actuator.service import Actuator
    from services.contracts import Codec, SchemaRegistry
    from services.contracts.preflight import prepare

    log = logging.getLogger("scalefold.actuator")
    settings = context.settings
    prepare(settings, "actuator")
    timing = Timing(
        provisioning=int(args.provisioning_delay * 1000),
        creation=int(args.creation_delay * 1000),
        cancellation=int(args.cancellation_delay * 1000),
        slots_per_taskmanager=args.slots_per_taskmanager,
    )
    actuator = Actuator(
        settings,
        Codec(SchemaRegistry.load(settings.schemas_dir)),
        EmbeddedCluster(
            timing,
            args.seed,
            spare_slots=args.spare_slots,
            memory_ms=max(1, round(args.command_memory_hours * 3_600_000)),
        ),
        apply_delay_ms=int(args.apply_delay * 1000),
        snapshot_interval_s=args.snapshot_minutes * 60,
    )
    flink = flinkargs.router(args, context.cache_dir, actuator.control.put)
    if flink is not None:
        actuator.offload = flink.submit
        log.info("Flink backends: %s (their jobs' commands go to Flink)", ", ".join(flink.names()))
    server = serve(actuator, args.web_host, args.web_port)
    log.info("control endpoint on http://%s:%d", args.web_host, server.server_address[1])
    started = int(time.time() * 1000)
    for fault in _plan(args.faults):
        actuator.later(started + int(float(fault["at"]) * 1000), _fault(actuator, fault))
    stopping = {"now": False}

    def stop(signum: int, frame: Any) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        actuator.run(lambda: stopping["now"])
    finally:
        server.shutdown()
    return 0


def _at_least_zero(text: str) -> int:
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number >= 0")
    return int(text)


def _plan(path: str | None) -> list[dict[str, Any]]:
    if not path:
        return []
    plan: list[dict[str, Any]] = json.loads(Path(path).read_text())
    return plan


def _fault(actuator: Any, fault: dict[str, Any]) -> Any:
    cluster, job = actuator.cluster, fault["job"]
    kind = fault["fault"]
    if kind == "kill-taskmanager":
        return lambda now: cluster.kill_task_manager(job, now, fault.get("tm"))
    if kind == "fail-task":
        return lambda now: cluster.fail_task(job, now)
    if kind == "fail-checkpoints":
        return lambda now: cluster.fail_checkpoints(job, int(fault.get("count", 3)))
    if kind == "add-taskmanagers":
        return lambda now: cluster.add_task_managers(
            job, int(fault.get("count", 1)), int(fault.get("slots", 1)), now
        )
    raise ValueError(f"unknown fault {kind!r} in the plan")
