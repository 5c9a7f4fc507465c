"""RecordBatch v2 records encoded and decoded with one pass and few calls per record.

The same format as `wire.records` (which describes it); these are the paths
the clients run per record, so they avoid a function call per field:

- `encode_records` builds a batch's records section in one loop
  (`wire.records.seal_batch` then adds the header). Lengths, deltas and sizes
  below `_TABLE_SIZE` come from a table of ready-made zigzag varints.
- `decode_records_with` decodes a batch's records straight into whatever
  `make(offset, timestamp, key, value, headers)` builds (the consumer's
  record type), reading one-byte varints inline. It is exactly as strict as
  `wire.records.decode_records`, which is built on it: every violation raises
  `CorruptRecordError`.
"""
from __future__ import annotations

from wire.batch_header import BatchHeader
from wire.compression import DEFAULT_MAX_DECOMPRESSED, decompress
from wire.errors import CorruptRecordError

__all__ = ["encode_records", "decode_records_with", "zigzag_bytes"]

_TABLE_SIZE = 4096


def zigzag_bytes(value: int) -> bytes:
    """The zigzag varint (varlong) encoding of `value`."""
    value = (value << 1) ^ (value >> 63)
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_ZIGZAG = [zigzag_bytes(i) for i in range(_TABLE_SIZE)]  # non-negative values only
_NULL = b"\x01"  # zigzag(-1): a null key or value


def _zz(value: int) -> bytes:
    return _ZIGZAG[value] if 0 <= value < _TABLE_SIZE else zigzag_bytes(value)


def encode_records(records, base_timestamp: int, offset_deltas=None) -> bytes:
    """The records section for `records`, (key, value, headers, timestamp) tuples, with
    timestamps as deltas from `base_timestamp` and offset deltas 0, 1, ... (or `offset_deltas`).

    Headers are (str key, bytes-or-None value) pairs. A record with no key, no headers and
    small deltas (what most producers send) costs one list extend; others go field by field."""
    table = _ZIGZAG
    parts: list[bytes] = []
    extend = parts.extend
    for index, (key, value, headers, timestamp) in enumerate(records):
        delta = index if offset_deltas is None else offset_deltas[index]
        stamp_delta = timestamp - base_timestamp
        if key is None and not headers and value is not None and 0 <= stamp_delta < _TABLE_SIZE \
                and delta < _TABLE_SIZE and len(value) < _TABLE_SIZE:
            stamp, offset, value_length = table[stamp_delta], table[delta], table[len(value)]
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


def decode_records_with(header: BatchHeader, payload, make, out: list | None = None, *,
                        min_offset: int = -1, max_uncompressed: int = DEFAULT_MAX_DECOMPRESSED) -> list:
    """Decode the records region `payload` (after the 61-byte header) of a batch, appending
    `make(offset, timestamp, key, value, headers)` to `out` (a new list by default) for each
    record at or after `min_offset`. Returns `out`."""
    if out is None:
        out = []
    count = header.records_count
    if count == 0 and len(payload) == 0:
        return out  # an empty batch kept by compaction carries no (compressed) payload at all
    data = decompress(header.compression, payload, max_output=max_uncompressed)
    end = len(data)
    if count > end // 7:  # the smallest record is 7 bytes
        raise CorruptRecordError(f"record count {count} impossible in {end} bytes")
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.log_append_time else None
    last_delta = header.last_offset_delta
    previous_delta = -1
    pos = 0
    append = out.append
    try:
        for _ in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
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
            if b == 1:
                value = None
                pos += 1
            else:
                value, pos = _field(data, pos, record_end)
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
            offset = base_offset + offset_delta
            if offset >= min_offset:
                append(make(offset, base_timestamp + timestamp_delta if append_time is None else append_time,
                            key, value, headers))
    except IndexError:
        raise CorruptRecordError("record truncated") from None
    except UnicodeDecodeError:
        raise CorruptRecordError("record header key is not valid utf-8") from None
    if pos != end:
        raise CorruptRecordError(f"{end - pos} bytes trail the last record of the batch")
    return out
