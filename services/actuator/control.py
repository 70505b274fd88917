"""The actuator's local control endpoint: health, state, metrics, and the embedded
cluster's manual operations (add TaskManagers, inject faults). Loopback only.

An operation runs on the actuator's loop (the cluster has one writer); the request
waits for it, so its reply can say what was done (`scalefold cluster` then waits
for the scheduler's verdict on the events it names)."""

from __future__ import annotations

import json
import queue
import threading
import urllib.request
from collections.abc import Callable
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from services.actuator.cluster import Action, EmbeddedCluster, Emit
from services.actuator.service import Actuator
from services.contracts.events import to_record
from services.contracts.records import short_name

OPERATIONS = {
    "/taskmanagers": "add TaskManagers: job, count=1, slots=1",
    "/faults/kill-taskmanager": "kill a TaskManager: job, tm (default: one running tasks, chosen by the seed)",
    "/faults/fail-task": "fail a task: job",
    "/faults/fail-checkpoints": "fail the next checkpoints: job, count=3",
}
"""Each also takes `request`: an id the emitted events carry as a header (REQUEST_HEADER).
The reply says what was done: the events emitted, by type and TaskManager."""

ANSWER_S = 3.0
"""How long a request waits for the actuator's loop to carry it out, for its reply."""


def serve(actuator: Actuator, host: str, port: int) -> ThreadingHTTPServer:
    """Start the endpoint in a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = urlparse(self.path).path
            if path == "/health":
                body = actuator.status()
                self._json(200 if actuator.ready else 503, body)
            elif path == "/state":
                self._json(200, actuator.cluster.snapshot())
            elif path == "/metrics":
                lines = [
                    f"scalefold_actuator_{k}_total {v}" for k, v in vars(actuator.metrics).items()
                ]
                self._text(200, "\n".join(lines) + "\n")
            else:
                self._json(404, {"error": "unknown path", "operations": OPERATIONS})

        def do_POST(self) -> None:
            url = urlparse(self.path)
            query = {k: v[0] for k, v in parse_qs(url.query).items()}
            job = query.get("job")
            if url.path not in OPERATIONS or not job:
                self._json(
                    400, {"error": "POST one of these with ?job=...", "operations": OPERATIONS}
                )
                return
            answered: queue.Queue[dict[str, Any]] = queue.Queue(1)
            actuator.control.put(_carried_out(actuator, url.path, query, answered))
            try:  # the loop steps every ~60 ms: the answer says what it did
                done = answered.get(timeout=ANSWER_S)
            except queue.Empty:
                done = {"events": None}  # not yet carried out: it will be
            self._json(202, {"accepted": url.path, "job": job, **done})

        def _json(self, status: int, body: Any) -> None:
            self._text(status, json.dumps(body, indent=2) + "\n", "application/json")

        def _text(self, status: int, text: str, kind: str = "text/plain") -> None:
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:  # requests are not worth a log line
            pass

    server = ThreadingHTTPServer((host, port), Handler)
    threading.Thread(target=server.serve_forever, daemon=True, name="actuator-control").start()
    return server


def _carried_out(
    actuator: Actuator, path: str, query: dict[str, str], answered: queue.Queue[dict[str, Any]]
) -> Callable[[int], list[Action]]:
    """The operation for the actuator's loop: it tags the events it emits with the
    request (`REQUEST_HEADER`) and puts what it did on `answered`, for the reply."""
    cluster, job, request = actuator.cluster, query["job"], query.get("request")
    operation = _operation(cluster, path, job, query)

    def run(now: int) -> list[Action]:
        actions = [
            replace(a, request=request) if isinstance(a, Emit) else a for a in operation(now)
        ]
        emitted = [_event(a.event) for a in actions if isinstance(a, Emit)]
        done: dict[str, Any] = {"request": request, "events": emitted}
        if path == "/faults/fail-checkpoints" and job in cluster.jobs:
            done["failingCheckpoints"] = cluster.jobs[job].failing_checkpoints
        answered.put(done)
        return actions

    return run


def _operation(
    cluster: EmbeddedCluster, path: str, job: str, query: dict[str, str]
) -> Callable[[int], list[Action]]:
    if path == "/taskmanagers":
        count, slots = int(query.get("count", 1)), int(query.get("slots", 1))
        return lambda now: cluster.add_task_managers(job, count, slots, now)
    if path == "/faults/kill-taskmanager":
        return lambda now: cluster.kill_task_manager(job, now, query.get("tm"))
    if path == "/faults/fail-task":
        return lambda now: cluster.fail_task(job, now)
    count = int(query.get("count", 3))
    return lambda now: cluster.fail_checkpoints(job, count)


def _event(event: Any) -> dict[str, Any]:
    """An emitted event as the reply names it: its record's name and what it is about."""
    named = {"type": short_name(to_record(event)[0])}
    if hasattr(event, "task_manager_id"):
        named["taskManager"] = event.task_manager_id
    if hasattr(event, "kind"):
        named["kind"] = str(event.kind)
    return named


def post(port: int, path: str, host: str = "127.0.0.1", **query: Any) -> dict[str, Any]:
    """Call an operation of a running actuator (what `scalefold cluster ...` does)."""
    params = "&".join(f"{k}={v}" for k, v in query.items() if v is not None)
    request = urllib.request.Request(f"http://{host}:{port}{path}?{params}", method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        result: dict[str, Any] = json.load(response)
        return result
