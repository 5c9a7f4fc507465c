import random
import zlib

import pytest
from kafka.partitioner.default import murmur2 as kafka_python_murmur2

from raftkafka.client.partitioner import PARTITIONERS, Partitioner, crc32_partition, murmur2, murmur2_partition

# Vectors from Kafka's UtilsTest.testMurmur2 (Java signed ints).
JAVA_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize("key,expected", sorted(JAVA_VECTORS.items()))
def test_murmur2_matches_kafkas_java_vectors(key, expected):
    assert murmur2(key) == expected


def test_murmur2_matches_kafka_python_for_every_tail_length():
    rng = random.Random(7)
    for length in range(0, 70):
        key = bytes(rng.getrandbits(8) for _ in range(length))
        assert murmur2(key) & 0xFFFFFFFF == kafka_python_murmur2(key)


def test_partition_is_positive_hash_modulo_count():
    for key in JAVA_VECTORS:
        assert murmur2_partition(key, 7) == (JAVA_VECTORS[key] & 0x7FFFFFFF) % 7
        assert crc32_partition(key, 7) == zlib.crc32(key) % 7


def test_null_keys_go_to_available_partitions_only():
    p = Partitioner("murmur2_random", random.Random(1))
    seen = {p.partition(None, 6, [1, 4]) for _ in range(50)}
    assert seen == {1, 4}


def test_null_key_with_consistent_is_partition_zero():
    assert Partitioner("consistent", random.Random(1)).partition(None, 5) == 0
    assert Partitioner("murmur2", random.Random(1)).partition(None, 5) == murmur2_partition(b"", 5)


def test_unknown_partitioner_name_is_rejected():
    with pytest.raises(ValueError):
        Partitioner("sticky-ish", random.Random(0))
    assert "murmur2_random" in PARTITIONERS
