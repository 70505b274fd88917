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
