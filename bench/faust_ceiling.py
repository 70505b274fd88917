"""A bare Faust agent: the scheduler service's Faust app and stream, doing nothing.

The ceiling the scheduler bench measures the service against: the same app
settings (`create_app`), the same raw-bytes topic, the same batches
(`take_events(batch_size, within=batch_window_s)`) with Faust's offsets and
acks, and nothing done with the messages. It counts them, and once it has seen
`--events` it prints one JSON line: the seconds from its first message to its
last (start-up, group join and the first batch excluded), and the CPU seconds
it used meanwhile (all its threads).

    python -m bench.faust_ceiling --topic-prefix benchXXXX. --events 50000 --app-id ...
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from services.contracts import Settings
from services.scheduler.adapters.app import ServiceSettings, create_app, job_events_topic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--topic-prefix", required=True)
    parser.add_argument("--app-id", required=True)
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--web-port", type=int, required=True)
    parser.add_argument("--out", required=True, help="file the JSON result is written to")
    parser.add_argument("--stock", action="store_true", help="plain faust.App, no fast hand-over")
    args = parser.parse_args()
    kafka = Settings(
        bootstrap_servers=os.environ["SCALEFOLD_BOOTSTRAP_SERVERS"], topic_prefix=args.topic_prefix
    )
    data = Path(tempfile.mkdtemp(prefix="faust-ceiling-"))
    settings = ServiceSettings(kafka, data_dir=data, web_port=args.web_port, session_timeout_s=6)
    app = create_app(settings, args.app_id, stock=args.stock)
    topic = job_events_topic(app, kafka)
    seen = 0
    counted_from = 0  # the first batch marks the start: its messages are not counted
    first = cpu = 0.0

    @app.agent(topic, name="bare")
    async def bare(stream: Any) -> None:
        nonlocal seen, counted_from, first, cpu
        async for events in stream.take_events(settings.batch_size, within=settings.batch_window_s):
            seen += len(events)
            if not counted_from:
                first, cpu, counted_from = time.monotonic(), time.process_time(), seen
            elif seen >= args.events:
                elapsed = time.monotonic() - first
                result = {
                    "events": seen - counted_from,
                    "seconds": elapsed,
                    "cpu_seconds": time.process_time() - cpu,
                }
                Path(args.out).write_text(json.dumps(result))
                sys.stdout.flush()
                os._exit(0)

    import faust

    worker = faust.Worker(app, loglevel="warning", quiet=True, override_logging=False)
    sys.argv = [sys.argv[0], "worker"]
    worker.execute_from_commandline()


if __name__ == "__main__":
    main()
