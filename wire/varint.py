"""Variable-length integers used by the Kafka protocol.

- Unsigned varint (LEB128): compact lengths and tagged fields of flexible versions.
- ZigZag varint / varlong: fields inside RecordBatch v2 records.

Decoders take a buffer and a position and return (value, new_position); they
raise `DecodeError` on truncated input or over-long encodings.
"""
from __future__ import annotations

from wire.errors import DecodeError

__all__ = [
    "encode_uvarint",
    "decode_uvarint",
    "encode_varint",
    "decode_varint",
    "encode_varlong",
    "decode_varlong",
    "zigzag",
    "unzigzag",
]


def encode_uvarint(value: int) -> bytes:
    if value < 0:
        raise ValueError(f"unsigned varint cannot encode {value}")
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _decode_unsigned(buf, pos: int, max_bytes: int) -> tuple[int, int]:
    result = 0
    shift = 0
    end = len(buf)
    for i in range(max_bytes):
        if pos >= end:
            raise DecodeError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
    raise DecodeError(f"varint longer than {max_bytes} bytes")


def decode_uvarint(buf, pos: int = 0) -> tuple[int, int]:
    """An unsigned 32-bit varint (Kafka's UNSIGNED_VARINT)."""
    if pos < len(buf) and buf[pos] < 0x80:  # fast path: one byte
        return buf[pos], pos + 1
    return _decode_unsigned(buf, pos, 5)


def zigzag(value: int) -> int:
    return (value << 1) ^ (value >> 63)


def unzigzag(value: int) -> int:
    return (value >> 1) ^ -(value & 1)


def encode_varint(value: int) -> bytes:
    """ZigZag-encoded signed 32-bit varint."""
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint out of int32 range: {value}")
    return encode_uvarint(zigzag(value) & 0xFFFFFFFF)


def decode_varint(buf, pos: int = 0) -> tuple[int, int]:
    raw, pos = _decode_unsigned(buf, pos, 5)
    if raw > 0xFFFFFFFF:
        raise DecodeError("varint overflows int32")
    return unzigzag(raw), pos


def encode_varlong(value: int) -> bytes:
    """ZigZag-encoded signed 64-bit varint."""
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of int64 range: {value}")
    return encode_uvarint(zigzag(value) & 0xFFFFFFFFFFFFFFFF)


def decode_varlong(buf, pos: int = 0) -> tuple[int, int]:
    raw, pos = _decode_unsigned(buf, pos, 10)
    if raw > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError("varlong overflows int64")
    return unzigzag(raw), pos
