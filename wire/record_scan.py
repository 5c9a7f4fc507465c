"""One validating pass over a RecordBatch v2's records that builds no record objects.

The produce path must know that every record of a client's batch decodes, as
Kafka's LogValidator does by iterating the batch; decoding each record into
keys, values and header tuples (`wire.records.decode_records`) costs several
times more than walking the bytes. `scan_records` walks them once
(decompressing first, bounded) and checks what every reader relies on:

- varints well-formed (int32 fields at most 5 bytes, varlongs 10);
- every length inside its record, every record consumed exactly, the
  declared record count, nothing after the last record;
- offset deltas exactly 0, 1, ..., n-1 (what every producer writes; gaps
  exist only in compacted logs, never in a produce);
- header keys present and UTF-8 (the decoders of this code base refuse others).

A structural fault raises `CorruptRecordError`. What it returns lets the
caller judge records that do decode: the smallest and largest record
timestamp and how many records have no key.

Speed: runs of same-shaped records are checked a column at a time in C
(`wire.record_runs`); the others are read one by one, with the common one-
and two-byte varints inline (a function call per field would double the
cost). After a failed look for a run, the next look waits for a number of
records that doubles up to _MAX_BACKOFF, so batches without runs pay little
for looking.
"""
from __future__ import annotations

from typing import NamedTuple

from wire.batch_header import BatchHeader
from wire.compression import DEFAULT_MAX_DECOMPRESSED, decompress
from wire.errors import CorruptRecordError
from wire.record_runs import MIN_RUN, uniform_run, varied_run

__all__ = ["RecordScan", "scan_records"]

_INT64_MIN, _INT64_MAX = -(1 << 63), (1 << 63) - 1
_NO_LOW, _NO_HIGH = _INT64_MAX, _INT64_MIN  # "no delta seen yet" for min() / max()
_MAX_BACKOFF = 1024  # records read one by one at most before looking for a run again


class RecordScan(NamedTuple):
    min_timestamp: int  # smallest record timestamp (base + delta); LogAppendTime: maxTimestamp
    max_timestamp: int
    keyless: int  # records whose key is null


def _varint(data, pos: int, max_bytes: int) -> tuple[int, int]:
    """The zigzag varint of at most `max_bytes` bytes at `pos`, and the position after it."""
    raw = 0
    shift = 0
    for _ in range(max_bytes):
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
    raise CorruptRecordError(f"record varint longer than {max_bytes} bytes")


def scan_records(header: BatchHeader, payload, *, max_uncompressed: int = DEFAULT_MAX_DECOMPRESSED) -> RecordScan:
    """Validate the records region `payload` (after the 61-byte header) of a producer's batch."""
    data = decompress(header.compression, payload, max_output=max_uncompressed)
    count = header.records_count
    end = len(data)
    if count < 0 or count > end // 7:  # the smallest record is 7 bytes
        raise CorruptRecordError(f"record count {count} impossible in {end} bytes")
    low, high = _NO_LOW, _NO_HIGH  # record timestamp deltas seen
    keyless = 0
    pos = index = 0
    retry_at, backoff = 0, MIN_RUN  # where to look for a run of same-shaped records next
    while index < count:
        if index >= retry_at:
            run = uniform_run(data, pos, index, count) or varied_run(data, pos, index, count)
            if run is not None:
                n, pos, run_low, run_high, run_keyless = run
                index += n
                low, high, keyless = min(low, run_low), max(high, run_high), keyless + run_keyless
                backoff = MIN_RUN
                continue
            retry_at, backoff = index + backoff, min(backoff * 2, _MAX_BACKOFF)
        stop = min(count, max(retry_at, index + 1))
        pos, run_low, run_high, run_keyless = _scan_one_by_one(data, pos, index, stop, end)
        index = stop
        low, high, keyless = min(low, run_low), max(high, run_high), keyless + run_keyless
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes trail the last record of the batch")
    if header.log_append_time:
        return RecordScan(header.max_timestamp, header.max_timestamp, keyless)
    base = header.base_timestamp
    if count == 0:
        return RecordScan(base, base, keyless)
    if base + low < _INT64_MIN or base + high > _INT64_MAX:
        raise CorruptRecordError("a record timestamp overflows int64")
    return RecordScan(base + low, base + high, keyless)


def _scan_one_by_one(data, pos: int, first: int, stop: int, end: int) -> tuple[int, int, int, int]:
    """Records [first, stop) from `pos`, one at a time: (position after them, smallest and
    largest timestamp delta, keyless records)."""
    low, high = _NO_LOW, _NO_HIGH
    keyless = 0
    index = first
    try:
        for index in range(first, stop):
            b = data[pos]  # record length (varint)
            if b < 0x80 and not b & 1:
                record_end = pos + 1 + (b >> 1)
                pos += 1
            elif b >= 0x80 and data[pos + 1] < 0x80 and not b & 1:
                record_end = pos + 2 + (((b & 0x7F) | (data[pos + 1] << 7)) >> 1)
                pos += 2
            else:
                length, pos = _varint(data, pos, 5)
                if length < 6:
                    raise CorruptRecordError(f"invalid record length {length}")
                record_end = pos + length
            if record_end > end:
                raise CorruptRecordError(f"record length overruns the batch by {record_end - end} bytes")
            b = data[pos + 1]  # timestamp delta (varlong), after the unused attributes byte
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
                pos += 2
            elif data[pos + 2] < 0x80:
                raw = (b & 0x7F) | (data[pos + 2] << 7)
                delta = (raw >> 1) ^ -(raw & 1)
                pos += 3
            else:
                delta, pos = _varint(data, pos + 1, 10)
            if delta > high:
                high = delta
            if delta < low:
                low = delta
            b = data[pos]  # offset delta: must be the record's index
            if b < 0x80:
                if b != index << 1:
                    raise CorruptRecordError(f"offset delta {(b >> 1) ^ -(b & 1)}, expected {index}")
                pos += 1
            else:
                offset_delta, pos = _varint(data, pos, 5)
                if offset_delta != index:
                    raise CorruptRecordError(f"offset delta {offset_delta}, expected {index}")
            b = data[pos]  # key length; -1 = null
            if b == 1:
                keyless += 1
                pos += 1
            elif b < 0x80 and not b & 1:
                pos += 1 + (b >> 1)
            else:
                length, pos = _varint(data, pos, 5)
                if length < 0:
                    raise CorruptRecordError(f"invalid key length {length}")
                pos += length
            b = data[pos]  # value length; -1 = null
            if b < 0x80 and not b & 1:
                pos += 1 + (b >> 1)
            elif b == 1:
                pos += 1
            elif b >= 0x80 and data[pos + 1] < 0x80 and not b & 1:
                pos += 2 + (((b & 0x7F) | (data[pos + 1] << 7)) >> 1)
            else:
                length, pos = _varint(data, pos, 5)
                if length < 0:
                    raise CorruptRecordError(f"invalid value length {length}")
                pos += length
            if data[pos] == 0:  # no headers
                pos += 1
            else:
                pos = _scan_headers(data, pos, record_end)
            if pos != record_end:
                raise CorruptRecordError(f"record fields end {pos - record_end} bytes off its length")
    except CorruptRecordError as exc:
        raise CorruptRecordError(f"record {index}: {exc}") from None
    except IndexError:
        raise CorruptRecordError(f"record {index}: truncated") from None
    return pos, low, high, keyless


def _scan_headers(data, pos: int, record_end: int) -> int:
    """A record's headers from `pos` (their count): the position after them. One-byte varints
    are read inline, as in `_scan_one_by_one`."""
    b = data[pos]
    if b < 0x80:
        count = (b >> 1) ^ -(b & 1)
        pos += 1
    else:
        count, pos = _varint(data, pos, 5)
    if count < 0 or count > record_end - pos:
        raise CorruptRecordError(f"invalid header count {count}")
    for _ in range(count):
        b = data[pos]
        if b < 0x80:
            key_length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            key_length, pos = _varint(data, pos, 5)
        if key_length < 0 or pos + key_length > record_end:
            raise CorruptRecordError(f"invalid header key length {key_length}")
        try:
            bytes(data[pos : pos + key_length]).decode("utf-8")
        except UnicodeDecodeError:
            raise CorruptRecordError("header key is not UTF-8") from None
        pos += key_length
        b = data[pos]
        if b < 0x80:
            value_length = (b >> 1) ^ -(b & 1)
            pos += 1
        else:
            value_length, pos = _varint(data, pos, 5)
        if value_length < -1 or pos + value_length > record_end:
            raise CorruptRecordError(f"invalid header value length {value_length}")
        if value_length > 0:
            pos += value_length
    return pos
