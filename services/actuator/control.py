"""The actuator's local control endpoint: health, state, metrics, and the embedded
cluster's manual operations (add TaskManagers, inject faults). Loopback only."""

from __future__ import annotations

import json
import threading
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from services.actuator.service import Actuator

OPERATIONS = {
    "/taskmanagers": "add TaskManagers: job, count=1, slots=1",
    "/faults/kill-taskmanager": "kill a TaskManager: job, tm (default: one running tasks, chosen by the seed)",
    "/faults/fail-task": "fail a task: job",
    "/faults/fail-checkpoints": "fail the next checkpoints: job, count=3",
}


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
            cluster = actuator.cluster
            if url.path == "/taskmanagers":
                count, slots = int(query.get("count", 1)), int(query.get("slots", 1))
                actuator.control.put(lambda now: cluster.add_task_managers(job, count, slots, now))
            elif url.path == "/faults/kill-taskmanager":
                actuator.control.put(
                    lambda now: cluster.kill_task_manager(job, now, query.get("tm"))
                )
            elif url.path == "/faults/fail-task":
                actuator.control.put(lambda now: cluster.fail_task(job, now))
            else:
                count = int(query.get("count", 3))
                actuator.control.put(lambda now: cluster.fail_checkpoints(job, count))
            self._json(202, {"accepted": url.path, "job": job})

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


def post(port: int, path: str, host: str = "127.0.0.1", **query: Any) -> dict[str, Any]:
    """Call an operation of a running actuator (what `scalefold cluster ...` does)."""
    params = "&".join(f"{k}={v}" for k, v in query.items() if v is not None)
    request = urllib.request.Request(f"http://{host}:{port}{path}?{params}", method="POST")
    with urllib.request.urlopen(request, timeout=5) as response:
        result: dict[str, Any] = json.load(response)
        return result
