"""Key → partition, compatible with Kafka's Java client and librdkafka.

Kafka's Java producer hashes keys with murmur2 (seed 0x9747b28c) and takes
`(hash & 0x7fffffff) % partitions`. librdkafka's *default* is different:
`consistent_random` hashes keys with CRC-32. A topic written by both agrees
on key placement only if the librdkafka side sets `partitioner=murmur2_random`
(confluent-kafka users do this for Java compatibility).

Our default is `murmur2_random`, i.e. the Java placement for keyed records.
Records without a key are sticky, as in Kafka's producer (KIP-480): they all
go to one available partition, drawn at random (from the Env's rng, so
simulation runs stay deterministic), until its batch is full or sent; the
next batch goes to another one (`Partitioner.next_sticky`, which the
producer calls). The librdkafka names are accepted ("random" = sticky for
null keys, random for each keyed record):

    murmur2_random  murmur2 for keys, sticky for null keys   (default; Java)
    murmur2         murmur2 for keys, murmur2(b"") for null keys
    consistent_random  crc32 for keys, sticky for null keys  (librdkafka default)
    consistent      crc32 for keys and null keys (crc32(b"") = 0)
    random          always random
"""
from __future__ import annotations

import random
import struct
import zlib
from typing import Callable, Sequence

__all__ = ["murmur2", "murmur2_partition", "crc32_partition", "Partitioner", "PARTITIONERS"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`, as a signed 32-bit int (the Java value)."""
    length = len(data)
    h = (0x9747B28C ^ length) & _MASK
    blocks = length // 4
    if blocks:
        for k in struct.unpack_from(f"<{blocks}I", data):
            k = (k * _M) & _MASK
            k ^= k >> 24
            k = (k * _M) & _MASK
            h = ((h * _M) & _MASK) ^ k
    tail = length & 3
    base = length & ~3
    if tail == 3:
        h ^= data[base + 2] << 16
    if tail >= 2:
        h ^= data[base + 1] << 8
    if tail >= 1:
        h ^= data[base]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def murmur2_partition(key: bytes, num_partitions: int) -> int:
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


def crc32_partition(key: bytes, num_partitions: int) -> int:
    return zlib.crc32(key) % num_partitions


class Partitioner:
    """`partition(key, num_partitions, available)`: `available` lists partitions that
    have a leader; null keys pick among them (all partitions if none has one)."""

    def __init__(self, name: str, rng: random.Random):
        if name not in PARTITIONERS:
            raise ValueError(f"unknown partitioner {name!r}; choose one of {sorted(PARTITIONERS)}")
        self.name = name
        self._keyed, self._null = PARTITIONERS[name]
        self._rng = rng
        self.sticky_nulls = self._null is None  # null keys stay on one partition a batch at a time

    def partition(self, key: bytes | None, num_partitions: int, available: Sequence[int] = ()) -> int:
        if num_partitions <= 0:
            raise ValueError("a topic has at least one partition")
        if key is not None and self._keyed is not None:
            return self._keyed(key, num_partitions)
        if self._null is not None:
            return self._null(b"", num_partitions)
        choices = available or range(num_partitions)
        return choices[self._rng.randrange(len(choices))] if len(choices) > 1 else choices[0]

    def next_sticky(self, num_partitions: int, available: Sequence[int] = (), previous: int | None = None) -> int:
        """The partition null-key records go to next: a random available one, other than
        `previous` where there is a choice (Kafka's StickyPartitionCache.nextPartition)."""
        choices = available or range(num_partitions)
        if previous in choices and len(choices) > 1:
            choices = [p for p in choices if p != previous]
        return choices[self._rng.randrange(len(choices))] if len(choices) > 1 else choices[0]


_Hash = Callable[[bytes, int], int]
# name -> (hash for keyed records, hash for null keys); None = random.
PARTITIONERS: dict[str, tuple[_Hash | None, _Hash | None]] = {
    "murmur2_random": (murmur2_partition, None),
    "murmur2": (murmur2_partition, murmur2_partition),
    "consistent_random": (crc32_partition, None),
    "consistent": (crc32_partition, crc32_partition),
    "random": (None, None),
}
