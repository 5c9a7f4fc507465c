"""Arrow columns → the records section of a RecordBatch v2, for all rows at once (the sink).

`encode_records` lays out, per row (wire.records documents the record format):

    [length][attributes 0][timestamp delta 0][offset delta][key length] key [value length] value
    [header count] ([key length] "raftkafka.sink" [value length] tag-prefix row-number)?

Consecutive rows whose records have one layout (the same key, value and tag lengths and the
same size of offset delta) form a run, and a run's records are rows of one byte matrix:
each field is one column slice, written for all the run's records at once (keys, values and
the tag's row numbers, decimal by Arrow's int → string cast, straight from their Arrow data
buffers). The sink's rows come in few runs: values of one size, keys of one size or null,
row numbers that change their number of digits at powers of ten.

When the rows make many short runs, the small varint pieces are written column-wise into a
fixed-width numpy matrix instead, and one Arrow `take` over all pieces, in record order,
copies them into one contiguous buffer. Rows with headers of their own go through
`wire.records.build_batch` (one Python step per record).

`batch_appender.seal_batch` puts the batch header in front of a section.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from wire.batch_header import HEADER_SIZE
from wire.records import SimpleRecord, build_batch
from wire.varint import encode_varint

__all__ = ["encode_records", "SINK_HEADER_KEY"]

SINK_HEADER_KEY = b"raftkafka.sink"
_SMALL_WIDTH = 20  # length + attributes + timestamp delta + offset delta + key length: at most 17 bytes
_MIN_RUN = 64  # rows per run, on average, for the strided layout
_DELTA_SIZE_STEPS = (64, 8192, 1 << 20, 1 << 27)  # offset deltas whose varint is a byte longer than the one before


def _zigzag(values: np.ndarray) -> np.ndarray:
    v = values.astype(np.int64)
    return ((v << 1) ^ (v >> 63)).astype(np.uint64)


def _varint_sizes(z: np.ndarray) -> np.ndarray:
    sizes = np.ones(len(z), dtype=np.int64)
    for bits in (7, 14, 21, 28, 35, 42, 49, 56, 63):
        sizes += z >= np.uint64(1 << bits)
    return sizes


def _put_varints(matrix: np.ndarray, column: np.ndarray, z: np.ndarray) -> None:
    """Write varint z[i] into matrix row i from `column[i]` on; advances `column` in place."""
    rows = np.arange(len(z))
    z = z.copy()
    while rows.size:
        zz = z[rows]
        more = zz >= 0x80
        matrix[rows, column[rows]] = ((zz & np.uint64(0x7F)) | (more.astype(np.uint64) << np.uint64(7))).astype(np.uint8)
        column[rows] += 1
        z[rows] = zz >> np.uint64(7)
        rows = rows[more]


def _pieces(matrix: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """Row i of `matrix`, cut to lengths[i], as element 2i of a binary array (odd elements: the rest
    of each row)."""
    n, width = matrix.shape
    spread = np.empty(2 * n, dtype=np.int32)
    spread[0::2] = np.arange(n, dtype=np.int32) * width
    spread[1::2] = spread[0::2] + lengths
    return pa.Array.from_buffers(pa.binary(), 2 * n - 1, [None, pa.py_buffer(spread), pa.py_buffer(matrix)])


def _lengths(column: pa.Array) -> np.ndarray:
    """Byte length of each element, -1 where null."""
    lengths = pc.binary_length(column).fill_null(-1)
    return lengths.to_numpy(zero_copy_only=False).astype(np.int64)


def encode_records(keys: pa.Array, values: pa.Array, *, tag_prefix: bytes | None = None,
                   tag_numbers: np.ndarray | None = None, headers: list | None = None) -> bytes | memoryview:
    """The records section for rows (keys[i], values[i]) with offset deltas 0.. and timestamp
    delta 0. With `tag_prefix`, row i carries the header raftkafka.sink = tag_prefix + tag_numbers[i].
    `headers`: each row's own (key str, value bytes | None) pairs, or None when no row has any."""
    n = len(keys)
    if not n:
        return b""
    keys, values = keys.cast(pa.binary()), values.cast(pa.binary())
    if headers is not None and any(headers):
        return _encode_each(keys, values, tag_prefix, tag_numbers, headers)
    key_len, value_len = _lengths(keys), _lengths(values)
    digits = tag_len = None
    if tag_prefix is not None:
        digits = pa.array(tag_numbers, pa.int64()).cast(pa.string()).cast(pa.binary())
        tag_len = len(tag_prefix) + _lengths(digits)
    bounds = _run_bounds(n, [key_len, value_len] + ([tag_len] if tag_len is not None else []))
    if len(bounds) - 1 <= max(1, n // _MIN_RUN):
        return _encode_strided(bounds, [(keys, key_len), (values, value_len)],
                               (tag_prefix, digits, tag_len) if tag_prefix is not None else None)

    if tag_prefix is not None:
        tag_len_z = _zigzag(tag_len)
        header_len = 2 + len(SINK_HEADER_KEY) + _varint_sizes(tag_len_z) + tag_len
    else:
        header_len = np.ones(n, dtype=np.int64)
    key_len_z, value_len_z = _zigzag(key_len), _zigzag(value_len)
    delta_z = _zigzag(np.arange(n, dtype=np.int64))
    value_len_size = _varint_sizes(value_len_z)
    body = (2 + _varint_sizes(delta_z) + _varint_sizes(key_len_z) + np.maximum(key_len, 0) + value_len_size
            + np.maximum(value_len, 0) + header_len)

    small = np.zeros((n, _SMALL_WIDTH), dtype=np.uint8)
    column = np.zeros(n, dtype=np.int64)
    _put_varints(small, column, _zigzag(body))
    column += 2  # attributes 0, timestamp delta 0 (already zero)
    _put_varints(small, column, delta_z)
    _put_varints(small, column, key_len_z)
    value_head = np.zeros((n, 5), dtype=np.uint8)
    value_column = np.zeros(n, dtype=np.int64)
    _put_varints(value_head, value_column, value_len_z)

    pieces = [_pieces(small, column), keys.fill_null(b""), _pieces(value_head, value_column), values.fill_null(b"")]
    if tag_prefix is not None:
        tag_head = np.zeros((n, 5), dtype=np.uint8)
        tag_column = np.zeros(n, dtype=np.int64)
        _put_varints(tag_head, tag_column, tag_len_z)
        pieces += [pa.array([b"\x02" + bytes([len(SINK_HEADER_KEY) << 1]) + SINK_HEADER_KEY], pa.binary()),
                   _pieces(tag_head, tag_column), pa.array([tag_prefix], pa.binary()), digits]
    else:
        pieces.append(pa.array([b"\x00"], pa.binary()))  # header count 0

    # Piece j of record i in their concatenation: a spread piece at 2i, a column at i, a constant once.
    starts, order = 0, []
    for piece in pieces:
        step = 0 if len(piece) == 1 and n > 1 else 2 if len(piece) == 2 * n - 1 else 1
        order.append(starts + step * np.arange(n, dtype=np.int64))
        starts += len(piece)
    taken = pa.concat_arrays(pieces).take(pa.array(np.stack(order, axis=1).ravel()))
    offsets = np.frombuffer(taken.buffers()[1], dtype=np.int32)[taken.offset:taken.offset + len(taken) + 1]
    return taken.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]


def _run_bounds(n: int, lengths: list[np.ndarray]) -> np.ndarray:
    """0, where any of `lengths` or the size of the offset delta's varint changes, n."""
    changed = np.zeros(n, dtype=bool)
    for column in lengths:
        changed[1:] |= column[1:] != column[:-1]
    changed[[d for d in _DELTA_SIZE_STEPS if d < n]] = True
    changed[0] = False
    return np.concatenate(([0], np.flatnonzero(changed), [n]))


def _encode_strided(bounds: np.ndarray, fields: list, tag) -> memoryview:
    """The records of runs [bounds[r], bounds[r + 1]): each run's records are the rows of one
    byte matrix, first all a template of the run's constant bytes, then the fields that vary
    (offset delta, keys, values, the tag's row numbers) a column slice at a time."""
    runs = []
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        body = bytearray(b"\x00\x00")  # attributes, timestamp delta
        delta_at, delta_size = len(body), len(encode_varint(a))
        body += bytes(delta_size)
        slots = []  # (where in the body, binary array, bytes per element)
        for array, lengths in fields:
            length = int(lengths[a])  # -1: null
            body += encode_varint(length)
            if length > 0:
                slots.append((len(body), array, length))
                body += bytes(length)
        if tag is None:
            body += b"\x00"  # no headers
        else:
            prefix, digits, tag_len = tag
            body += b"\x02" + encode_varint(len(SINK_HEADER_KEY)) + SINK_HEADER_KEY + encode_varint(int(tag_len[a]))
            body += prefix
            slots.append((len(body), digits, int(tag_len[a]) - len(prefix)))
            body += bytes(slots[-1][2])
        head = encode_varint(len(body))
        runs.append((a, b, head + body, len(head) + delta_at, delta_size,
                     [(len(head) + at, array, size) for at, array, size in slots]))
    out = np.empty(sum((b - a) * len(template) for a, b, template, *_ in runs), dtype=np.uint8)
    start = 0
    for a, b, template, delta_at, delta_size, slots in runs:
        rows = out[start:start + (b - a) * len(template)].reshape(b - a, len(template))
        start += (b - a) * len(template)
        rows[:] = np.frombuffer(template, dtype=np.uint8)
        z = np.arange(2 * a, 2 * b, 2, dtype=np.int64)  # the deltas' zigzag (they are not negative)
        for i in range(delta_size):
            rows[:, delta_at + i] = ((z >> (7 * i)) & 0x7F) | (0x80 if i < delta_size - 1 else 0)
        for at, array, size in slots:
            _put_data(rows, at, array, a, b, size)
    return out.data  # sealing the batch copies it once more: no copy to bytes here


def _put_data(rows: np.ndarray, at: int, array: pa.Array, a: int, b: int, size: int) -> None:
    """Elements a..b of a binary array, each `size` bytes long, into the columns from `at`:
    elements of one length lie back to back in the data buffer."""
    first = int(np.frombuffer(array.buffers()[1], dtype=np.int32, count=1, offset=4 * (array.offset + a))[0])
    data = np.frombuffer(array.buffers()[2], dtype=np.uint8, count=(b - a) * size, offset=first)
    rows[:, at:at + size] = data.reshape(b - a, size)


def _encode_each(keys, values, tag_prefix, tag_numbers, headers) -> bytes:
    records = []
    for i, (key, value) in enumerate(zip(keys.to_pylist(), values.to_pylist())):
        own = tuple(headers[i] or ())
        if tag_prefix is not None:
            own += ((SINK_HEADER_KEY.decode(), tag_prefix + b"%d" % tag_numbers[i]),)
        records.append(SimpleRecord(key, value, own, 0))
    return build_batch(records, base_timestamp=0)[HEADER_SIZE:]
