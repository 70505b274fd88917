"""scalefold's partitioner is Kafka's: the same partition as Java, Spark and aiokafka (Faust)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from services.contracts.kafka import murmur2, partition_for


def test_murmur2_matches_kafkas_test_vectors() -> None:
    # org.apache.kafka.common.utils.UtilsTest#testMurmur2
    vectors = {
        b"21": -973932308,
        b"foobar": -790332482,
        b"a-little-bit-long-string": -985981536,
        b"a-little-bit-longer-string": -1486304829,
        b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
        b"abc": 479470107,
    }
    for data, expected in vectors.items():
        assert murmur2(data) == expected


@settings(deadline=None)  # tests never time anything: a busy machine is not a failure
@given(st.binary(max_size=64), st.integers(1, 64))
def test_partition_for_matches_aiokafka(key: bytes, partitions: int) -> None:
    from aiokafka.partitioner import murmur2 as aiokafka_murmur2

    assert partition_for(key, partitions) == (aiokafka_murmur2(key) & 0x7FFFFFFF) % partitions
