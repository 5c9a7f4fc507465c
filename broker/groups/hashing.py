"""Which `__consumer_offsets` partition (and so which coordinator) owns a group.

Kafka: `Utils.abs(groupId.hashCode()) % offsets.topic.num.partitions`, with
Java's String.hashCode over UTF-16 code units and Utils.abs mapping
Integer.MIN_VALUE to 0 (not to itself, as Math.abs would). Every Kafka client
tool and broker agrees on this mapping, so ours must match bit for bit.
"""
from __future__ import annotations

import sys

__all__ = ["java_string_hash", "partition_for_group"]


_UTF16_NATIVE = "utf-16-le" if sys.byteorder == "little" else "utf-16-be"


def java_string_hash(text: str) -> int:
    """java.lang.String.hashCode(): s[0]*31^(n-1) + ... + s[n-1] over UTF-16 units, as a signed int32."""
    h = 0
    for unit in memoryview(text.encode(_UTF16_NATIVE, "surrogatepass")).cast("H"):
        h = (31 * h + unit) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def _kafka_abs(n: int) -> int:
    return 0 if n == -(1 << 31) else abs(n)


def partition_for_group(group_id: str, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError(f"offsets topic partition count must be positive, got {num_partitions}")
    return _kafka_abs(java_string_hash(group_id)) % num_partitions
