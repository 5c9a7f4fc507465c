"""Read exactly the records [start, end) of one topic partition, as Arrow batches.

What `read()` of an input partition runs on an executor. A replayed micro-batch
must see the same rows (G10), so the reader insists on the whole range: it waits
(bounded) while a new leader's high watermark has not yet caught up to `end`,
and it reports data loss when the log no longer holds `start` (retention) or the
partition is gone. Offsets may skip inside a range only where the log itself has
no record (compaction, control batches, aborted transactions under read_committed),
never because of the reader.

Each Fetch answer becomes one Arrow batch, decoded column-wise (`arrow_batches`);
the client fetches the next piece of the range while this one is decoded.
"""
from __future__ import annotations

import time
from typing import Iterator

from spark_source.cluster_io import EARLIEST_TS, LogClient
from spark_source.planning import OffsetRange, report_data_loss

__all__ = ["read_range", "POLL_WAIT_S"]

POLL_WAIT_S = 0.2  # how long one Fetch waits for records at the end of what the log holds


def read_range(client: LogClient, r: OffsetRange, *, include_headers: bool = False, fail_on_data_loss: bool = True,
               wait_timeout_s: float = 30.0, poll_wait_s: float = POLL_WAIT_S) -> Iterator:
    """Yield pyarrow RecordBatches covering [r.start, r.end) in offset order."""
    from spark_source.arrow_batches import decode_fetched  # numpy: only where rows are read
    tp = (r.topic, r.partition)
    position = r.start
    stalled_since: float | None = None
    while position < r.end:
        fetched = client.fetch_raw(tp, position, max_wait_s=poll_wait_s, until=r.end)
        if fetched.out_of_range:
            log_start = client.list_offsets([tp], EARLIEST_TS)[tp]
            if log_start > position:
                # Retention (or a topic re-creation) removed records this range was planned to hold.
                lost_to = min(log_start, r.end)
                report_data_loss(f"Cannot fetch offsets [{position}, {lost_to}) of {r.topic}-{r.partition}: the log "
                                 f"now starts at {log_start}.", fail_on_data_loss)
                position = lost_to
                continue
            # Above the log end: a new leader that has not caught up yet, or a truncated log.
        elif fetched.records:
            batch, next_offset = decode_fetched(fetched.records, position, r.end, topic=r.topic,
                                                partition=r.partition, include_headers=include_headers,
                                                aborted=fetched.aborted)
            if batch is not None:
                yield batch
            if next_offset > position:
                position, stalled_since = next_offset, None
                continue
        # Nothing new: the committed end is below `end` (a new leader catching up). Wait, bounded,
        # rather than return a short range.
        if stalled_since is not None and time.monotonic() - stalled_since >= wait_timeout_s:
            report_data_loss(f"{r.topic}-{r.partition} stopped at offset {position} before the planned end {r.end}; "
                             "the records may have been lost.", fail_on_data_loss)
            break
        stalled_since = stalled_since or time.monotonic()
        if fetched.out_of_range:
            time.sleep(0.05)
