"""One log segment: a `.log` file of RecordBatch v2 bytes, its two sparse indexes and its
aborted transaction index (`.txnindex`, see storage.log.txn_index).

A segment covers offsets from `base_offset` (its file name) up to the next
segment's base. Only the newest segment of a log (the active one) is appended
to; older ones are immutable until retention deletes them or the cleaner
replaces them. All work on the data is done on batch headers (61 bytes each,
see `wire.batch_header`); records are decoded only to answer a timestamp
lookup inside one batch.

File names carry an optional extra suffix while a segment is in transit:
`.cleaned` (being written by the cleaner), `.swap` (complete, replacing older
segments) and `.deleted` (waiting for readers before removal) — Kafka's names.
"""
from __future__ import annotations

import bisect
import posixpath
from typing import Callable, Iterator

from storage.env import File, FileSystem
from storage.log.batch_scan import is_torn_tail, scan_valid_batches
from storage.log.index_file import IndexFile
from storage.log.offset_index import CorruptIndexError, OffsetIndex
from storage.log.time_index import TimeIndex
from storage.log.txn_index import TxnIndex
from wire.batch_header import HEADER_SIZE, BatchHeader, parse_header
from wire.errors import CorruptRecordError
from wire.records import decode_batch

__all__ = [
    "LogSegment",
    "LOG_SUFFIX",
    "INDEX_SUFFIX",
    "TIME_INDEX_SUFFIX",
    "TXN_INDEX_SUFFIX",
    "CLEANED_SUFFIX",
    "SWAP_SUFFIX",
    "DELETED_SUFFIX",
    "segment_file_name",
    "parse_segment_file_name",
    "MAX_RELATIVE_OFFSET",
]

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_SUFFIX = ".deleted"
FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX)
MAX_RELATIVE_OFFSET = (1 << 31) - 1  # index entries store offsets relative to the base as int32
MAX_SEGMENT_POSITION = (1 << 31) - 1  # ... and positions as int32


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str) -> tuple[int, str] | None:
    """(base_offset, suffix after the 20 digits) or None if `name` is not a segment file."""
    stem, _, _ = name.partition(".")
    if len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem), name[20:]


class LogSegment:
    def __init__(
        self,
        fs: FileSystem,
        log_dir: str,
        base_offset: int,
        log: File,
        offset_index: OffsetIndex,
        time_index: TimeIndex,
        *,
        index_interval_bytes: int,
        created_ms: int,
        suffix: str = "",
        txn_index: TxnIndex | None = None,
    ):
        self.fs = fs
        self.dir = log_dir
        self.base_offset = base_offset
        self.log = log
        self.offset_index = offset_index
        self.time_index = time_index
        self.txn_index = txn_index or TxnIndex(fs, _path(log_dir, base_offset, TXN_INDEX_SUFFIX + suffix))
        # False when the .txnindex was missing or did not decode: its entries must be rebuilt.
        self.txn_index_ok = True
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self.suffix = suffix
        self.bytes_since_last_index_entry = 0
        self.max_timestamp = -1
        self.offset_of_max_timestamp = base_offset
        self.first_batch_timestamp: int | None = None
        self.next_offset = base_offset  # one past the last offset held
        self.dirty = False  # written since the last fsync
        self.closed = False
        # A dense index of the newest batches (last offsets, positions): a contiguous run
        # ending at the segment's end, restarted at each sparse index entry, so it stays
        # within index_interval_bytes of batches. Tailing readers, nearly all of them,
        # find their batch here without scanning headers from the last sparse entry.
        self._tail_last_offsets: list[int] = []
        self._tail_positions: list[int] = []
        self._tail_floor = 0  # base offset of the first batch in the tail

    # -- construction -------------------------------------------------------
    @classmethod
    def create(cls, fs: FileSystem, log_dir: str, base_offset: int, *, index_bytes: int,
               index_interval_bytes: int, now_ms: int, suffix: str = "") -> "LogSegment":
        """A new, empty segment (any stale files of the same name are emptied)."""
        log = fs.open(_path(log_dir, base_offset, LOG_SUFFIX + suffix), create=True)
        indexes = [IndexFile(fs, _path(log_dir, base_offset, s + suffix), create=True) for s in FILE_SUFFIXES[1:]]
        txn_index = TxnIndex(fs, _path(log_dir, base_offset, TXN_INDEX_SUFFIX + suffix))
        for f in (log, *indexes, txn_index.file):
            if f.size():
                f.truncate(0)
        segment = cls(fs, log_dir, base_offset, log, OffsetIndex(indexes[0], base_offset, index_bytes),
                      TimeIndex(indexes[1], base_offset, index_bytes),
                      index_interval_bytes=index_interval_bytes, created_ms=now_ms, suffix=suffix, txn_index=txn_index)
        segment.dirty = True
        return segment

    @classmethod
    def open(cls, fs: FileSystem, log_dir: str, base_offset: int, *, index_bytes: int,
             index_interval_bytes: int, now_ms: int, suffix: str = "") -> tuple["LogSegment", bool]:
        """Open an existing segment; returns (segment, indexes_ok).

        When the index files are missing or malformed the segment comes back with
        empty indexes and indexes_ok=False: the caller must `recover()` it.
        """
        log = fs.open(_path(log_dir, base_offset, LOG_SUFFIX + suffix))
        indexes_exist = all(fs.exists(_path(log_dir, base_offset, s + suffix)) for s in FILE_SUFFIXES[1:])
        index_file = IndexFile(fs, _path(log_dir, base_offset, INDEX_SUFFIX + suffix), create=True)
        time_file = IndexFile(fs, _path(log_dir, base_offset, TIME_INDEX_SUFFIX + suffix), create=True)
        try:
            offset_index = OffsetIndex.load(index_file, base_offset, index_bytes)
            time_index = TimeIndex.load(time_file, base_offset, index_bytes)
            ok = True
        except CorruptIndexError:
            offset_index = OffsetIndex(index_file, base_offset, index_bytes)
            time_index = TimeIndex(time_file, base_offset, index_bytes)
            ok = False
        txn_index, txn_ok = TxnIndex.load(fs, _path(log_dir, base_offset, TXN_INDEX_SUFFIX + suffix), log.size())
        segment = cls(fs, log_dir, base_offset, log, offset_index, time_index,
                      index_interval_bytes=index_interval_bytes, created_ms=now_ms, suffix=suffix, txn_index=txn_index)
        segment.txn_index_ok = txn_ok
        ok = ok and indexes_exist
        if ok:
            try:
                segment._load_trusting_indexes()
            except (CorruptIndexError, CorruptRecordError):
                ok = False
        if not ok:
            segment.offset_index.reset()
            segment.time_index.reset()
        return segment, ok

    def _load_trusting_indexes(self) -> None:
        """Clean-shutdown load: sanity-check indexes, then find the end from the last entry."""
        size = self.size
        self.offset_index.sanity_check(size)
        _, position = self.offset_index.lookup(self.offset_index.last_offset)
        end_pos = position
        tail = []
        for pos, header in self._headers(position):
            self.next_offset = header.next_offset
            end_pos = pos + header.size
            tail.append(header)
        if end_pos != size:
            raise CorruptIndexError(f"{self.log.path}: log ends mid-batch at {end_pos} of {size}")
        self.time_index.sanity_check(self.next_offset)
        self.max_timestamp, self.offset_of_max_timestamp = self.time_index.last_entry
        if self.max_timestamp < 0:
            self.offset_of_max_timestamp = self.base_offset
        # Batches after the last index entry may hold a later timestamp.
        for header in tail:
            self._track_timestamp(header)
        first = next(self._headers(0), None)
        if first is not None:
            self.first_batch_timestamp = first[1].max_timestamp

    # -- facts --------------------------------------------------------------
    @property
    def size(self) -> int:
        return self.log.size()

    @property
    def is_empty(self) -> bool:
        return self.log.size() == 0

    @property
    def largest_timestamp(self) -> int:
        """For time retention: the newest record timestamp, or the creation time if none."""
        return self.max_timestamp if self.max_timestamp >= 0 else self.created_ms

    def paths(self, suffix: str | None = None) -> list[str]:
        suffix = self.suffix if suffix is None else suffix
        return [_path(self.dir, self.base_offset, s + suffix) for s in (*FILE_SUFFIXES, TXN_INDEX_SUFFIX)]

    def time_waited_for_roll(self, now_ms: int, incoming_max_timestamp: int) -> int:
        if self.first_batch_timestamp is not None and self.first_batch_timestamp >= 0 and incoming_max_timestamp >= 0:
            return incoming_max_timestamp - self.first_batch_timestamp
        return now_ms - self.created_ms

    def can_hold(self, last_offset: int, nbytes: int) -> bool:
        return last_offset - self.base_offset <= MAX_RELATIVE_OFFSET and self.size + nbytes <= MAX_SEGMENT_POSITION

    # -- writes -------------------------------------------------------------
    def append(self, data, batches: list[tuple[int, BatchHeader]]) -> None:
        """Append `data` (whole batches; `batches` = (position in data, header))."""
        start = self.log.append(data)
        for rel, header in batches:
            self._index_batch(start + rel, header)
        self.dirty = True

    def _index_batch(self, position: int, header: BatchHeader) -> None:
        if self.first_batch_timestamp is None:
            self.first_batch_timestamp = header.max_timestamp
        self._track_timestamp(header)
        if self.bytes_since_last_index_entry > self.index_interval_bytes and not self.offset_index.is_full:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.bytes_since_last_index_entry = 0
            self._tail_last_offsets.clear()
            self._tail_positions.clear()
        if not self._tail_positions:
            self._tail_floor = header.base_offset
        self._tail_last_offsets.append(header.last_offset)
        self._tail_positions.append(position)
        self.bytes_since_last_index_entry += header.size
        self.next_offset = header.next_offset

    def _track_timestamp(self, header: BatchHeader) -> None:
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset

    def on_become_inactive(self) -> None:
        """Rolled: record the final max timestamp so a reload knows it without a scan."""
        if self.max_timestamp >= 0:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.dirty = True  # the entry is written out (and fsynced) by the next flush

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None, *, min_offset: int | None = None) -> int:
        """Rebuild the indexes from the data, cutting at the first invalid byte.

        A batch is invalid if it is torn, fails its CRC, or its offsets do not
        increase (from `min_offset`, default the base offset). Returns the number
        of bytes truncated; `recovery_cut_torn_tail` tells whether the cut was only a
        write left short by a crash (no whole batch lost).
        """
        self.offset_index.reset()
        self.time_index.reset()
        self.txn_index.reset()  # its entries may be torn too: a producer state replay writes them again
        self.txn_index_ok = False
        self._tail_last_offsets.clear()
        self._tail_positions.clear()
        self.bytes_since_last_index_entry = 0
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.first_batch_timestamp = None
        self.next_offset = self.base_offset
        expected = self.base_offset if min_offset is None else min_offset

        def accept(position: int, header: BatchHeader) -> bool:
            nonlocal expected
            if header.base_offset < expected or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                return False
            expected = header.next_offset
            self._index_batch(position, header)
            if on_batch is not None:
                on_batch(header)
            return True

        size = self.size
        valid = scan_valid_batches(self.log, 0, size, accept)
        self.recovery_cut_torn_tail = valid == size or is_torn_tail(self.log, valid, size)
        if valid < size:
            self.log.truncate(valid)
        self.dirty = True  # the rebuilt indexes need an fsync too
        return size - valid

    def truncate_to(self, offset: int) -> int:
        """Remove the batch holding `offset` and everything after; returns bytes removed."""
        found = self.find_batch(offset)
        if found is None:
            return 0
        position, header = found
        size = self.size
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(header.base_offset)
        self.txn_index.truncate_to(header.base_offset)
        keep = bisect.bisect_left(self._tail_positions, position)
        del self._tail_last_offsets[keep:], self._tail_positions[keep:]
        self.log.truncate(position)
        self.dirty = True
        self.bytes_since_last_index_entry = 0
        # Re-derive what the cut invalidated from what remains (one header scan).
        self.max_timestamp, self.offset_of_max_timestamp = -1, self.base_offset
        self.first_batch_timestamp = None
        self.next_offset = self.base_offset
        for _, h in self._headers(0):
            if self.first_batch_timestamp is None:
                self.first_batch_timestamp = h.max_timestamp
            self._track_timestamp(h)
            self.next_offset = h.next_offset
        return size - position

    async def flush(self) -> None:
        if self.dirty and not self.closed:
            self.dirty = False
            await self.log.sync()
            await self.offset_index.file.sync()
            await self.time_index.file.sync()
            await self.txn_index.sync()

    # -- reads --------------------------------------------------------------
    def _headers(self, start: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from `start` (headers only, no CRC)."""
        end = self.size if end is None else end
        pos = start
        read = self.log.read
        while end - pos >= HEADER_SIZE:
            header = parse_header(read(pos, HEADER_SIZE))
            if pos + header.size > end:
                return
            yield pos, header
            pos += header.size

    def batches(self, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        return self._headers(start)

    def find_batch(self, offset: int) -> tuple[int, BatchHeader] | None:
        """The first batch whose last offset >= `offset` (i.e. holding it or after it)."""
        if self._tail_positions and offset >= self._tail_floor:
            # Every batch before the tail ends below its floor: the answer is in the tail.
            i = bisect.bisect_left(self._tail_last_offsets, offset)
            if i == len(self._tail_positions):
                return None
            position = self._tail_positions[i]
            return position, parse_header(self.log.read(position, HEADER_SIZE))
        _, position = self.offset_index.lookup(offset)
        for pos, header in self._headers(position):
            if header.last_offset >= offset:
                return pos, header
        return None

    def read(self, offset: int, max_bytes: int, *, max_position: int | None = None,
             min_one_batch: bool = True) -> tuple[int, int, BatchHeader] | None:
        """(position, size, first header) of whole batches from the one holding `offset`.

        None if no batch at or after `offset` lies before `max_position`.
        """
        end = self.size if max_position is None else min(max_position, self.size)
        found = self.find_batch(offset)
        if found is None or found[0] >= end:
            return None
        start, first = found
        # A segment holds whole batches and `max_position` is a batch start, so `end` is a
        # batch boundary: when the rest fits, no header needs reading (a reader far behind
        # would otherwise walk every header up to `max_bytes` on every fetch).
        if end - start <= max_bytes:
            return start, end - start, first
        if first.size > max_bytes:
            return start, first.size if min_one_batch else 0, first
        # The last whole batch within max_bytes: scan from the index entry nearest the limit.
        limit = start + max_bytes
        boundary = max(start, self.offset_index.batch_start_at_or_before(limit))
        for pos, header in self._headers(boundary, end):
            if pos + header.size > limit:
                break
            boundary = pos + header.size
        return start, boundary - start, first

    def find_offset_by_timestamp(self, timestamp: int, start_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `start_offset` with ts >= `timestamp`."""
        _, offset = self.time_index.lookup(timestamp)
        _, position = self.offset_index.lookup(max(offset, start_offset))
        for pos, header in self._headers(position):
            if header.max_timestamp < timestamp or header.last_offset < start_offset:
                continue
            _, records = decode_batch(self.log.read(pos, header.size))
            for record in records:
                if record.offset >= start_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    # -- file lifecycle -----------------------------------------------------
    def rename(self, suffix: str) -> None:
        """Move the four files to the names with `suffix` (the log's handle stays valid; the
        indexes hold no handle and follow their path)."""
        for src, dst in zip(self.paths(), self.paths(suffix)):
            if self.fs.exists(src):
                self.fs.rename(src, dst)
        _, index_path, time_index_path, txn_index_path = self.paths(suffix)
        self.offset_index.file.path = index_path
        self.time_index.file.path = time_index_path
        self.txn_index.file.path = txn_index_path
        self.suffix = suffix

    def close(self) -> None:
        self.closed = True
        self.log.close()
        self.offset_index.file.close()
        self.time_index.file.close()
        self.txn_index.file.close()

    def remove_files(self) -> None:
        for path in self.paths():
            if self.fs.exists(path):
                self.fs.remove(path)

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size}{self.suffix and ', ' + self.suffix})"


def _path(log_dir: str, base_offset: int, suffix: str) -> str:
    return posixpath.join(log_dir, segment_file_name(base_offset, suffix))
