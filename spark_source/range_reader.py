"""Read exactly the records [start, end) of one topic partition, as Arrow batches.

What `read()` of an input partition runs on an executor. A replayed micro-batch
must see the same rows (G10), so the reader insists on the whole range: it waits
(bounded) while a new leader's high watermark has not yet caught up to `end`,
and it reports data loss when the log no longer holds `start` (retention) or the
partition is gone. Offsets may skip inside a range only where the log itself has
no record (compaction, control batches), never because of the reader.
"""
from __future__ import annotations

import time
from typing import Iterator

from spark_source.arrow_rows import RowColumns
from spark_source.cluster_io import EARLIEST_TS, LogClient
from spark_source.planning import OffsetRange, report_data_loss

__all__ = ["read_range", "ROWS_PER_ARROW_BATCH"]

ROWS_PER_ARROW_BATCH = 20_000


def read_range(client: LogClient, r: OffsetRange, *, include_headers: bool = False, fail_on_data_loss: bool = True,
               wait_timeout_s: float = 30.0, poll_wait_s: float = 0.2) -> Iterator:
    """Yield pyarrow RecordBatches covering [r.start, r.end) in offset order."""
    columns = RowColumns(r.topic, r.partition, include_headers)
    tp = (r.topic, r.partition)
    position = r.start
    stalled_since: float | None = None
    while position < r.end:
        fetched = client.fetch(tp, position, max_records=ROWS_PER_ARROW_BATCH, max_wait_s=poll_wait_s)
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
        elif fetched.next_offset > position:
            columns.add(rec for rec in fetched.records if rec.offset < r.end)
            position = min(fetched.next_offset, r.end)
            stalled_since = None
            if len(columns) >= ROWS_PER_ARROW_BATCH:
                yield columns.flush()
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
    if len(columns):
        yield columns.flush()
