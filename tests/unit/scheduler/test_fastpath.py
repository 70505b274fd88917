"""The scheduler's Faust consumer fetches promptly (fastpath.PromptFetchThread)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from services.contracts import Settings
from services.scheduler.adapters.app import ServiceSettings, create_app
from services.scheduler.adapters.fastpath import FETCH_MAX_WAIT_MS


def test_the_workers_kafka_consumer_waits_at_most_100_ms_for_a_fetch(tmp_path: Path) -> None:
    """Faust's driver fixes the wait at 1,500 ms; aiokafka builds its fetcher from the
    consumer's setting when it starts, which this reads without connecting."""
    app = create_app(ServiceSettings(Settings(), data_dir=tmp_path))
    faust_consumer: Any = app.consumer  # its thread is the aiokafka driver's, not typed

    async def built() -> int:  # aiokafka makes its consumer inside the running loop
        consumer = faust_consumer._thread._create_worker_consumer(app.transport)
        return int(consumer._fetch_max_wait_ms)

    assert asyncio.run(built()) == FETCH_MAX_WAIT_MS == 100
