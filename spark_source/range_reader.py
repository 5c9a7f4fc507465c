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

from spark_source.arrow_rows import TIMESTAMP_TYPE_CREATE, TIMESTAMP_TYPE_LOG_APPEND, RowColumns
from spark_source.cluster_io import LogClient, iter_batch_records
from spark_source.planning import OffsetRange, report_data_loss
from wire.error_codes import ErrorCode
from wire.records import decode_records

__all__ = ["read_range", "ROWS_PER_ARROW_BATCH"]

ROWS_PER_ARROW_BATCH = 20_000


def read_range(client: LogClient, r: OffsetRange, *, include_headers: bool = False, fail_on_data_loss: bool = True,
               wait_timeout_s: float = 30.0, fetch_bytes: int = 4 << 20) -> Iterator:
    """Yield pyarrow RecordBatches covering [r.start, r.end) in offset order."""
    columns = RowColumns(r.topic, r.partition, include_headers)
    tp = (r.topic, r.partition)
    position = r.start
    stalled_since: float | None = None
    while position < r.end:
        chunk = client.fetch(tp, position, fetch_bytes)
        if chunk.log_start_offset > position:
            # Retention (or a topic re-creation) removed records this range was planned to hold.
            lost_to = min(chunk.log_start_offset, r.end)
            report_data_loss(f"Cannot fetch offsets [{position}, {lost_to}) of {r.topic}-{r.partition}: the log "
                             f"now starts at {chunk.log_start_offset}.", fail_on_data_loss)
            position = lost_to
            continue
        if chunk.error == ErrorCode.OFFSET_OUT_OF_RANGE:
            # Above the log end: a new leader that has not caught up yet, or a truncated log.
            if _stalled(stalled_since, wait_timeout_s):
                report_data_loss(f"{r.topic}-{r.partition} ends at {chunk.high_watermark}, below the planned "
                                 f"range [{position}, {r.end}); the records may have been lost.", fail_on_data_loss)
                break
            stalled_since = stalled_since or time.monotonic()
            time.sleep(0.05)
            continue
        advanced = False
        for header, payload in iter_batch_records(chunk.records):
            last = header.base_offset + header.last_offset_delta
            if last < position or header.is_control:
                position = max(position, last + 1)
                advanced = True
                continue
            ts_type = TIMESTAMP_TYPE_LOG_APPEND if header.log_append_time else TIMESTAMP_TYPE_CREATE
            records = decode_records(header, payload)
            if header.log_append_time:
                records = [_with_timestamp(rec, header.max_timestamp) for rec in records]
            columns.add((rec for rec in records if position <= rec.offset < r.end), ts_type)
            position = min(last + 1, r.end)
            advanced = True
            if len(columns) >= ROWS_PER_ARROW_BATCH:
                yield columns.flush()
            if position >= r.end:
                break
        if advanced:
            stalled_since = None
            continue
        # Nothing new: the watermark is below `end` (a new leader catching up). Wait, bounded,
        # rather than return a short range.
        if _stalled(stalled_since, wait_timeout_s):
            report_data_loss(f"{r.topic}-{r.partition} stopped at offset {position} (high watermark "
                             f"{chunk.high_watermark}) before the planned end {r.end}; the records may have been "
                             "lost.", fail_on_data_loss)
            break
        stalled_since = stalled_since or time.monotonic()
    if len(columns):
        yield columns.flush()


def _stalled(since: float | None, timeout: float) -> bool:
    return since is not None and time.monotonic() - since >= timeout


def _with_timestamp(rec, timestamp: int):
    from wire.records import Record
    return Record(rec.offset, timestamp, rec.key, rec.value, rec.headers)
