"""Hand-made RecordBatch v2 bytes with a correct CRC around any records region (test helper).

`raw_record` writes one record field by field, so a test can put any value
(or any garbage) in any field; `batch_around` wraps a records region in a
header whose CRC is right, which is what a buggy or hostile producer sends.
"""
from __future__ import annotations

import struct

from crc32c import crc32c

from wire.batch_header import CRC_START, HEADER_SIZE, parse_header
from wire.records import SimpleRecord, build_batch
from wire.varint import encode_varlong


def _field(data: bytes | None) -> bytes:
    return encode_varlong(-1) if data is None else encode_varlong(len(data)) + data


def raw_record(*, ts_delta: int = 0, offset_delta: int = 0, key: bytes | None = b"k", value: bytes | None = b"v",
               headers: list[tuple[bytes | None, bytes | None]] = (), length_adjust: int = 0,
               header_count: int | None = None, offset_delta_bytes: bytes | None = None) -> bytes:
    body = b"\x00" + encode_varlong(ts_delta) + (offset_delta_bytes or encode_varlong(offset_delta)) + _field(key) + _field(value)
    body += encode_varlong(len(headers) if header_count is None else header_count)
    for header_key, header_value in headers:
        body += _field(header_key) + _field(header_value)
    return encode_varlong(len(body) + length_adjust) + body


def batch_around(records: bytes, *, count: int, last_offset_delta: int | None = None, base_timestamp: int = 1000,
                 max_timestamp: int | None = None, attributes: int = 0) -> bytes:
    """A batch holding the records region `records` (as given: not encoded, not checked)."""
    template = bytearray(build_batch([SimpleRecord(b"k", b"v", timestamp=base_timestamp)]))
    struct.pack_into(">h", template, 21, attributes)
    struct.pack_into(">i", template, 23, count - 1 if last_offset_delta is None else last_offset_delta)
    struct.pack_into(">q", template, 35, base_timestamp if max_timestamp is None else max_timestamp)
    struct.pack_into(">i", template, 57, count)
    out = template[:HEADER_SIZE] + records
    struct.pack_into(">i", out, 8, len(out) - 12)
    struct.pack_into(">I", out, 17, crc32c(bytes(out[CRC_START:])))
    parse_header(out)
    return bytes(out)
