"""Readers and writers for the variable-length protocol types.

Readers take `(buf, pos)` where `buf` is a byte-format memoryview and return
`(value, new_pos)`; they raise `DecodeError` on negative or overlong lengths.
Fixed-size fields never come here: the generated code reads runs of them with
one precompiled `struct.Struct`.

Writers append byte chunks to a list (joined once at the end), so record data
is copied exactly once, into the final frame.
"""
from __future__ import annotations

import math
import struct
import uuid as _uuid

from wire.errors import DecodeError
from wire.varint import decode_uvarint, encode_uvarint

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_i16_from = _I16.unpack_from
_i32_from = _I32.unpack_from
_pack_i16 = _I16.pack
_pack_i32 = _I32.pack
_NULL16 = _pack_i16(-1)
_NULL32 = _pack_i32(-1)
_ZERO_BYTE = b"\x00"


class ItemBudget:
    """The array elements the decoding in progress has read, and how many it may: decode_request
    counts and bounds one request's; unbounded otherwise. Decoding is synchronous, so one
    budget serves them all."""

    __slots__ = ("limit", "taken")

    def __init__(self) -> None:
        self.reset(math.inf)

    def reset(self, limit: float) -> None:
        self.limit = limit
        self.taken = 0


ITEM_BUDGET = ItemBudget()


def take_items(n: int) -> None:
    """Count an array of n elements against ITEM_BUDGET (generated decoders call it)."""
    ITEM_BUDGET.taken += n
    if ITEM_BUDGET.taken > ITEM_BUDGET.limit:
        raise DecodeError(f"more than {ITEM_BUDGET.limit} array elements in one request")


def _span(buf, pos: int, length: int, what: str) -> int:
    end = pos + length
    if end > len(buf):
        raise DecodeError(f"{what} of {length} bytes overruns the frame")
    return end


def _null(what: str):
    raise DecodeError(f"null {what} where the field is not nullable")


# ---- lengths -------------------------------------------------------------- #


def _len32(buf, pos):
    return _i32_from(buf, pos)[0], pos + 4


def _lencompact(buf, pos):
    n, pos = decode_uvarint(buf, pos)
    return n - 1, pos


# ---- strings (each reader is one flat function: these run per field) ------- #


def read_string(buf, pos):
    n = _i16_from(buf, pos)[0]
    pos += 2
    end = pos + n
    if n < 0 or end > len(buf):
        raise DecodeError(f"bad string length {n}" if n < 0 else f"string of {n} bytes overruns the frame")
    return str(buf[pos:end], "utf-8"), end


def read_nullable_string(buf, pos):
    n = _i16_from(buf, pos)[0]
    pos += 2
    if n == -1:
        return None, pos
    end = pos + n
    if n < 0 or end > len(buf):
        raise DecodeError(f"bad string length {n}" if n < 0 else f"string of {n} bytes overruns the frame")
    return str(buf[pos:end], "utf-8"), end


def read_compact_string(buf, pos):
    n, pos = _lencompact(buf, pos)
    if n < 0:
        _null("compact string")
    end = _span(buf, pos, n, "string")
    return str(buf[pos:end], "utf-8"), end


def read_compact_nullable_string(buf, pos):
    n, pos = _lencompact(buf, pos)
    if n < 0:
        return None, pos
    end = _span(buf, pos, n, "string")
    return str(buf[pos:end], "utf-8"), end


def write_string(out, value):
    data = value.encode()
    if len(data) > 0x7FFF:
        raise ValueError(f"string of {len(data)} bytes is too long for an int16 length")
    out.append(_pack_i16(len(data)) + data)


def write_nullable_string(out, value):
    if value is None:
        out.append(_NULL16)
    else:
        write_string(out, value)


def write_compact_string(out, value):
    data = value.encode()
    out.append(encode_uvarint(len(data) + 1) + data)


def write_compact_nullable_string(out, value):
    if value is None:
        out.append(_ZERO_BYTE)
    else:
        write_compact_string(out, value)


# ---- bytes (copied: small, handlers keep them) ---------------------------- #


def read_bytes(buf, pos):
    n, pos = _len32(buf, pos)
    if n < 0:
        _null("bytes")
    end = _span(buf, pos, n, "bytes")
    return bytes(buf[pos:end]), end


def read_nullable_bytes(buf, pos):
    n, pos = _len32(buf, pos)
    if n < 0:
        if n != -1:
            raise DecodeError(f"bad bytes length {n}")
        return None, pos
    end = _span(buf, pos, n, "bytes")
    return bytes(buf[pos:end]), end


def read_compact_bytes(buf, pos):
    n, pos = _lencompact(buf, pos)
    if n < 0:
        _null("compact bytes")
    end = _span(buf, pos, n, "bytes")
    return bytes(buf[pos:end]), end


def read_compact_nullable_bytes(buf, pos):
    n, pos = _lencompact(buf, pos)
    if n < 0:
        return None, pos
    end = _span(buf, pos, n, "bytes")
    return bytes(buf[pos:end]), end


def write_bytes(out, value):
    out.append(_pack_i32(len(value)))
    out.append(value)


def write_nullable_bytes(out, value):
    if value is None:
        out.append(_NULL32)
    else:
        out.append(_pack_i32(len(value)))
        out.append(value)


def write_compact_bytes(out, value):
    out.append(encode_uvarint(len(value) + 1))
    out.append(value)


def write_compact_nullable_bytes(out, value):
    if value is None:
        out.append(_ZERO_BYTE)
    else:
        out.append(encode_uvarint(len(value) + 1))
        out.append(value)


# ---- records: a zero-copy view of the frame ------------------------------- #


def read_records(buf, pos):
    n, pos = _len32(buf, pos)
    if n < 0:
        _null("records")
    end = _span(buf, pos, n, "records")
    return buf[pos:end], end


def read_nullable_records(buf, pos):
    n = _i32_from(buf, pos)[0]
    pos += 4
    if n == -1:
        return None, pos
    end = pos + n
    if n < 0 or end > len(buf):
        raise DecodeError(f"bad records length {n}" if n < 0 else f"records of {n} bytes overrun the frame")
    return buf[pos:end], end


def read_compact_records(buf, pos):
    n, pos = _lencompact(buf, pos)
    if n < 0:
        _null("compact records")
    end = _span(buf, pos, n, "records")
    return buf[pos:end], end


def read_compact_nullable_records(buf, pos):
    n, pos = _lencompact(buf, pos)
    if n < 0:
        return None, pos
    end = _span(buf, pos, n, "records")
    return buf[pos:end], end


def _nbytes(value) -> int:
    return value.nbytes if isinstance(value, memoryview) else len(value)


def write_records(out, value):
    out.append(_pack_i32(_nbytes(value)))
    out.append(value)


def write_nullable_records(out, value):
    if value is None:
        out.append(_NULL32)
    else:
        write_records(out, value)


def write_compact_records(out, value):
    out.append(encode_uvarint(_nbytes(value) + 1))
    out.append(value)


def write_compact_nullable_records(out, value):
    if value is None:
        out.append(_ZERO_BYTE)
    else:
        write_compact_records(out, value)


# ---- uuid ----------------------------------------------------------------- #


def read_uuid(buf, pos):
    end = _span(buf, pos, 16, "uuid")
    return _uuid.UUID(bytes=bytes(buf[pos:end])), end


def write_uuid(out, value):
    out.append(value.bytes)


# ---- array lengths -------------------------------------------------------- #


def _check_count(buf, pos, n):
    # Every element takes at least one byte: a count beyond the remaining bytes
    # is malformed, and rejecting it early stops huge loops on garbage input.
    if n > len(buf) - pos:
        raise DecodeError(f"array of {n} elements overruns the frame")
    return n, pos


def read_array_len(buf, pos):
    n = _i32_from(buf, pos)[0]
    pos += 4
    if n < 0 or n > len(buf) - pos:
        raise DecodeError(f"null array where the field is not nullable" if n < 0 else
                          f"array of {n} elements overruns the frame")
    return n, pos


def read_nullable_array_len(buf, pos):
    n, pos = _len32(buf, pos)
    if n < 0:
        if n != -1:
            raise DecodeError(f"bad array length {n}")
        return None, pos
    return _check_count(buf, pos, n)


def read_compact_array_len(buf, pos):
    n, pos = _lencompact(buf, pos)
    if n < 0:
        _null("compact array")
    return _check_count(buf, pos, n)


def read_compact_nullable_array_len(buf, pos):
    n, pos = _lencompact(buf, pos)
    if n < 0:
        return None, pos
    return _check_count(buf, pos, n)


def write_array_len(out, n):
    out.append(_pack_i32(n))


def write_compact_array_len(out, n):
    out.append(encode_uvarint(n + 1))


def write_null_array(out):
    out.append(_NULL32)


def write_null_compact_array(out):
    out.append(_ZERO_BYTE)


# ---- tagged fields -------------------------------------------------------- #


def read_tagged_fields(buf, pos, obj, known):
    """Read a tagged-field section into `obj`.

    `known` maps tag -> (attribute, reader). Unknown tags are kept as raw
    bytes (returned, or None when there are none) so a re-encode is exact.
    """
    count, pos = decode_uvarint(buf, pos)
    unknown = None
    last = -1
    for _ in range(count):
        tag, pos = decode_uvarint(buf, pos)
        if tag <= last:
            raise DecodeError(f"tagged fields out of order: {tag} after {last}")
        last = tag
        size, pos = decode_uvarint(buf, pos)
        end = _span(buf, pos, size, "tagged field")
        entry = known.get(tag)
        if entry is None:
            if unknown is None:
                unknown = []
            unknown.append((tag, bytes(buf[pos:end])))
        else:
            attr, reader = entry
            value, used = reader(buf[:end], pos)
            if used != end:
                raise DecodeError(f"tagged field {tag} has {end - used} trailing bytes")
            setattr(obj, attr, value)
        pos = end
    return unknown, pos


def write_tagged_fields(out, tagged, unknown):
    """`tagged` is a list of (tag, payload bytes) in ascending tag order."""
    if unknown:
        tagged = sorted(tagged + list(unknown))
    out.append(encode_uvarint(len(tagged)))
    for tag, payload in tagged:
        out.append(encode_uvarint(tag) + encode_uvarint(len(payload)))
        out.append(payload)


def read_empty_tagged_fields(buf, pos):
    """Skip a tagged section of a struct that defines no tags (headers, most structs)."""
    count, pos = decode_uvarint(buf, pos)
    unknown = None
    last = -1
    for _ in range(count):
        tag, pos = decode_uvarint(buf, pos)
        if tag <= last:
            raise DecodeError(f"tagged fields out of order: {tag} after {last}")
        last = tag
        size, pos = decode_uvarint(buf, pos)
        end = _span(buf, pos, size, "tagged field")
        if unknown is None:
            unknown = []
        unknown.append((tag, bytes(buf[pos:end])))
        pos = end
    return unknown, pos
