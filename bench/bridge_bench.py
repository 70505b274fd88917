"""Benchmark of the Flink bridge (not a test): its CPU per job polled, at 100 jobs.

    .venv/bin/scalefold local run -- .venv/bin/python -m bench.bridge_bench [--jobs 100]
        [--polls 20] [--json]

A local HTTP server, in a process of its own (its CPU is not the bridge's), answers
like Flink 2.3.0 for `--jobs` jobs: each job the answers captured from a real
JobManager (tests/unit/bridge/answers: 2 completed rescales, 3 TaskManagers), under
its own job id. The bridge (`services.bridge`: poller, step, Kafka sink, against the
broker of SCALEFOLD_BOOTSTRAP_SERVERS, topics under a fresh prefix) then polls it:
1. the first poll: every job new (JobSubmitted, 3 TaskManagers, 2 rescale records and
   an offset each, one transaction);
2. `--polls` steady polls: nothing changed, so 5 GETs a job and nothing sent.
The bridge's CPU (time.process_time of this process, the server apart) is reported per
poll and per job polled.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from services.bridge.poll import ClusterPoller
from services.bridge.service import Bridge
from services.bridge.sink import Sink
from services.contracts import Codec, SchemaRegistry
from services.contracts.flinkrest import FlinkRest
from services.contracts.kafka import ensure_topics
from services.contracts.settings import Settings

ANSWERS = Path(__file__).resolve().parents[1] / "tests" / "unit" / "bridge" / "answers"
CAPTURED_JID = "cc408c8079b82a80a401c5ac85881e95"
UUIDS = ("afc103edd691c5267ae684fefa3ae972", "f92913c3d29ca43b741b9115e1b16e4a")


def answers(jobs: int) -> dict[str, bytes]:
    """Path -> body of `jobs` jobs, each the captured job under its own id."""
    table: dict[str, bytes] = {"/taskmanagers": (ANSWERS / "taskmanagers.json").read_bytes()}
    ids = [f"{i:08x}" + CAPTURED_JID[8:] for i in range(jobs)]
    overview = {"jobs": [{"jid": jid, "state": "RUNNING"} for jid in ids]}
    table["/jobs/overview"] = json.dumps(overview).encode()
    files = {
        "": "job.json",
        "/resource-requirements": "resource-requirements.json",
        "/rescales/config": "rescales-config.json",
        "/config": "job-config.json",
        "/exceptions": "exceptions.json",
        "/checkpoints": "checkpoints.json",
        "/checkpoints/config": "checkpoints-config.json",
        "/rescales/history": "rescales-history.json",
        **{f"/rescales/details/{u}": f"rescales-details-{u}.json" for u in UUIDS},
    }
    for jid in ids:
        for suffix, name in files.items():
            body = (ANSWERS / name).read_bytes().replace(CAPTURED_JID.encode(), jid.encode())
            table[f"/jobs/{jid}{suffix}"] = body
    return table


def serve(jobs: int, port_out: Any) -> None:
    table = answers(jobs)

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def do_GET(self) -> None:
            body = table.get(self.path)
            self.send_response(200 if body is not None else 404)
            body = body if body is not None else b'{"errors": ["not found"]}'
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port_out.put(server.server_address[1])
    server.serve_forever()


def measure(jobs: int, polls: int) -> dict[str, Any]:
    queue: Any = multiprocessing.Queue()
    server = multiprocessing.Process(target=serve, args=(jobs, queue), daemon=True)
    server.start()
    port = queue.get(timeout=60)
    base = Settings.from_env(os.environ)
    settings = base.with_overrides(topic_prefix=f"bench{uuid.uuid4().hex[:8]}.")
    ensure_topics(settings, settings.topics.all())
    codec = Codec(SchemaRegistry.load(settings.schemas_dir))
    sink = Sink(settings, codec, f"{settings.topics.own('bridge')}.bench")
    bridge = Bridge([ClusterPoller("bench", FlinkRest(f"http://127.0.0.1:{port}"))], sink, 5.0, {})
    try:
        first = timed(lambda: bridge.step(0.0))
        steady = [timed(lambda i=i: bridge.step(5.0 * (i + 1))) for i in range(polls)]
    finally:
        sink.close()
        server.terminate()
    cpu = sorted(c for c, _ in steady)
    median = cpu[len(cpu) // 2]
    return {
        "jobs": jobs,
        "first_poll": {"cpu_s": first[0], "wall_s": first[1], "per_job_ms": first[0] / jobs * 1e3},
        "steady_poll_cpu_s_median": median,
        "steady_poll_wall_s_median": sorted(w for _, w in steady)[len(steady) // 2],
        "steady_cpu_per_job_ms": median / jobs * 1e3,
        "cpu_share_at_5s_interval": median / 5.0,
        "offsets": len(bridge.offsets),
    }


def timed(call: Any) -> tuple[float, float]:
    cpu, wall = time.process_time(), time.perf_counter()
    call()
    return time.process_time() - cpu, time.perf_counter() - wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--polls", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = measure(args.jobs, args.polls)
    if args.json:
        print(json.dumps(result))
        return
    first = result["first_poll"]
    print(f"jobs polled: {result['jobs']} (offsets kept: {result['offsets']})")
    print(
        f"first poll (all new, sent): {first['cpu_s'] * 1e3:.0f} ms CPU, "
        f"{first['wall_s'] * 1e3:.0f} ms wall, {first['per_job_ms']:.2f} ms CPU a job"
    )
    print(
        f"steady poll (median of {args.polls}): {result['steady_poll_cpu_s_median'] * 1e3:.0f} ms CPU, "
        f"{result['steady_poll_wall_s_median'] * 1e3:.0f} ms wall, "
        f"{result['steady_cpu_per_job_ms']:.2f} ms CPU a job; "
        f"{result['cpu_share_at_5s_interval'] * 100:.1f} % of a core at a 5 s interval"
    )


if __name__ == "__main__":
    main()
