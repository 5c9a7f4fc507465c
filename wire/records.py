"""RecordBatch v2 records: build batches and decode their records.

The header (61 bytes, CRC-32C) lives in `wire.batch_header`; this module owns
what follows it. Each record is (DefaultRecord.java):

    length varint | attributes int8 (0) | timestampDelta varlong | offsetDelta varint
    keyLength varint | key | valueLength varint | value          (-1 length = null)
    headersCount varint | { keyLength varint | key utf-8 | valueLength varint | value }*

In a compressed batch the records region (everything after the header) is one
compressed blob; the record count stays in the header.

Decoding is strict: every length must fit its record, every record must be
consumed exactly, offset deltas must increase and stay within lastOffsetDelta,
the count must match and nothing may trail the last record. Any violation
raises `CorruptRecordError` (a `DecodeError`), never another exception.

Control records (transaction markers, KRaft's LeaderChange etc.) are ordinary
records in a batch with the control attribute: the key is int16 version +
int16 type, the value depends on the type. See `build_control_batch` and
`parse_control_record` at the end of this module.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from enum import IntEnum
from typing import Iterator, Sequence

from crc32c import crc32c

from wire.batch_header import (
    ATTR_CONTROL,
    ATTR_DELETE_HORIZON,
    ATTR_TIMESTAMP_TYPE,
    ATTR_TRANSACTIONAL,
    HEADER_SIZE,
    MAGIC,
    BatchHeader,
    iter_batches,
    validate_batch,
)
from wire.compression import DEFAULT_MAX_DECOMPRESSED, Compression, compress
from wire.errors import CorruptRecordError
from wire.records_fast import decode_columns, encode_records

__all__ = [
    "Compression",
    "SimpleRecord",
    "Record",
    "build_batch",
    "seal_batch",
    "decode_batch",
    "decode_records",
    "iter_records",
    "NO_TIMESTAMP",
    "ControlType",
    "ControlRecord",
    "build_control_batch",
    "parse_control_record",
    "build_end_txn_marker",
    "parse_end_txn_marker",
]

NO_TIMESTAMP = -1

_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")  # attributes .. recordsCount
_PREFIX = struct.Struct(">qiib")  # baseOffset, batchLength, partitionLeaderEpoch, magic
_UINT32 = struct.Struct(">I")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


@dataclass(slots=True, frozen=True)
class SimpleRecord:
    """What a producer hands in."""

    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp: int | None = None  # ms; None = the batch's base timestamp


@dataclass(slots=True, frozen=True)
class Record:
    """What a reader gets back: absolute offset and timestamp."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]


# --------------------------------------------------------------------------- #
# Encoding
# --------------------------------------------------------------------------- #


def build_batch(
    records: Sequence[SimpleRecord],
    *,
    base_offset: int = 0,
    base_timestamp: int | None = None,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    offset_deltas: Sequence[int] | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
    delete_horizon_ms: int | None = None,
    compression_level: int | None = None,
) -> bytes:
    """Encode one RecordBatch v2 (with CRC) holding `records`.

    - base_timestamp defaults to the first record's timestamp (as Kafka's
      MemoryRecordsBuilder), or NO_TIMESTAMP if no record has one; records
      without a timestamp get the base timestamp.
    - offset_deltas (strictly increasing, >= 0) lets compaction keep original
      offsets; last_offset_delta lets it keep the original batch end. An empty
      batch (compaction keeps them for producer state) needs last_offset_delta.
    - delete_horizon_ms sets attribute bit 6 and becomes the base timestamp;
      record timestamps are still stored exactly, as deltas from it.
    - compression_level: None = Kafka's default for the codec (gzip 6, lz4 9,
      zstd 3); lz4 level 1 is ~15x faster to compress at a lower ratio.
    """
    count = len(records)
    if offset_deltas is None:
        offset_deltas = range(count)
    elif len(offset_deltas) != count:
        raise ValueError(f"{len(offset_deltas)} offset deltas for {count} records")
    previous = -1
    for delta in offset_deltas:
        if delta <= previous:
            raise ValueError("offset deltas must be non-negative and strictly increasing")
        previous = delta
    if last_offset_delta is None:
        if count == 0:
            raise ValueError("an empty batch needs an explicit last_offset_delta")
        last_offset_delta = offset_deltas[-1]
    elif last_offset_delta < previous or last_offset_delta < 0:
        raise ValueError(f"last_offset_delta {last_offset_delta} below the last record's delta {previous}")

    timestamps = [r.timestamp for r in records]
    if base_timestamp is None:
        base_timestamp = next((t for t in timestamps if t is not None), NO_TIMESTAMP)
    timestamps = [base_timestamp if t is None else t for t in timestamps]
    if max_timestamp is None:
        max_timestamp = max(timestamps, default=base_timestamp)
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms

    body = encode_records([(r.key, r.value, r.headers, t) for r, t in zip(records, timestamps)],
                          base_timestamp, offset_deltas)
    return seal_batch(body, count, last_offset_delta=last_offset_delta, base_timestamp=base_timestamp,
                      max_timestamp=max_timestamp, base_offset=base_offset, compression=compression,
                      producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=base_sequence,
                      partition_leader_epoch=partition_leader_epoch, log_append_time=log_append_time,
                      transactional=transactional, control=control,
                      delete_horizon=delete_horizon_ms is not None, compression_level=compression_level)


def seal_batch(
    records_section,
    count: int,
    *,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    base_offset: int = 0,
    compression: Compression = Compression.NONE,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    partition_leader_epoch: int = -1,
    log_append_time: bool = False,
    transactional: bool = False,
    control: bool = False,
    delete_horizon: bool = False,
    compression_level: int | None = None,
) -> bytes:
    """One RecordBatch v2 (with CRC) around a records section of `count` records already
    encoded (by `wire.records_fast.encode_records`, deltas from `base_timestamp`)."""
    payload = compress(compression, records_section, level=compression_level) if compression else records_section
    attributes = int(compression)
    if log_append_time:
        attributes |= ATTR_TIMESTAMP_TYPE
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    if delete_horizon:
        attributes |= ATTR_DELETE_HORIZON

    head = _HEADER_AFTER_CRC.pack(attributes, last_offset_delta, base_timestamp, max_timestamp,
                                  producer_id, producer_epoch, base_sequence, count)
    crc = crc32c(payload, crc32c(head))  # the CRC covers everything after itself
    batch_length = HEADER_SIZE - 12 + len(payload)
    prefix = _PREFIX.pack(base_offset, batch_length, partition_leader_epoch, MAGIC)
    return b"".join((prefix, _UINT32.pack(crc), head, payload))


# --------------------------------------------------------------------------- #
# Decoding
# --------------------------------------------------------------------------- #


def decode_records(header: BatchHeader, payload, *, max_uncompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list[Record]:
    """Decode the records region `payload` (after the 61-byte header) of a batch."""
    return list(map(Record, *decode_columns(header, payload, max_uncompressed=max_uncompressed)))


def decode_batch(buf, pos: int = 0, *, max_uncompressed: int = DEFAULT_MAX_DECOMPRESSED) -> tuple[BatchHeader, list[Record]]:
    """Validate the batch at `pos` (length, CRC) and decode its records."""
    header = validate_batch(buf, pos)
    payload = bytes(memoryview(buf)[pos + HEADER_SIZE : pos + header.size])
    return header, decode_records(header, payload, max_uncompressed=max_uncompressed)


def iter_records(buf, pos: int = 0, *, max_uncompressed: int = DEFAULT_MAX_DECOMPRESSED) -> Iterator[Record]:
    """All records of all whole batches in `buf` (a trailing partial batch is ignored)."""
    for batch_pos, header in iter_batches(buf, pos):
        payload = bytes(memoryview(buf)[batch_pos + HEADER_SIZE : batch_pos + header.size])
        yield from decode_records(header, payload, max_uncompressed=max_uncompressed)


# --------------------------------------------------------------------------- #
# Control records
# --------------------------------------------------------------------------- #


class ControlType(IntEnum):
    """Control record types (ControlRecordType.java); 2-6 are KRaft's own."""

    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(slots=True, frozen=True)
class ControlRecord:
    version: int
    type: int  # a ControlType value, or an unknown type from a newer writer
    value: bytes | None


def build_control_batch(
    control_type: int,
    value: bytes | None,
    *,
    timestamp: int,
    base_offset: int = 0,
    version: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    partition_leader_epoch: int = -1,
    transactional: bool | None = None,
) -> bytes:
    """A control batch of one record. Transaction markers are transactional;
    KRaft's control records (LeaderChange, snapshot header/footer, voters) are not."""
    if transactional is None:
        transactional = control_type in (ControlType.ABORT, ControlType.COMMIT)
    record = SimpleRecord(_CONTROL_KEY.pack(version, control_type), value, timestamp=timestamp)
    return build_batch(
        [record],
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        transactional=transactional,
        control=True,
    )


def parse_control_record(record: Record) -> ControlRecord:
    """Read a control record's key (int16 version, int16 type)."""
    key = record.key
    if key is None or len(key) < _CONTROL_KEY.size:
        raise CorruptRecordError("control record key shorter than 4 bytes")
    version, control_type = _CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(f"invalid control record version {version}")
    return ControlRecord(version, control_type, record.value)


def build_end_txn_marker(
    commit: bool,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A COMMIT or ABORT marker batch (EndTransactionMarker.java)."""
    return build_control_batch(
        ControlType.COMMIT if commit else ControlType.ABORT,
        _END_TXN_VALUE.pack(0, coordinator_epoch),
        timestamp=timestamp,
        base_offset=base_offset,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
    )


def parse_end_txn_marker(control: ControlRecord) -> int:
    """The coordinator epoch of a COMMIT/ABORT marker."""
    if control.type not in (ControlType.ABORT, ControlType.COMMIT):
        raise CorruptRecordError(f"control type {control.type} is not a transaction marker")
    value = control.value
    if value is None or len(value) < _END_TXN_VALUE.size:
        raise CorruptRecordError("transaction marker value shorter than 6 bytes")
    version, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    if version < 0:
        raise CorruptRecordError(f"invalid transaction marker version {version}")
    return coordinator_epoch
