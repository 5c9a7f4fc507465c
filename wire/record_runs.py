"""Runs of records in a RecordBatch v2, validated a column at a time in C.

Producers mostly send records of one shape: the same encoded length, the
same widths of the timestamp and offset deltas, the same key and value
lengths, no headers or the same header keys with values of the same length
(a tracing header, the Spark sink's tag). Records of one shape lie at a fixed
stride, so each field is a column `data[start::size]` that C code can slice
and compare without a Python step per record (`uniform_run`):

- record length, key length, value length, header count, header key lengths,
  header keys and header value lengths: one constant byte per position
  (`bytes.lstrip` finds the first that differs); header keys are checked for
  UTF-8 once, in the first record, as the others equal it byte for byte;
- timestamp delta: continuation bits set on every byte but the last (a
  regular expression finds the first exception);
- offset delta: exactly the run's record indexes, compared with precomputed
  columns of zigzag encodings.

Records that differ only in their value length (`varied_run`) lie at no
fixed stride: one Python walk over their length varints finds them, their
fields up to the value length are joined side by side at a fixed stride and
checked as above, and each value length is checked against a table indexed
by the room left in its record.

Only the first record is parsed field by field (its shape); a run ends at
the first record that differs, and the caller reads what follows one record
at a time. Keys and values are opaque bytes: nothing to check.
"""
from __future__ import annotations

import functools
import re
from bisect import bisect_right
from itertools import compress, repeat
from operator import add, ge, itemgetter, sub
from typing import NamedTuple

from wire.errors import DecodeError
from wire.varint import decode_varint, decode_varlong

__all__ = ["uniform_run", "uniform_run_shape", "varied_run", "MIN_RUN"]

MIN_RUN = 8  # shorter runs are not worth the slicing
_PROBE = 32  # a run is first checked over this many records, then over all it may hold
_WHOLE = 4 * _PROBE  # a run of at most this many is checked whole at once
_CONTINUATION = re.compile(b"[\x00-\x7f]")  # a byte that ends a varint
_HIGH_BIT = re.compile(b"[\x80-\xff]")  # a byte that does not
_MAX_HEADER_CONSTANTS = 64  # header bytes compared column by column at most (longer: one by one)


class _Shape(NamedTuple):
    size: int  # bytes of one record, its length varint included
    length_bytes: bytes
    ts_at: int  # offsets within the record
    ts_width: int
    offset_at: int
    offset_width: int
    key_at: int
    key_bytes: bytes  # the key length varint
    value_at: int
    value_bytes: bytes
    # (offset, bytes) pieces every record repeats: header count, key lengths, keys, value lengths
    header_bytes: tuple[tuple[int, bytes], ...]
    keyless: bool


def _shape(data, pos: int, *, headers: bool = False) -> _Shape | None:
    """The layout of the record at `pos`, or None if it is not one a run can repeat (headers
    unless `headers`, anything malformed: the one-by-one reader reports those)."""
    try:
        length, p = decode_varint(data, pos)
        record_end = p + length
        if length < 6 or record_end > len(data):
            return None
        length_end = p
        _, p = decode_varlong(data, p + 1)  # after the attributes byte
        offset_at = p
        _, p = decode_varint(data, p)
        key_at = p
        key_length, p = decode_varint(data, p)
        key_end = p
        value_at = p + max(key_length, 0)
        value_length, p = decode_varint(data, value_at)
        value_end = p
        p += max(value_length, 0)
        if key_length < -1 or value_length < -1:
            return None
        if data[p] != 0 and not headers:
            return None
        header_bytes, p = _header_bytes(data, p, pos, record_end)
        if p != record_end:
            return None
    except (DecodeError, IndexError, UnicodeDecodeError):
        return None
    return _Shape(record_end - pos, bytes(data[pos:length_end]), length_end + 1 - pos, offset_at - length_end - 1,
                  offset_at - pos, key_at - offset_at, key_at - pos, bytes(data[key_at:key_end]), value_at - pos,
                  bytes(data[value_at:value_end]), header_bytes, key_length == -1)


def _header_bytes(data, p: int, pos: int, record_end: int) -> tuple[tuple[tuple[int, bytes], ...], int]:
    """The headers from `p` (their count) of the record at `pos`: the (offset in the record, bytes)
    pieces a run repeats (count, key lengths, keys, value lengths; not the values), and the
    position after them. DecodeError when a run cannot repeat them."""
    start = p
    count, p = decode_varint(data, p)
    if count < 0:
        raise DecodeError("negative header count")
    pieces = []
    piece_at = start
    for _ in range(count):
        key_length, p = decode_varint(data, p)
        if key_length < 0 or p + key_length > record_end:
            raise DecodeError("invalid header key length")
        bytes(data[p:p + key_length]).decode("utf-8")
        value_length, p = decode_varint(data, p + key_length)
        if value_length < -1:
            raise DecodeError("invalid header value length")
        pieces.append((piece_at - pos, bytes(data[piece_at:p])))
        p += max(value_length, 0)
        piece_at = p
        if p > record_end:
            raise DecodeError("header value overruns the record")
    if count == 0:
        pieces.append((start - pos, bytes(data[start:p])))
    if sum(len(piece) for _, piece in pieces) > _MAX_HEADER_CONSTANTS:
        raise DecodeError("headers too long to compare column by column")
    return tuple(pieces), p


@functools.cache
def _offset_columns(width: int) -> tuple[int, list[bytes]]:
    """(first index, columns): byte i of the zigzag varint of each record index that takes
    `width` bytes (indexes up to 2**17 for width 3; longer batches are read one by one)."""
    first, stop = {1: (0, 64), 2: (64, 8192), 3: (8192, 1 << 17)}[width]
    zigzags = range(2 * first, 2 * stop, 2)
    columns = []
    for i in range(width):
        last = i == width - 1
        columns.append(bytes(((z >> (7 * i)) & 0x7F) | (0 if last else 0x80) for z in zigzags))
    return first, columns


def uniform_run(data, pos: int, index: int, count: int) -> tuple[int, int, int, int, int] | None:
    """Records index, index+1, ... from `pos` that share the first one's shape and are valid:
    (how many, position after them, smallest and largest timestamp delta, keyless among them),
    or None when fewer than MIN_RUN do."""
    run = _uniform_run(data, pos, index, count, headers=True)
    if run is None:
        return None
    n, shape = run
    low, high = _delta_range(data, pos + shape.ts_at, shape.size, n, shape.ts_width)
    return n, pos + n * shape.size, low, high, n if shape.keyless else 0


def uniform_run_shape(data, pos: int, index: int, count: int,
                      last_offset_delta: int) -> tuple[int, _Shape] | None:
    """`uniform_run`'s run of records without headers as (how many records, their shape), for a
    reader that slices their fields out as columns (each record is `shape.size` bytes; offset
    deltas are the indexes). None also when the run reaches past the batch's
    `last_offset_delta`: the one-by-one reader refuses that record."""
    run = _uniform_run(data, pos, index, count, headers=False)
    if run is None or index + run[0] - 1 > last_offset_delta:
        return None
    return run


def _uniform_run(data, pos: int, index: int, count: int, *, headers: bool) -> tuple[int, _Shape] | None:
    shape = _shape(data, pos, headers=headers)
    if shape is None or shape.ts_width > 2 or shape.offset_width > 3:
        return None
    first, offset_columns = _offset_columns(shape.offset_width)
    if not first <= index < first + len(offset_columns[0]):
        return None  # an over-long offset delta: the one-by-one reader judges it
    most = min(count - index, (len(data) - pos) // shape.size, first + len(offset_columns[0]) - index)
    if most < MIN_RUN:
        return None
    # A long run is first checked over _PROBE records (a batch without runs is found out
    # cheaply); one of a few probes' length is checked whole at once.
    probe = most if most <= _WHOLE else _PROBE
    n = _run_length(data, pos, index - first, shape, offset_columns, probe)
    if n == probe < most:
        n = _run_length(data, pos, index - first, shape, offset_columns, most)
    if n < MIN_RUN:
        return None
    return n, shape


def _run_length(data, pos: int, table_at: int, shape: _Shape, offset_columns: list[bytes], n: int) -> int:
    """How many of the `n` records from `pos` have `shape` (the first one has it)."""
    size = shape.size

    def column(at: int, n: int) -> bytes:
        return data[pos + at : pos + at + n * size : size]

    constants = ((0, shape.length_bytes), (shape.key_at, shape.key_bytes), (shape.value_at, shape.value_bytes),
                 *shape.header_bytes)
    return _columns_match(column, n, shape, constants, offset_columns, table_at)


def _columns_match(column, n: int, shape: _Shape, constants, offset_columns: list[bytes], table_at: int) -> int:
    """How many of the first `n` records have, in `column(offset, n)`: the `constants` (offset,
    bytes), a timestamp delta of the shape's width, and their index as offset delta."""
    for at, expected in constants:
        for i, byte in enumerate(expected):
            n -= len(column(at + i, n).lstrip(bytes((byte,))))
    for i in range(shape.ts_width):
        found = (_HIGH_BIT if i == shape.ts_width - 1 else _CONTINUATION).search(column(shape.ts_at + i, n))
        if found:
            n = found.start()
    for i, table in enumerate(offset_columns):
        n = _common_prefix(column(shape.offset_at + i, n), table[table_at : table_at + n])
    return n


def _common_prefix(a: bytes, b: bytes) -> int:
    if a == b:
        return len(a)
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:  # the longest equal prefix, by bisection: each comparison runs in C
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _delta_range(data, at: int, stride: int, n: int, width: int) -> tuple[int, int]:
    """Smallest and largest of the `n` timestamp deltas of `width` bytes at `at`, `at + stride`,
    ... (decoding each distinct encoding once)."""
    low_bytes = data[at : at + n * stride : stride]
    if width == 1:
        raws = set(low_bytes)
    else:
        high_bytes = data[at + 1 : at + 1 + n * stride : stride]
        raws = {(lo & 0x7F) | (hi << 7) for lo, hi in set(zip(low_bytes, high_bytes))}
    deltas = [(raw >> 1) ^ -(raw & 1) for raw in raws]
    return min(deltas), max(deltas)


# -- records of one shape but for the value length --------------------------------------------

_VARIED_CHUNK = 4096  # records walked at once at most
_NONE = -1  # in the tables below: no valid encoding (never equals a byte)


@functools.cache
def _value_length_tables() -> tuple[tuple[int, ...], tuple[int, ...]]:
    """By D = bytes from the value-length varint to the record end: the bytes that varint must
    have for the fields to tile the record exactly (value length V, then the header count byte):
    one byte when V = D - 2 < 64, two when V = D - 3 is 64..8191; _NONE where neither fits."""
    first, second = [_NONE] * 8195, [_NONE] * 8195
    for d in range(2, 66):
        first[d] = 2 * (d - 2)
    for d in range(67, 8195):
        z = 2 * (d - 3)
        first[d], second[d] = (z & 0x7F) | 0x80, z >> 7
    return tuple(first), tuple(second)


def varied_run(data, pos: int, index: int, count: int) -> tuple[int, int, int, int, int] | None:
    """Like `uniform_run`, for records that share everything but the value length (so their
    lengths differ and they lie at no fixed stride): one walk over the record lengths, then
    each field gathered from every record at once (itemgetter) and compared in C. The run ends
    at the first record that differs (at most _VARIED_CHUNK records, within one offset-delta
    width); a batch whose records differ is found out on the first _PROBE records."""
    shape = _shape(data, pos)
    if shape is None or shape.ts_width > 2 or shape.offset_width > 3:
        return None
    first, offset_columns = _offset_columns(shape.offset_width)
    if not first <= index < first + len(offset_columns[0]):
        return None
    most = min(count - index, first + len(offset_columns[0]) - index, _VARIED_CHUNK)
    if most < MIN_RUN:
        return None
    n, fields, ends = _varied_length(data, pos, index - first, shape, offset_columns, min(most, _PROBE))
    if n == _PROBE < most:
        n, fields, ends = _varied_length(data, pos, index - first, shape, offset_columns, most)
    if n < MIN_RUN:
        return None
    low, high = _delta_range(fields, shape.ts_at - len(shape.length_bytes), _fields_stride(shape), n,
                             shape.ts_width)
    return n, ends[n - 1], low, high, n if shape.keyless else 0


def _varied_length(data, pos: int, table_at: int, shape: _Shape, offset_columns: list[bytes], n: int):
    """(k, fields, record ends): the first k of the `n` records from `pos` share `shape` but for
    their value length (k < MIN_RUN: no run); `fields` holds each record's fields up to its
    value length, side by side."""
    bodies, ends = _walk(data, pos, n)  # where each record's fields start (after its length) and end
    body_at = len(shape.length_bytes)  # the first record's field offsets are taken from its body
    value_at = shape.value_at - body_at
    # Each record's fields up to its value length, side by side at a fixed stride: then every
    # field is a strided slice, as in a uniform run.
    stride = _fields_stride(shape)
    n = min(len(bodies), bisect_right(bodies, len(data) - stride))
    if n < MIN_RUN:
        return 0, b"", ends
    fields = b"".join(map(data.__getitem__, map(slice, bodies[:n], map(add, bodies[:n], repeat(stride)))))

    def column(at: int, n: int) -> bytes:
        return fields[at - body_at : n * stride : stride]

    n = _columns_match(column, n, shape, ((shape.key_at, shape.key_bytes),), offset_columns, table_at)
    if n < MIN_RUN:
        return 0, b"", ends
    # The value length must leave exactly the value and the header count byte in the record.
    distances = list(map(sub, map(sub, ends[:n], bodies[:n]), repeat(value_at)))
    first_bytes, second_bytes = _value_length_tables()
    if min(distances) < 2 or max(distances) >= len(first_bytes):
        n = next(i for i, d in enumerate(distances) if not 2 <= d < len(first_bytes))
        if n < MIN_RUN:
            return 0, b"", ends
        distances = distances[:n]
    n = _common_prefix(tuple(column(shape.value_at, n)), _pick(first_bytes, distances))
    two = list(map(ge, distances[:n], repeat(67)))
    if any(two):
        matched = _common_prefix(bytes(compress(column(shape.value_at + 1, n), two)),
                                 bytes(_pick(second_bytes, list(compress(distances, two)))))
        if matched < sum(two):
            n = list(compress(range(n), two))[matched]
    if n < MIN_RUN:
        return 0, b"", ends
    headers = bytes(_gather(data, ends[:n], -1))
    return n - len(headers.lstrip(b"\x00")), fields, ends  # a header count other than 0 ends the run


def _fields_stride(shape: _Shape) -> int:
    """Bytes of a record's fields from its body (after the length) through a two-byte value length."""
    return shape.value_at - len(shape.length_bytes) + 2


def _walk(data, pos: int, n: int) -> tuple[list[int], list[int]]:
    """Body starts and ends of up to `n` records from `pos`, by their length varints of one or
    two bytes; stops before a record whose length is longer, negative or overruns the data."""
    bodies, ends = [], []
    add_body, add_end = bodies.append, ends.append
    end = len(data)
    try:
        for _ in range(n):
            b = data[pos]
            if b < 0x80:
                length = b
                body = pos + 1
            else:
                b2 = data[pos + 1]
                if b2 >= 0x80:
                    break
                length = (b & 0x7F) | (b2 << 7)
                body = pos + 2
            if length & 1 or body + (length >> 1) > end:
                break  # negative, or beyond the data
            pos = body + (length >> 1)
            add_body(body)
            add_end(pos)
    except IndexError:
        pass
    return bodies, ends


def _gather(data, positions: list[int], offset: int) -> tuple[int, ...]:
    """data[p + offset] for every p, in C."""
    return _pick(data, list(map(add, positions, repeat(offset))))


def _pick(seq, indexes: list[int]) -> tuple:
    if len(indexes) < 2:
        return tuple(seq[i] for i in indexes)
    return itemgetter(*indexes)(seq)
