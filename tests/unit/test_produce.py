"""`scalefold produce` keeps out of the embedded runtime's checkpoint ids."""

from __future__ import annotations

import pytest

from services.contracts import Codec
from services.contracts import records as r
from services.contracts.events import RUNTIME_CHECKPOINT_IDS
from services.tools.produce import ProduceError, record_from_args


def lifecycle(codec: Codec, checkpoint: int) -> dict[str, object]:
    args = ["--job-id", "j", "--kind", "CHECKPOINT_COMPLETED", "--checkpoint-id", str(checkpoint)]
    return record_from_args(codec, r.JOB_LIFECYCLE_EVENT, args, now_ms=5)


def test_a_checkpoint_id_of_the_runtimes_range_is_refused(codec: Codec) -> None:
    assert lifecycle(codec, 7)["checkpointId"] == 7
    with pytest.raises(ProduceError, match="embedded runtime"):
        lifecycle(codec, RUNTIME_CHECKPOINT_IDS + 1)


def test_paced_keeps_the_logs_times_and_divides_the_waits() -> None:
    from services.tools.produce import paced

    assert paced([1000, 3000, 11000], start_ms=50_000, speed=10) == [
        (50_000, 0.0),
        (52_000, 0.2),
        (60_000, 1.0),
    ]
    with pytest.raises(ProduceError, match="positive"):
        paced([0], 0, 0)
