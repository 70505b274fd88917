"""Commands for real Flink clusters, applied off the actuator's loop.

A Flink command can take a while (TaskManagers registering, a REST timeout), and the
actuator's one loop also runs the embedded cluster. So each Flink cluster gets a worker
thread: `FlinkRouter.submit` hands it the commands of that cluster's jobs, in order, and
the worker hands each outcome back through the actuator's control queue, which the loop
publishes like any other. A command stays uncommitted until its outcome is out (the
actuator's ledger), so one cut short by a crash is applied again after the restart; the
backend makes that safe (flinkbackend.py).
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import replace

from services.actuator.cluster import Action, Outcome
from services.actuator.flinkbackend import FlinkBackend, flink_answer
from services.contracts.commands import ScalingCommand
from services.contracts.flinkrest import FlinkRest, FlinkRestError

log = logging.getLogger("scalefold.actuator.flink")

Deliver = Callable[[Callable[[int], list[Action]]], None]


class FlinkWorker(threading.Thread):
    """Applies one Flink cluster's commands one at a time, in arrival order."""

    def __init__(self, backend: FlinkBackend, deliver: Deliver) -> None:
        super().__init__(daemon=True, name=f"actuator-flink-{backend.name}")
        self.backend, self.deliver = backend, deliver
        self.commands: queue.Queue[ScalingCommand] = queue.Queue()

    def run(self) -> None:
        answers, line = check(self.backend)
        if answers:
            log.info("%s", line)
        else:
            log.warning("%s; its commands fail until it answers and is trusted", line)
        while True:
            command = self.commands.get()
            result = self.backend.apply(command)
            log.info(
                "command %s on Flink cluster %s: %s %s",
                command.command_id,
                self.backend.name,
                result.status,
                result.message,
            )
            outcome = Outcome(
                0,
                command.command_id,
                command.job_id,
                command.action,
                result.status,
                result.message,
                tuple(sorted(result.details)),
                backend=self.backend.label,
            )
            self.deliver(_published(outcome))


def check(backend: FlinkBackend) -> tuple[bool, str]:
    """Whether the cluster's REST endpoint answers (over https: with a certificate that
    verifies against its CA), in one line. The worker says it when it starts, so that an
    untrusted certificate shows before the first command's FAILED outcome does."""
    url = backend.rest_url()
    if url is None:
        return False, f"Flink cluster {backend.name}: no REST URL yet (its JobManager not started)"
    try:
        ca = backend.ca()
        # Any HTTP status: the endpoint answered, so the handshake verified.
        FlinkRest(url, backend.timeout, ca).get_raw("/overview")
    except FlinkRestError as error:
        return False, f"Flink cluster {backend.name}: {flink_answer(error)}"
    except Exception as error:  # a CA file that is missing or not PEM: said, not raised
        return False, f"Flink cluster {backend.name}: {type(error).__name__}: {error}"
    how = "plain HTTP"
    if url.startswith("https:"):
        how = f"TLS, certificate verified against {ca or 'the system CAs'}"
    return True, f"Flink cluster {backend.name} answers at {url.rstrip('/')} ({how})"


def _published(outcome: Outcome) -> Callable[[int], list[Action]]:
    """The control-queue operation that publishes `outcome` when the loop runs it."""

    def now(at: int) -> list[Action]:
        return [replace(outcome, due=at)]

    return now


class FlinkRouter:
    """The actuator's Flink backends by cluster name; the embedded cluster takes the rest."""

    def __init__(self, backends: list[FlinkBackend], deliver: Deliver) -> None:
        self.workers = [FlinkWorker(backend, deliver) for backend in backends]
        for worker in self.workers:
            worker.start()

    def submit(self, command: ScalingCommand) -> bool:
        """Queue the command on its cluster's worker; False if no Flink backend takes it."""
        for worker in self.workers:
            if worker.backend.handles(command.job_id):
                worker.commands.put(command)
                return True
        return False

    def names(self) -> list[str]:
        return [worker.backend.name for worker in self.workers]
