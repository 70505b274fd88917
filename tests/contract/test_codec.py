"""The wire format: single-object encoding, and a DecodeError for every kind of bad bytes."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from services.contracts import Codec, DecodeError, EncodeError
from services.contracts import records as r
from services.contracts.codec import HEADER_SIZE, MAGIC

GOLDEN = Path(__file__).parent / "golden"


def _golden_bytes(stem: str) -> bytes:
    return bytes.fromhex(json.loads((GOLDEN / f"{stem}.json").read_text())["hex"])


def test_header_is_magic_plus_fingerprint_of_the_writer(codec: Codec) -> None:
    data = codec.encode(r.TIMER_FIRED, {"jobId": "j", "timestamp": 5})
    assert data[:2] == MAGIC
    assert data[2:HEADER_SIZE] == codec.registry.latest(r.TIMER_FIRED).fingerprint


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "shorter than the 10-byte header"),
        (b"\xc3\x01\x00", "shorter than the 10-byte header"),
        (b"\x00\x01" + bytes(8) + b"xx", "missing the single-object magic"),
        (b"\xc3\x01" + bytes(8) + b"xx", "unknown writer schema fingerprint"),
    ],
)
def test_bad_headers_raise_decode_error(codec: Codec, data: bytes, reason: str) -> None:
    with pytest.raises(DecodeError, match=reason):
        codec.decode(data)


def test_truncated_body_raises_decode_error(codec: Codec) -> None:
    data = _golden_bytes("job_submitted.v1")
    with pytest.raises(DecodeError, match=r"not a valid scalefold\.events\.JobSubmitted v1"):
        codec.decode(data[:-7])


def test_trailing_bytes_raise_decode_error(codec: Codec) -> None:
    with pytest.raises(DecodeError, match="3 trailing bytes"):
        codec.decode(_golden_bytes("timer_fired.v1") + b"abc")


def test_unexpected_record_type_raises_decode_error(codec: Codec) -> None:
    with pytest.raises(DecodeError, match="is not one of"):
        codec.decode(_golden_bytes("rescale.v2"), expected=r.INPUT_EVENTS)


def test_non_bytes_raise_decode_error(codec: Codec) -> None:
    with pytest.raises(DecodeError, match="expected bytes"):
        codec.decode("C3 01")  # type: ignore[arg-type]


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_raise_decode_error(data: bytes) -> None:
    with contextlib.suppress(DecodeError):
        _CODEC.decode(data)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(sorted(GOLDEN.glob("*.json"))), st.data())
def test_corrupted_golden_bodies_decode_or_raise_decode_error(
    path: Path, data: st.DataObject
) -> None:
    """Flip bytes after a valid header: never any exception but DecodeError."""
    original = bytearray(bytes.fromhex(json.loads(path.read_text())["hex"]))
    position = data.draw(st.integers(HEADER_SIZE, len(original) - 1))
    original[position] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(HEADER_SIZE, len(original)))
    with contextlib.suppress(DecodeError):
        _CODEC.decode(bytes(original[:cut]))


def test_encode_error_names_the_schema(codec: Codec) -> None:
    with pytest.raises(EncodeError, match="TimerFired"):
        codec.encode(r.TIMER_FIRED, {"jobId": "j", "timestamp": "soon"})


def test_validate_names_the_bad_field(codec: Codec) -> None:
    with pytest.raises(EncodeError, match="slots"):
        codec.validate(
            r.TASK_MANAGER_REGISTERED,
            {"jobId": "j", "timestamp": 1, "taskManagerId": "tm", "slots": "four"},
        )


def test_avro_json_reads_defaults_and_explains_unwrapped_unions(codec: Codec) -> None:
    record = codec.from_avro_json(
        r.JOB_LIFECYCLE_EVENT, '{"jobId":"j","timestamp":1,"kind":"CANCEL"}'
    )
    assert record["recoverable"] is True and record["exception"] is None
    with pytest.raises(DecodeError, match="wrapped"):
        codec.from_avro_json(
            r.JOB_LIFECYCLE_EVENT, '{"jobId":"j","timestamp":1,"kind":"CANCEL","checkpointId":5}'
        )


def test_avro_json_round_trip(codec: Codec) -> None:
    record = {"jobId": "j", "timestamp": 1, "kind": "CHECKPOINT_COMPLETED", "checkpointId": 5}
    text = codec.to_avro_json(
        r.JOB_LIFECYCLE_EVENT,
        codec.from_avro_json(
            r.JOB_LIFECYCLE_EVENT,
            '{"jobId":"j","timestamp":1,"kind":"CHECKPOINT_COMPLETED","checkpointId":{"long":5}}',
        ),
    )
    assert json.loads(text)["checkpointId"] == {"long": record["checkpointId"]}


from services.contracts import SchemaRegistry  # noqa: E402

_CODEC = Codec(SchemaRegistry.load())
