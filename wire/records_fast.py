"""RecordBatch v2 records encoded and decoded with one pass and few calls per record.

The same format as `wire.records` (which describes it); these are the paths
the clients run per record, so they avoid a function call per field:

- `encode_records` builds a batch's records section in one loop
  (`wire.records.seal_batch` then adds the header). Lengths, deltas and sizes
  below `_TABLE_SIZE` come from a table of ready-made zigzag varints.
- `decode_columns` decodes a batch into columns (offsets, timestamps, keys,
  values, headers): runs of same-shaped records are sliced out a column at a
  time, others read one by one with short varints inline. Readers build their
  own record type from the columns in C (`map`/`zip`). It is exactly as
  strict as `wire.records.decode_records`, which is built on it: every
  violation raises `CorruptRecordError`.
"""
from __future__ import annotations

from bisect import bisect_left
from itertools import repeat
from operator import and_, lshift, or_
from typing import NamedTuple

from wire.batch_header import BatchHeader
from wire.compression import DEFAULT_MAX_DECOMPRESSED, decompress
from wire.errors import CorruptRecordError
from wire.record_runs import MIN_RUN, uniform_run_shape
from wire.varint import encode_varlong

__all__ = ["encode_records", "decode_columns", "RecordColumns"]

_TABLE_SIZE = 16384  # every offset delta of a 1 MB batch of records of 64 bytes or more
_MAX_BACKOFF = 1024  # records read one by one at most before looking for a run again


# zigzag(i) = 2i for i >= 0: one varint byte below 64, two below 8192, three below 2**20.
_ZIGZAG = ([bytes((2 * i,)) for i in range(64)]
           + [bytes((2 * i & 0x7F | 0x80, 2 * i >> 7)) for i in range(64, 8192)]
           + [bytes((2 * i & 0x7F | 0x80, 2 * i >> 7 & 0x7F | 0x80, 2 * i >> 14)) for i in range(8192, _TABLE_SIZE)])
_NULL = b"\x01"  # zigzag(-1): a null key or value


def _zz(value: int) -> bytes:
    return _ZIGZAG[value] if 0 <= value < _TABLE_SIZE else encode_varlong(value)


def encode_records(records, base_timestamp: int, offset_deltas=None) -> bytes:
    """The records section for `records`, (key, value, headers, timestamp) tuples, with
    timestamps as deltas from `base_timestamp` and offset deltas 0, 1, ... (or `offset_deltas`).

    Headers are (str key, bytes-or-None value) pairs. A record with no key and no headers
    (what most producers send) costs one list extend; others go field by field."""
    table = _ZIGZAG
    parts: list[bytes] = []
    extend = parts.extend
    for index, (key, value, headers, timestamp) in enumerate(records):
        delta = index if offset_deltas is None else offset_deltas[index]
        stamp_delta = timestamp - base_timestamp
        if key is None and not headers and value is not None:
            stamp = table[stamp_delta] if 0 <= stamp_delta < _TABLE_SIZE else encode_varlong(stamp_delta)
            offset = table[delta] if delta < _TABLE_SIZE else encode_varlong(delta)
            value_length = _zz(len(value))
            size = 3 + len(stamp) + len(offset) + len(value_length) + len(value)
            extend((_zz(size), b"\x00", stamp, offset, _NULL, value_length, value, b"\x00"))
        else:
            body = _record_body(stamp_delta, delta, key, value, headers)
            extend((_zz(len(body)), body))
    return b"".join(parts)


def _record_body(stamp_delta: int, offset_delta: int, key: bytes | None, value: bytes | None, headers) -> bytes:
    """One record without its length prefix."""
    body = bytearray(b"\x00")  # attributes: unused
    body += _zz(stamp_delta)
    body += _zz(offset_delta)
    for data in (key, value):
        if data is None:
            body += _NULL
        else:
            body += _zz(len(data))
            body += data
    body += _zz(len(headers))
    for header_key, header_value in headers:
        encoded = header_key.encode("utf-8")
        body += _zz(len(encoded))
        body += encoded
        if header_value is None:
            body += _NULL
        else:
            body += _zz(len(header_value))
            body += header_value
    return bytes(body)


def _varint(data, pos: int) -> tuple[int, int]:
    """ZigZag varint/varlong at `pos` (up to 10 bytes); IndexError when truncated."""
    raw = 0
    shift = 0
    while True:
        b = data[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if b < 0x80:
            if raw >> 64:
                raise CorruptRecordError("record varint overflows 64 bits")
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptRecordError("record varint longer than 10 bytes")


def _field(data, pos: int, record_end: int) -> tuple[bytes | None, int]:
    length, pos = _varint(data, pos)
    if length < 0:
        if length != -1:
            raise CorruptRecordError(f"invalid field length {length}")
        return None, pos
    if pos + length > record_end:
        raise CorruptRecordError(f"field of {length} bytes overruns its record")
    return data[pos:pos + length], pos + length


class RecordColumns(NamedTuple):
    """A batch's records as columns (lists of equal length, in offset order)."""
    offsets: list
    timestamps: list
    keys: list
    values: list
    headers: list  # tuples of (str, bytes | None) pairs


def decode_columns(header: BatchHeader, payload, *, min_offset: int = -1,
                   max_uncompressed: int = DEFAULT_MAX_DECOMPRESSED) -> RecordColumns:
    """Decode the records region `payload` (after the 61-byte header) of a batch into columns,
    keeping the records at or after `min_offset`.

    Runs of same-shaped records (`wire.record_runs`: what producers mostly send) are sliced out
    a column at a time; other records are read one by one, one-byte varints inline. Either way
    every record is validated as strictly as `wire.records.decode_records` says."""
    columns = RecordColumns([], [], [], [], [])
    count = header.records_count
    if count == 0 and len(payload) == 0:
        return columns  # an empty batch kept by compaction carries no (compressed) payload at all
    data = decompress(header.compression, payload, max_output=max_uncompressed)
    end = len(data)
    if count > end // 7:  # the smallest record is 7 bytes
        raise CorruptRecordError(f"record count {count} impossible in {end} bytes")
    pos = index = 0
    previous_delta = -1
    retry_at, backoff = 0, MIN_RUN  # where to look for a run next (as wire.record_scan)
    while index < count:
        # A run's offset deltas are its indexes: usable while every delta so far was its index.
        if index >= retry_at and previous_delta == index - 1:
            run = uniform_run_shape(data, pos, index, count, header.last_offset_delta)
            if run is not None:
                n, shape = run
                _run_columns(columns, header, data, pos, index, n, shape)
                pos += n * shape.size
                index += n
                previous_delta = index - 1
                backoff = MIN_RUN
                continue
            retry_at, backoff = index + backoff, min(backoff * 2, _MAX_BACKOFF)
        stop = min(count, max(retry_at, index + 1))
        pos, previous_delta = _one_by_one(columns, header, data, pos, stop - index, previous_delta, end)
        index = stop
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes trail the last record of the batch")
    offsets = columns.offsets
    if offsets and offsets[0] < min_offset:
        keep = bisect_left(offsets, min_offset)
        for column in columns:
            del column[:keep]
    return columns


def _run_columns(columns: RecordColumns, header: BatchHeader, data, pos: int, index: int, n: int, shape) -> None:
    """Append the `n` records of one shape from `pos` (validated by uniform_run_shape)."""
    size = shape.size
    stop = pos + n * size
    base = header.base_offset
    columns.offsets.extend(range(base + index, base + index + n))
    if header.log_append_time:
        columns.timestamps.extend(repeat(header.max_timestamp, n))
    else:
        at = pos + shape.ts_at
        low = data[at:stop:size]
        raws = low if shape.ts_width == 1 else map(or_, map(and_, low, repeat(0x7F)),
                                                    map(lshift, data[at + 1:stop:size], repeat(7)))
        base_timestamp = header.base_timestamp
        columns.timestamps.extend([base_timestamp + ((raw >> 1) ^ -(raw & 1)) for raw in raws])
    for column, at, length_bytes in ((columns.keys, shape.key_at, shape.key_bytes),
                                     (columns.values, shape.value_at, shape.value_bytes)):
        length, start = _varint(length_bytes, 0)
        if length < 0:
            column.extend(repeat(None, n))
        else:
            start += pos + at
            column.extend([data[p:p + length] for p in range(start, stop, size)])
    columns.headers.extend(repeat((), n))


def _one_by_one(columns: RecordColumns, header: BatchHeader, data, pos: int, n: int, previous_delta: int,
                end: int) -> tuple[int, int]:
    """Append the next `n` records from `pos`, read one at a time; (position after them, the
    last offset delta)."""
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.log_append_time else None
    last_delta = header.last_offset_delta
    add_offset, add_timestamp = columns.offsets.append, columns.timestamps.append
    add_key, add_value, add_headers = columns.keys.append, columns.values.append, columns.headers.append
    try:
        for _ in range(n):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            elif data[pos + 1] < 0x80:
                raw = (b & 0x7F) | (data[pos + 1] << 7)
                length = (raw >> 1) ^ -(raw & 1)
                pos += 2
            else:
                length, pos = _varint(data, pos)
            record_end = pos + length
            if length < 6 or record_end > end:
                raise CorruptRecordError(f"invalid record length {length}")
            b = data[pos + 1]  # after the attributes byte (unused)
            if b < 0x80:
                timestamp_delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                timestamp_delta, pos = _varint(data, pos + 1)
            b = data[pos]
            if b < 0x80:
                offset_delta = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                offset_delta, pos = _varint(data, pos)
            if not previous_delta < offset_delta <= last_delta:
                raise CorruptRecordError(f"offset delta {offset_delta} out of order or beyond {last_delta}")
            previous_delta = offset_delta
            b = data[pos]
            if b < 0x80 and not b & 1:  # a present key shorter than 64 bytes
                key_end = pos + 1 + (b >> 1)
                if key_end > record_end:
                    raise CorruptRecordError(f"field of {b >> 1} bytes overruns its record")
                key = data[pos + 1:key_end]
                pos = key_end
            elif b == 1:
                key = None
                pos += 1
            else:
                key, pos = _field(data, pos, record_end)
            b = data[pos]
            if b & 1 or b >= 0x80 and data[pos + 1] >= 0x80:  # null, invalid or 3+ byte length
                value, pos = _field(data, pos, record_end)
            else:  # a length below 8192: one or two bytes
                if b < 0x80:
                    size = b >> 1
                    pos += 1
                else:
                    size = ((b & 0x7F) | (data[pos + 1] << 7)) >> 1
                    pos += 2
                if pos + size > record_end:
                    raise CorruptRecordError(f"field of {size} bytes overruns its record")
                value = data[pos:pos + size]
                pos += size
            b = data[pos]
            if b == 0:
                headers = ()
                pos += 1
            else:
                header_count, pos = _varint(data, pos)
                if header_count < 0 or header_count > record_end - pos:
                    raise CorruptRecordError(f"invalid header count {header_count}")
                pairs = []
                for _ in range(header_count):
                    header_key, pos = _field(data, pos, record_end)
                    if header_key is None:
                        raise CorruptRecordError("null record header key")
                    header_value, pos = _field(data, pos, record_end)
                    pairs.append((header_key.decode("utf-8"), header_value))
                headers = tuple(pairs)
            if pos != record_end:
                raise CorruptRecordError(f"record length {length} does not match its fields")
            add_offset(base_offset + offset_delta)
            add_timestamp(base_timestamp + timestamp_delta if append_time is None else append_time)
            add_key(key)
            add_value(value)
            add_headers(headers)
    except IndexError:
        raise CorruptRecordError("record truncated") from None
    except UnicodeDecodeError:
        raise CorruptRecordError("record header key is not valid utf-8") from None
    return pos, previous_delta
