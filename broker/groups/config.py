"""Group coordinator settings, named and defaulted as Kafka's broker configs."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GroupConfig"]


@dataclass(frozen=True, slots=True)
class GroupConfig:
    num_partitions: int = 50                        # offsets.topic.num.partitions
    min_session_timeout_ms: int = 6_000             # group.min.session.timeout.ms
    max_session_timeout_ms: int = 1_800_000         # group.max.session.timeout.ms
    initial_rebalance_delay_ms: int = 3_000         # group.initial.rebalance.delay.ms
    max_group_size: int = 2**31 - 1                 # group.max.size
    new_member_join_timeout_ms: int = 300_000       # KIP-394: a new member that never rejoins
    offsets_retention_ms: int = 7 * 24 * 3_600_000  # offsets.retention.minutes (10080)
    offsets_retention_check_interval_ms: int = 600_000  # offsets.retention.check.interval.ms
    offset_metadata_max_bytes: int = 4_096          # offset.metadata.max.bytes
