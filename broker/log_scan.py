"""Reading a partition log back batch by batch: for state rebuilt from the log.

The group coordinator replays `__consumer_offsets` partitions when it takes
them over, and the idempotent-producer state replays batch headers after a
snapshot. Both walk the log from an offset to an end with bounded reads (the
log hands out whole batches, at least one per read), so a big partition is
never read into memory at once.
"""
from __future__ import annotations

from typing import Iterator

from storage.log import PartitionLog
from wire.batch_header import HEADER_SIZE, BatchHeader, iter_batches
from wire.errors import CorruptRecordError, DecodeError
from wire.records import ControlType, Record, decode_records, parse_control_record, parse_end_txn_marker

__all__ = ["iter_log_batches", "iter_log_headers", "iter_log_entries", "iter_log_records", "marker_commit", "read_marker"]

READ_CHUNK = 1 << 20


def iter_log_batches(log: PartitionLog, start: int, end: int | None = None,
                     ) -> Iterator[tuple[BatchHeader, memoryview]]:
    """(header, whole batch bytes) for every batch holding offsets in [start, end), oldest first.

    `start` below the log start is raised to it; `end` defaults to the log end.
    A batch that fails its CRC raises wire.errors.CorruptRecordError.
    """
    offset = max(start, log.log_start_offset)
    limit = log.log_end_offset if end is None else min(end, log.log_end_offset)
    while offset < limit:
        data = log.read(offset, READ_CHUNK, max_offset=limit, min_one_batch=True).read()
        if not data:
            return
        view = memoryview(data)
        advanced = False
        for pos, header in iter_batches(data, 0):
            if header.next_offset <= offset:
                continue  # the read starts at the batch holding `offset`
            yield header, view[pos:pos + header.size]
            offset = header.next_offset
            advanced = True
        if not advanced:
            return  # nothing more to read below `limit` (a gap left by compaction)


def iter_log_headers(log: PartitionLog, start: int, end: int | None = None) -> Iterator[BatchHeader]:
    for header, _ in iter_log_batches(log, start, end):
        yield header


def read_marker(header: BatchHeader, batch) -> tuple[bool, int] | None:
    """(commit, coordinator epoch) of a COMMIT / ABORT transaction marker batch, None for any
    other batch (or a marker that does not decode)."""
    if not (header.is_control and header.is_transactional):
        return None
    try:
        records = decode_records(header, bytes(batch[HEADER_SIZE:]))
        if not records:
            return None
        control = parse_control_record(records[0])
        if control.type not in (ControlType.COMMIT, ControlType.ABORT):
            return None
        return control.type == ControlType.COMMIT, parse_end_txn_marker(control)
    except (CorruptRecordError, DecodeError):
        return None


def marker_commit(header: BatchHeader, batch) -> bool | None:
    """True / False for a COMMIT / ABORT transaction marker batch, None for any other batch."""
    marker = read_marker(header, batch)
    return None if marker is None else marker[0]


def iter_log_entries(log: PartitionLog, start: int, end: int | None = None):
    """What producer state replays: each batch's header, or (header, commit, coordinator epoch)
    for a transaction marker."""
    for header, batch in iter_log_batches(log, start, end):
        marker = read_marker(header, batch)
        yield header if marker is None else (header, *marker)


def iter_log_records(log: PartitionLog, start: int, end: int | None = None) -> Iterator[Record]:
    """Every record at or after `start` (control batches skipped), decompressed."""
    for header, batch in iter_log_batches(log, start, end):
        if header.is_control:
            continue
        for record in decode_records(header, bytes(batch[HEADER_SIZE:])):
            if record.offset >= start:
                yield record
