"""Log divergence on fetch (KIP-595 style; Kafka's Partition.readRecords), the leader side.

A fetcher (a follower, or a consumer at Fetch v12+) that sends the epoch of the last record
it holds (`last_fetched_epoch` >= 0) with its fetch offset asks: does my log up to here agree
with yours? The leader looks up where that epoch ends in its own log (the largest epoch <= it
in its epoch cache, and the start of the next one). If that epoch is older than the one asked
about, or it ends before the fetch offset, the fetcher holds records this leader never had (or
truncated): the answer is that diverging epoch and end offset, with no records, and the
fetcher truncates to it before fetching again. Checked before the fetch counts as a follower's
progress, so a diverged follower never moves the ISR or the high watermark.
"""
from __future__ import annotations

from storage.log.epoch_cache import UNDEFINED_EPOCH, UNDEFINED_OFFSET
from wire.error_codes import ErrorCode

__all__ = ["diverging_epoch"]


def diverging_epoch(log, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | int | None:
    """(epoch, end offset) the fetcher diverges at; None if its log agrees with `log` up to
    `fetch_offset` (or it sent no epoch); OFFSET_OUT_OF_RANGE if `log` cannot tell where that
    epoch ended, or the fetch offset is below its log start (Kafka answers so either way)."""
    if last_fetched_epoch < 0:
        return None
    epoch, end = log.end_offset_for_epoch(last_fetched_epoch)
    if epoch == UNDEFINED_EPOCH or end == UNDEFINED_OFFSET or fetch_offset < log.log_start_offset:
        return ErrorCode.OFFSET_OUT_OF_RANGE
    if epoch < last_fetched_epoch or end < fetch_offset:
        return epoch, end
    return None
