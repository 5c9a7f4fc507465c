"""Pure high-watermark math (Kafka's LeaderState.maybeUpdateHighWatermark).

The HW is the end offset that a majority of voters hold durably: sort the voters'
fsynced end offsets descending and take the ⌊n/2⌋-th. It only moves once it passes
the leader's epoch start (Raft §5.4.2: a leader commits an entry of its own epoch
before exposing older ones) and it never goes back.
"""
from __future__ import annotations

from collections.abc import Mapping

__all__ = ["majority_end_offset", "next_high_watermark", "quorum_size"]


def quorum_size(voter_count: int) -> int:
    return voter_count // 2 + 1


def majority_end_offset(end_offsets: Mapping[int, int]) -> int:
    """The largest offset that a majority of the voters have reached (-1 = unknown counts as 0)."""
    if not end_offsets:
        raise ValueError("no voters")
    ordered = sorted((max(v, 0) for v in end_offsets.values()), reverse=True)
    return ordered[len(ordered) // 2]


def next_high_watermark(
    end_offsets: Mapping[int, int], epoch_start_offset: int, current: int
) -> int:
    """The leader's new HW given each voter's fsynced end offset (itself included)."""
    candidate = majority_end_offset(end_offsets)
    if candidate > epoch_start_offset and candidate > current:
        return candidate
    return current
