"""Log compaction (Kafka's LogCleaner, one log at a time).

A pass over a log with cleanup.policy=compact:

1. The dirty section runs from `first_dirty` (the cleaner checkpoint) to the
   first uncleanable offset: the active segment, the last stable offset (the
   high watermark when the caller knows no transactions), and any segment
   younger than min.compaction.lag.ms are never cleaned. At most
   `max_dirty_bytes` of whole dirty segments are taken per pass, which bounds
   the pass's memory (the offset map) and its I/O.
2. An offset map key -> last offset is built over that dirty section (records of
   aborted transactions left out: an aborted record never displaces a committed one).
3. Every segment below the end of the mapped section is rewritten in groups
   (a group fits in one segment): a record is kept if no later record has its
   key; keyless records are dropped (invalid in a compacted topic). Kept
   records keep their offsets; each batch keeps its base offset, last offset
   delta, producer fields and compression. A batch left with no records is
   dropped, except the last batch of a group, which stays as an empty batch so
   the group's offset range (and so crash recovery of a swap) is unchanged, and
   so does the last data batch of each producer (its sequence numbers are what the
   producer state rebuilds from). Unchanged batches are copied byte for byte.
   Transactions (storage.log.cleaner_txns, from the aborted transaction index):
   records of aborted transactions are removed; committed transactional records are
   cleaned as any other; a COMMIT/ABORT marker is removed once no record of its
   transaction is left, after a delete horizon as a tombstone. The index of each
   cleaned segment keeps the entries of the ABORT markers it keeps.
4. Tombstones (null value) follow KIP-534: the first pass that keeps one
   stamps its batch with a delete horizon = now + delete.retention.ms; a
   later pass after the horizon removes it.
5. Each group's output is written as `.cleaned`, fsynced and swapped in by
   `PartitionLog.replace_segments` (crash-safe, see there). Readers keep
   reading the old segments meanwhile; the pass yields to the event loop
   between batches and gives up a group if the log was truncated or
   retention removed its segments underneath it.

A record that does not decode raises CorruptRecordError out of the pass (no
`.cleaned` file is left behind); the log manager then skips that log.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from storage.env import Env
from storage.log.log import PartitionLog
from storage.log.batch_scan import iter_batch_bytes
from storage.log.cleaner_txns import CleanedTransactions
from storage.log.segment import CLEANED_SUFFIX, LogSegment
from wire.batch_header import ATTR_DELETE_HORIZON, HEADER_SIZE, BatchHeader, parse_header
from wire.errors import CorruptRecordError
from wire.errors import DecodeError
from wire.records import ControlType, Compression, SimpleRecord, build_batch, decode_records, parse_control_record

__all__ = ["CleanResult", "clean_log", "cleanable_range", "dirty_ratio", "OffsetMap"]


@dataclass
class CleanResult:
    first_dirty: int  # the next pass starts here (the new cleaner checkpoint)
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0
    groups_cleaned: int = 0
    aborted: bool = False
    earliest_delete_horizon: int | None = None  # when a later pass can drop kept tombstones
    stats: dict = field(default_factory=dict)


class OffsetMap:
    """key -> last offset in the dirty section, bounded in entries."""

    def __init__(self, max_entries: int):
        self.max_entries = max_entries
        self._map: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._map)

    @property
    def full(self) -> bool:
        return len(self._map) >= self.max_entries

    def put(self, key: bytes, offset: int) -> None:
        self._map[key] = offset

    def get(self, key: bytes) -> int:
        return self._map.get(key, -1)


def cleanable_range(log: PartitionLog, first_dirty: int, now_ms: int,
                    stable_offset: int | None = None) -> tuple[int, int]:
    """(first dirty offset, first uncleanable offset) for `log` now; `stable_offset`: its last
    stable offset, with every ABORT marker below it indexed (default: the high watermark)."""
    cfg = log.config
    stable = log.high_watermark if stable_offset is None else min(stable_offset, log.high_watermark)
    uncleanable = min(log.active_segment.base_offset, stable)
    if cfg.min_compaction_lag_ms > 0:
        for segment in log.segments:
            if segment.base_offset >= uncleanable:
                break
            if now_ms - segment.largest_timestamp < cfg.min_compaction_lag_ms:
                uncleanable = segment.base_offset
                break
    first_dirty = max(first_dirty, log.log_start_offset)
    return min(first_dirty, uncleanable), uncleanable


def dirty_ratio(log: PartitionLog, first_dirty: int, uncleanable: int) -> float:
    """Bytes in the dirty section over bytes in the cleanable part of the log."""
    clean = dirty = 0
    for segment in log.segments:
        if segment.base_offset >= uncleanable or segment.next_offset > uncleanable:
            break
        if segment.next_offset <= first_dirty:
            clean += segment.size
        else:
            dirty += segment.size
    total = clean + dirty
    return dirty / total if total else 0.0


def _batches(segment: LogSegment):
    return iter_batch_bytes(segment.log, 0, segment.size)


async def clean_log(
    env: Env, log: PartitionLog, first_dirty: int, *, now_ms: int | None = None,
    max_dirty_bytes: int = 128 << 20, max_map_entries: int = 4_000_000, stable_offset: int | None = None,
) -> CleanResult:
    now_ms = env.wall_ms() if now_ms is None else now_ms
    first_dirty, uncleanable = cleanable_range(log, first_dirty, now_ms, stable_offset)
    result = CleanResult(first_dirty=first_dirty)
    version = log.structure_version
    await log.flush(uncleanable)  # only durable segments are rewritten

    # 1-2. Map the dirty section (whole segments within the budget).
    offset_map = OffsetMap(max_map_entries)
    txns = CleanedTransactions(log.collect_aborted_txns(first_dirty, uncleanable))
    end = first_dirty
    budget = max_dirty_bytes
    for segment in log.segments:
        if segment.next_offset <= first_dirty:
            continue
        if segment.next_offset > uncleanable or segment is log.active_segment:
            break
        if end > first_dirty and (segment.size > budget or offset_map.full):
            break
        for header, data in _batches(segment):
            result.bytes_read += len(data)
            if header.is_control:
                txns.on_marker(header, _marker_commit(header, data))
                continue
            if txns.on_batch(header):
                continue  # aborted
            for record in decode_records(header, memoryview(data)[HEADER_SIZE:]):
                if record.key is not None:
                    offset_map.put(record.key, record.offset)
        budget -= segment.size
        end = segment.next_offset
        await env.sleep(0)
        if log.structure_version != version:  # truncated or replaced while we yielded
            result.aborted = True
            return result

    # 3-5. Rewrite everything below `end`, group by group.
    groups = _group_segments([s for s in log.segments if s.next_offset <= end and s is not log.active_segment],
                             log.config.segment_bytes)
    walk = _Walk(log, offset_map, CleanedTransactions(log.collect_aborted_txns(log.log_start_offset, end)),
                 now_ms, log.config.delete_retention_ms)
    for group in groups:
        ok = await _clean_group(env, log, group, walk, result)
        if not ok:
            result.aborted = True
            return result
    result.first_dirty = end
    return result


def _group_segments(segments: list[LogSegment], max_bytes: int) -> list[list[LogSegment]]:
    groups: list[list[LogSegment]] = []
    for segment in segments:
        if groups:
            group = groups[-1]
            size = sum(s.size for s in group) + segment.size
            if size <= max_bytes and segment.next_offset - group[0].base_offset <= (1 << 31) - 1:
                group.append(segment)
                continue
        groups.append([segment])
    return groups


@dataclass
class _Walk:
    """What the rewrite of a pass carries from batch to batch."""
    log: PartitionLog
    offset_map: OffsetMap
    txns: CleanedTransactions
    now_ms: int
    delete_retention_ms: int
    _last_data_batches: dict[int, int] | None = None

    def is_last_batch_of_its_producer(self, header: BatchHeader) -> bool:
        """Kafka keeps each producer's last data batch, even emptied (the producer state rebuilds
        its sequence from it); found by one header walk of the log, the first time it is asked."""
        if header.producer_id < 0:
            return False
        if self._last_data_batches is None:
            self._last_data_batches = {}
            for segment in self.log.segments:
                for _, h in segment.batches():
                    if h.producer_id >= 0 and not h.is_control:
                        self._last_data_batches[h.producer_id] = h.last_offset
        return self._last_data_batches.get(header.producer_id) == header.last_offset


def _marker_commit(header: BatchHeader, data) -> bool | None:
    """True / False for a COMMIT / ABORT marker, None for another control batch."""
    try:
        records = decode_records(header, memoryview(data)[HEADER_SIZE:])
        control = parse_control_record(records[0]) if records else None
    except (CorruptRecordError, DecodeError):
        return None
    if control is None or control.type not in (ControlType.COMMIT, ControlType.ABORT):
        return None
    return control.type == ControlType.COMMIT


async def _clean_group(env: Env, log: PartitionLog, group: list[LogSegment], walk: "_Walk",
                       result: CleanResult) -> bool:
    cfg = log.config
    now_ms = walk.now_ms
    version = log.structure_version
    cleaned = LogSegment.create(log.fs, log.dir, group[0].base_offset, index_bytes=cfg.segment_index_bytes,
                                index_interval_bytes=cfg.index_interval_bytes, now_ms=now_ms, suffix=CLEANED_SUFFIX)
    cleaned.created_ms = min(s.created_ms for s in group)
    last_segment = group[-1]
    last_batch_offset = _last_batch_offset(last_segment)
    for segment in group:
        try:
            for header, data in _batches(segment):
                result.bytes_read += len(data)
                keep_empty = header.base_offset == last_batch_offset
                out = _clean_batch(header, data, walk, keep_empty, result)
                if out is not None:
                    cleaned.append(out, [(0, parse_header(out))])
                    result.bytes_written += len(out)
        except CorruptRecordError:
            cleaned.close()  # the log is left as it was; the caller decides what to do with it
            cleaned.remove_files()
            raise
        for txn in walk.txns.kept_aborted:
            cleaned.txn_index.append(txn)
        walk.txns.kept_aborted.clear()
        await env.sleep(0)
        if log.structure_version != version:
            cleaned.close()
            cleaned.remove_files()
            return False
    cleaned.on_become_inactive()
    await cleaned.flush()
    if not await log.replace_segments(cleaned, group):
        return False
    result.groups_cleaned += 1
    return True


def _last_batch_offset(segment: LogSegment) -> int:
    found = segment.find_batch(segment.next_offset - 1)
    return found[1].base_offset if found else -1


def _clean_batch(header: BatchHeader, data: memoryview, walk: _Walk, keep_empty: bool,
                 result: CleanResult) -> bytes | None:
    now_ms = walk.now_ms
    horizon = header.base_timestamp if header.attributes & ATTR_DELETE_HORIZON else None
    if header.is_control:
        if not walk.txns.on_marker(header, _marker_commit(header, data)):
            return data
        if horizon is not None and horizon <= now_ms:
            # Its transaction left nothing behind and the horizon passed. Kept only as its
            # segment's last batch: not noted as a horizon to come back for (that would pick
            # this log again at once, forever); a pass after more batches follow drops it.
            return data if keep_empty else None
        if horizon is None:
            horizon = now_ms + walk.delete_retention_ms
            _note_horizon(result, horizon)
            return _rebuild(header, decode_records(header, memoryview(data)[HEADER_SIZE:]), horizon)
        _note_horizon(result, horizon)
        return data
    records = decode_records(header, memoryview(data)[HEADER_SIZE:])
    result.records_read += len(records)
    aborted = walk.txns.on_batch(header)
    kept = []
    for record in records:
        if aborted or record.key is None or walk.offset_map.get(record.key) > record.offset:
            continue
        if record.value is None and horizon is not None and horizon <= now_ms:
            continue
        kept.append(record)
    result.records_kept += len(kept)
    has_tombstones = any(r.value is None for r in kept)
    if has_tombstones and horizon is None:
        horizon = now_ms + walk.delete_retention_ms
    if has_tombstones:
        _note_horizon(result, horizon)
    if len(kept) == len(records) and (horizon is None or header.attributes & ATTR_DELETE_HORIZON):
        return data  # unchanged: copy byte for byte
    if not kept and not keep_empty and not walk.is_last_batch_of_its_producer(header):
        return None
    return _rebuild(header, kept, horizon if has_tombstones else None)


def _note_horizon(result: CleanResult, horizon: int) -> None:
    earliest = result.earliest_delete_horizon
    result.earliest_delete_horizon = horizon if earliest is None else min(earliest, horizon)


def _rebuild(header: BatchHeader, kept: list, horizon: int | None) -> bytes:
    """`header`'s batch holding only `kept`, offsets and producer fields unchanged."""
    return build_batch(
        [SimpleRecord(r.key, r.value, r.headers, r.timestamp) for r in kept],
        base_offset=header.base_offset,
        compression=Compression(header.compression),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        partition_leader_epoch=header.partition_leader_epoch,
        log_append_time=header.log_append_time,
        transactional=header.is_transactional,
        control=header.is_control,
        offset_deltas=[r.offset - header.base_offset for r in kept],
        last_offset_delta=header.last_offset_delta,
        max_timestamp=header.max_timestamp if (header.log_append_time or not kept) else None,
        delete_horizon_ms=horizon,
    )
