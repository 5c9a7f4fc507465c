"""Which segments retention may delete (Kafka's deleteOldSegments), as a pure function.

Segments go oldest first and whole; the walk stops at the first segment that
must stay. A segment is deletable only if it is not the active one and lies
entirely below the high watermark (a follower must not lose what the leader
has not yet committed). Reasons, checked for each segment in turn:

- log start offset: the next segment starts at or below the log start offset
  (DeleteRecords moved it past this segment) — applies under any policy;
- retention.ms: the segment's newest timestamp is older than now - retention.ms;
- retention.bytes: the log would still be at least retention.bytes without it.

The last two apply only when cleanup.policy includes "delete".
"""
from __future__ import annotations

from storage.log.log_config import LogConfig
from storage.log.segment import LogSegment

__all__ = ["segments_to_delete"]


def segments_to_delete(
    segments: list[LogSegment], *, config: LogConfig, now_ms: int, log_start_offset: int, high_watermark: int
) -> list[LogSegment]:
    """The oldest segments retention removes (never the last, never at/after the HW)."""
    doomed: list[LogSegment] = []
    excess = sum(s.size for s in segments) - config.retention_bytes if config.retention_bytes >= 0 else -1
    for segment, following in zip(segments, segments[1:]):
        upper = following.base_offset
        if upper > high_watermark:
            break
        by_start = upper <= log_start_offset
        by_time = config.delete and config.retention_ms >= 0 and now_ms - segment.largest_timestamp > config.retention_ms
        by_size = config.delete and config.retention_bytes >= 0 and excess - segment.size >= 0
        if not (by_start or by_time or by_size):
            break
        doomed.append(segment)
        excess -= segment.size
    return doomed
