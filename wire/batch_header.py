"""RecordBatch v2 headers: parse, validate and patch without decoding records.

This is the hot-path view of a batch used by the broker's produce path and by
the log: the 61-byte header is read with one struct call, the CRC-32C covers
bytes [21, end) and is checked in C, and the two fields the broker rewrites
(baseOffset, partitionLeaderEpoch) lie outside the CRC so patching them costs
12 bytes of writes and no re-hash.

Layout (big-endian):
    0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8
    17 crc uint32 | 21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64
    35 maxTimestamp int64 | 43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32
    57 recordsCount int32 | 61 records...
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

from crc32c import crc32c

from wire.errors import CorruptRecordError

__all__ = [
    "BatchHeader",
    "HEADER_SIZE",
    "LOG_OVERHEAD",
    "parse_header",
    "validate_batch",
    "iter_batches",
    "set_base_offset",
    "set_leader_epoch",
    "set_max_timestamp",
    "batch_crc",
    "ATTR_COMPRESSION_MASK",
    "ATTR_TIMESTAMP_TYPE",
    "ATTR_TRANSACTIONAL",
    "ATTR_CONTROL",
    "ATTR_DELETE_HORIZON",
]

HEADER_SIZE = 61  # RECORD_BATCH_OVERHEAD
LOG_OVERHEAD = 12  # baseOffset + batchLength
CRC_START = 21
MAGIC = 2

ATTR_COMPRESSION_MASK = 0x07
ATTR_TIMESTAMP_TYPE = 0x08  # 1 = LogAppendTime
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20
ATTR_DELETE_HORIZON = 0x40

_HEADER = struct.Struct(">qiibIhiqqqhii")
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_INT64 = struct.Struct(">q")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch including baseOffset and batchLength."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & ATTR_COMPRESSION_MASK

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & ATTR_CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & ATTR_TRANSACTIONAL)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & ATTR_TIMESTAMP_TYPE)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence < 0:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """Parse the header at `pos`. Checks only that 61 bytes are present and magic is 2."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptRecordError(f"record batch header truncated: {len(buf) - pos} of {HEADER_SIZE} bytes")
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordError(f"unsupported record batch magic {header.magic} (only v2 is supported)")
    if header.batch_length < HEADER_SIZE - LOG_OVERHEAD:
        raise CorruptRecordError(f"record batch length {header.batch_length} smaller than its header")
    return header


def batch_crc(buf, pos: int, header: BatchHeader) -> int:
    return crc32c(memoryview(buf)[pos + CRC_START : pos + header.size])


def validate_batch(buf, pos: int = 0) -> BatchHeader:
    """Parse and fully validate the batch at `pos`: length within `buf`, counts and CRC."""
    header = parse_header(buf, pos)
    if pos + header.size > len(buf):
        raise CorruptRecordError(
            f"record batch truncated: needs {header.size} bytes, {len(buf) - pos} available"
        )
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptRecordError("negative record count or last offset delta")
    if batch_crc(buf, pos, header) != header.crc:
        raise CorruptRecordError("record batch CRC-32C mismatch")
    return header


def iter_batches(buf, pos: int = 0, *, validate: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each whole batch in `buf` from `pos`.

    Stops silently at a trailing partial batch (the caller decides whether a
    partial tail is an error: fetch responses may end with one, logs may not).
    A complete but invalid batch raises CorruptRecordError.
    """
    end = len(buf)
    while end - pos >= LOG_OVERHEAD:
        _, length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
        if length < HEADER_SIZE - LOG_OVERHEAD and end - pos >= HEADER_SIZE:
            raise CorruptRecordError(f"record batch length {length} smaller than its header")
        if pos + LOG_OVERHEAD + length > end:
            return
        header = validate_batch(buf, pos) if validate else parse_header(buf, pos)
        yield pos, header
        pos += header.size


def set_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    """Assign offsets to a batch: outside the CRC, so no re-hash."""
    _INT64.pack_into(buf, pos, base_offset)


def set_leader_epoch(buf: bytearray | memoryview, pos: int, epoch: int) -> None:
    _INT32.pack_into(buf, pos + 12, epoch)


def set_max_timestamp(buf: bytearray | memoryview, pos: int, header: BatchHeader, timestamp: int, *,
                      log_append_time: bool = True) -> None:
    """Set maxTimestamp (and, for LogAppendTime, the timestamp type bit), then recompute the CRC."""
    if log_append_time:
        struct.pack_into(">h", buf, pos + 21, header.attributes | ATTR_TIMESTAMP_TYPE)
    _INT64.pack_into(buf, pos + 35, timestamp)
    _UINT32.pack_into(buf, pos + 17, crc32c(memoryview(buf)[pos + CRC_START : pos + header.size]))
