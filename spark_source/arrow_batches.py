"""Fetched record batches → one pyarrow RecordBatch in Spark's Kafka schema, with no Python
object per record.

A Fetch answer's batches are walked in Python (one step per record batch: skip control
batches and, under read_committed, aborted transactions, as Kafka's consumer does;
decompress through `wire.compression`). Their record regions are joined into one buffer
and decoded column-wise with numpy (`record_columns`): every record's varint fields
are read for all records at once, and key/value/header bytes are gathered into Arrow's
contiguous binary layout by one `take` over a binary array whose offsets interleave the
fields with the gaps between them.

When every batch's records are runs of one shape each (`wire.record_runs`: the same
lengths and header-less, as producers mostly send; the runs are validated there a column
at a time), the columns come straight from the runs: record i of a run starts at
`i * size`, its key and value at fixed places, and only the timestamp deltas are read.
Otherwise only finding where each record starts is sequential (each starts where the
previous ends): `record_starts` walks it in strides, records of one size in a row
confirmed together, and every record's varint fields are read for all records at once.

Decoding is as strict as `wire.records.decode_records` (lengths within the record,
increasing offset deltas, nothing trailing); on any violation that function is run on
each batch so the error raised is its precise `CorruptRecordError`.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from functools import lru_cache

from spark_source.arrow_rows import arrow_schema as _arrow_schema
from wire.batch_header import HEADER_SIZE, BatchHeader, iter_batches
from wire.compression import DEFAULT_MAX_DECOMPRESSED, decompress
from wire.errors import CorruptRecordError
from wire.record_runs import uniform_run_shape
from wire.record_scan import _varint as varint_at  # one scalar zigzag varint (the broker's record scan)
from wire.records import ControlType, decode_records, parse_control_record
from wire.varint import decode_varint

__all__ = ["decode_fetched", "record_starts", "record_columns", "RecordColumns"]

arrow_schema = lru_cache(maxsize=2)(_arrow_schema)

_MIN_RECORD = 7            # length varint + the 6 bytes of the smallest record body
_SCALAR_STEPS = 32         # records walked one by one after a stride broke off early


def decode_fetched(data, position: int, end: int, *, topic: str, partition: int, include_headers: bool = False,
                   aborted: list[tuple[int, int]] | None = None) -> tuple[pa.RecordBatch | None, int]:
    """Rows with `position <= offset < end` from the whole batches in `data` (a Fetch answer's
    records), and the offset to fetch next (past control batches and compacted gaps, at most `end`).

    `aborted` (read_committed only): the answer's (producer id, first offset) list; records of
    those aborted transactions are left out. None: read_uncommitted, every data batch is read.
    """
    buf = memoryview(data).cast("B") if not isinstance(data, bytes) else data
    regions, payloads, headers = [], [], []
    next_offset = position
    pending = sorted(aborted or (), key=lambda a: a[1])
    aborting: set[int] = set()
    for pos, header in iter_batches(buf):
        next_offset = max(next_offset, header.next_offset)
        if aborted is not None and header.producer_id >= 0:
            while pending and pending[0][1] <= header.last_offset:
                aborting.add(pending.pop(0)[0])
            if header.is_control:
                if _is_abort_marker(buf, pos, header):
                    aborting.discard(header.producer_id)
                continue
            if header.is_transactional and header.producer_id in aborting:
                continue
        if header.is_control or header.next_offset <= position or header.base_offset >= end \
                or header.records_count == 0:
            continue
        payload = buf[pos + HEADER_SIZE:pos + header.size]
        regions.append(decompress(header.compression, payload, max_output=DEFAULT_MAX_DECOMPRESSED)
                       if header.compression else payload)
        payloads.append(payload)
        headers.append(header)
    next_offset = min(next_offset, end)
    if not headers:
        return None, next_offset
    try:
        columns = record_columns(regions, headers)
    except CorruptRecordError:
        for header, payload in zip(headers, payloads):
            decode_records(header, bytes(payload))  # raises the precise error of the first bad batch
        raise
    batch = columns.to_arrow(position, end, topic, partition, include_headers)
    return (batch if batch.num_rows else None), next_offset


def _is_abort_marker(buf, pos: int, header: BatchHeader) -> bool:
    records = decode_records(header, bytes(buf[pos + HEADER_SIZE:pos + header.size]))
    return bool(records) and parse_control_record(records[0]).type == ControlType.ABORT


# --------------------------------------------------------------------------- varints, vectorised


def _varints(data: np.ndarray, at: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ZigZag varints at positions `at`: (values int64, positions after them). Positions past the
    buffer read its last byte; callers bound every field by its record's end, which catches that."""
    last = len(data) - 1
    first = data.take(at, mode="clip")
    more = first >= 0x80
    if not more.any():
        raw = first.astype(np.int64)
        return (raw >> 1) ^ -(raw & 1), at + 1
    raw = (first & 0x7F).astype(np.uint64)
    after = at + 1
    pending = np.flatnonzero(more)
    shift = 7
    while pending.size:
        if shift > 63:
            raise CorruptRecordError("record varint longer than 10 bytes")
        b = data.take(np.minimum(after[pending], last))
        if shift == 63 and (b[b < 0x80] > 1).any():
            raise CorruptRecordError("record varint overflows 64 bits")
        raw[pending] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        after[pending] += 1
        pending = pending[b >= 0x80]
        shift += 7
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, after


def record_starts(data: bytes, count: int) -> np.ndarray:
    """Start of each of `count` records laid end to end in `data`; they must fill it exactly."""
    arr = np.frombuffer(data, dtype=np.uint8)
    size = len(arr)
    if count > size // _MIN_RECORD:
        raise CorruptRecordError(f"record count {count} impossible in {size} bytes")
    starts = np.empty(count, dtype=np.int64)
    i = pos = 0
    scalar_budget, window = 0, 256
    try:
        while i < count:
            length, body = varint_at(data, pos, 10)
            if length < 6 or body + length > size:
                raise CorruptRecordError(f"invalid record length {length}")
            stride = body + length - pos
            if scalar_budget:
                scalar_budget -= 1
                starts[i], i, pos = pos, i + 1, pos + stride
                continue
            # The next records whose length varint has the same bytes have the same size: take
            # the run of those (a window that doubles while whole windows match).
            run = min(count - i, (size - pos) // stride, window)
            at = pos + stride * np.arange(run, dtype=np.int64)
            same = arr[at] == data[pos]
            for j in range(1, body - pos):
                same &= arr[at + j] == data[pos + j]
            k = run if same.all() else int(np.argmin(same))
            starts[i:i + k] = at[:k]
            i, pos = i + k, pos + k * stride
            if k == run:
                window *= 2
            elif k < 8:
                scalar_budget, window = _SCALAR_STEPS, 256
    except IndexError:
        raise CorruptRecordError("record truncated") from None
    if pos != size:
        raise CorruptRecordError(f"{size - pos} bytes trail the last record of the batch")
    return starts


# --------------------------------------------------------------------------- columns


class RecordColumns:
    """The records of some batches as numpy arrays over one buffer (positions into `data`)."""

    def __init__(self, data: bytes, offsets, timestamps, timestamp_types, key_at, key_len, value_at, value_len,
                 header_counts, header_key_at, header_key_len, header_value_at, header_value_len):
        self.data = data
        self.offsets, self.timestamps, self.timestamp_types = offsets, timestamps, timestamp_types
        self.key_at, self.key_len, self.value_at, self.value_len = key_at, key_len, value_at, value_len
        self.header_counts = header_counts
        self.header_key_at, self.header_key_len = header_key_at, header_key_len
        self.header_value_at, self.header_value_len = header_value_at, header_value_len

    def to_arrow(self, position: int, end: int, topic: str, partition: int,
                 include_headers: bool) -> pa.RecordBatch:
        keep = (self.offsets >= position) & (self.offsets < end)
        everything = bool(keep.all())
        pick = (lambda a: a) if everything else (lambda a: a[keep])
        n = int(keep.sum())
        data = pa.py_buffer(self.data)
        timestamps = pick(self.timestamps)
        columns = [
            _binary(data, pick(self.key_at), pick(self.key_len)),
            _binary(data, pick(self.value_at), pick(self.value_len)),
            pa.repeat(pa.scalar(topic, pa.string()), n),
            pa.repeat(pa.scalar(partition, pa.int32()), n),
            pa.array(pick(self.offsets), pa.int64()),
            # Kafka timestamps are ms, Spark's TIMESTAMP µs; -1 (no timestamp) is a null.
            pa.array(timestamps * 1000, pa.timestamp("us", tz="UTC"), mask=timestamps < 0),
            pa.array(pick(self.timestamp_types), pa.int32()),
        ]
        if include_headers:
            columns.append(self._headers(data, keep, everything))
        return pa.RecordBatch.from_arrays(columns, schema=arrow_schema(include_headers))

    def _headers(self, data: pa.Buffer, keep: np.ndarray, everything: bool) -> pa.Array:
        counts = self.header_counts if everything else self.header_counts[keep]
        list_offsets = np.zeros(len(counts) + 1, dtype=np.int32)
        np.cumsum(counts, out=list_offsets[1:])
        if everything:
            chosen = slice(None)
        else:  # the headers of kept records, in record order
            owner = np.repeat(np.arange(len(self.header_counts)), self.header_counts)
            chosen = keep[owner]
        keys = _binary(data, self.header_key_at[chosen], self.header_key_len[chosen])
        try:
            keys = keys.cast(pa.string())
        except pa.ArrowInvalid:
            raise CorruptRecordError("record header key is not valid utf-8") from None
        values = _binary(data, self.header_value_at[chosen], self.header_value_len[chosen])
        entries = pa.StructArray.from_arrays([keys, values], fields=list(arrow_schema(True).field("headers").type
                                                                          .value_type))
        return pa.ListArray.from_arrays(pa.array(list_offsets, pa.int32()), entries,
                                        mask=pa.array(counts == 0))


def _binary(data: pa.Buffer, at: np.ndarray, length: np.ndarray) -> pa.Array:
    """binary[i] = data[at[i]:at[i] + length[i]] (null where length is -1), copied contiguous.

    The fields sit in order in `data` with other bytes between them: as a binary array whose
    offsets alternate field start and end, fields are its even elements, and `take` of those
    copies them into a fresh contiguous array in C++."""
    n = len(at)
    if n == 0:
        return pa.array([], pa.binary())
    nulls = length < 0
    spread = np.empty(2 * n, dtype=np.int64 if data.size >= 2 ** 31 else np.int32)
    spread[0::2] = at
    spread[1::2] = at + np.maximum(length, 0)
    kind = pa.large_binary() if spread.dtype == np.int64 else pa.binary()
    fields = pa.Array.from_buffers(kind, 2 * n - 1, [None, pa.py_buffer(spread), data])
    packed = fields.take(pa.array(np.arange(0, 2 * n, 2, dtype=np.int64)))
    if kind != pa.binary():
        packed = packed.cast(pa.binary())
    if not nulls.any():
        return packed
    validity = pa.py_buffer(np.packbits(~nulls, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, *packed.buffers()[1:]], null_count=int(nulls.sum()))


def record_columns(regions: list, headers: list[BatchHeader]) -> RecordColumns:
    """Decode the record regions (decompressed) of the batches with these headers, all at once."""
    data = regions[0] if len(regions) == 1 else b"".join(regions)
    data = bytes(data) if not isinstance(data, bytes) else data
    arr = np.frombuffer(data, dtype=np.uint8)
    runs = _runs(data, regions, headers)
    if runs is not None:
        return _run_columns(data, arr, runs, headers)
    counts = np.array([h.records_count for h in headers], dtype=np.int64)
    n = int(counts.sum())
    starts = record_starts(data, n)
    # Each batch's records must fill exactly its own region.
    region_ends = np.cumsum([len(r) for r in regions])
    batch_first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    if len(regions) > 1 and not np.array_equal(starts[batch_first[1:]], region_ends[:-1]):
        raise CorruptRecordError("a batch's records do not fill its records region")
    batch_of = np.repeat(np.arange(len(headers)), counts)

    def per_batch(values, dtype=np.int64):
        return np.array(values, dtype=dtype)[batch_of]

    record_end = np.append(starts[1:], len(data))
    length, at = _varints(arr, starts)
    if (length < 6).any():
        raise CorruptRecordError("invalid record length")
    at = at + 1  # attributes: unused
    timestamp_delta, at = _varints(arr, at)
    offset_delta, at = _varints(arr, at)
    key_len, key_at = _varints(arr, at)
    at = key_at + np.maximum(key_len, 0)
    value_len, value_at = _varints(arr, at)
    at = value_at + np.maximum(value_len, 0)
    header_counts, at = _varints(arr, at)
    bad = (key_len < -1) | (value_len < -1) | (at > record_end) | (header_counts < 0) \
        | (header_counts > record_end - at)
    if bad.any():
        raise CorruptRecordError("a record's fields overrun it")

    previous = np.append(-1, offset_delta[:-1])
    previous[batch_first] = -1
    if ((offset_delta <= previous) | (offset_delta > per_batch([h.last_offset_delta for h in headers]))).any():
        raise CorruptRecordError("offset delta out of order or beyond the batch's last offset delta")
    offsets = per_batch([h.base_offset for h in headers]) + offset_delta
    append_time = per_batch([h.log_append_time for h in headers], bool)
    timestamps = np.where(append_time, per_batch([h.max_timestamp for h in headers]),
                          per_batch([h.base_timestamp for h in headers]) + timestamp_delta)

    total_headers = int(header_counts.sum())
    h_key_at = np.empty(total_headers, np.int64)
    h_key_len, h_value_at, h_value_len = np.empty_like(h_key_at), np.empty_like(h_key_at), np.empty_like(h_key_at)
    first_header = np.cumsum(header_counts) - header_counts
    rows = np.flatnonzero(header_counts)
    k = 0
    while rows.size:  # the k-th header of every record that has more than k
        slot = first_header[rows] + k
        kl, ka = _varints(arr, at[rows])
        after_key = ka + np.maximum(kl, 0)
        vl, va = _varints(arr, after_key)
        after = va + np.maximum(vl, 0)
        if ((kl < 0) | (vl < -1) | (after > record_end[rows])).any():
            raise CorruptRecordError("null record header key, or a header overruns its record")
        h_key_at[slot], h_key_len[slot], h_value_at[slot], h_value_len[slot] = ka, kl, va, vl
        at[rows] = after
        k += 1
        rows = rows[header_counts[rows] > k]
    if (at != record_end).any():
        raise CorruptRecordError("record length does not match its fields")
    return RecordColumns(data, offsets, timestamps, per_batch([int(h.log_append_time) for h in headers], np.int32),
                         key_at, key_len, value_at, value_len, header_counts, h_key_at, h_key_len, h_value_at,
                         h_value_len)


def _runs(data: bytes, regions: list, headers: list[BatchHeader]) -> list[tuple] | None:
    """(batch number, position, first index, count, shape) of runs that make up every batch's
    records exactly, or None if some batch is not made of runs."""
    runs, pos = [], 0
    for number, (region, header) in enumerate(zip(regions, headers)):
        end, index, count = pos + len(region), 0, header.records_count
        while index < count:
            run = uniform_run_shape(data, pos, index, count, header.last_offset_delta)
            if run is None:
                return None
            runs.append((number, pos, index, *run))
            pos, index = pos + run[0] * run[1].size, index + run[0]
        if pos != end:
            return None
    return runs


def _run_columns(data: bytes, arr: np.ndarray, runs: list[tuple], headers: list[BatchHeader]) -> RecordColumns:
    """The columns of records laid out in runs (`_runs`): each field at a fixed place in its record."""
    n = sum(run[3] for run in runs)
    offsets, timestamps = np.empty(n, np.int64), np.empty(n, np.int64)
    timestamp_types = np.empty(n, np.int32)
    key_at, key_len, value_at, value_len = (np.empty(n, np.int64) for _ in range(4))
    k = 0
    for number, pos, index, count, shape in runs:
        header, rows = headers[number], slice(k, k + count)
        starts = pos + shape.size * np.arange(count, dtype=np.int64)
        offsets[rows] = header.base_offset + index + np.arange(count, dtype=np.int64)
        timestamp_types[rows] = int(header.log_append_time)
        if header.log_append_time:
            timestamps[rows] = header.max_timestamp
        else:
            at, stop = pos + shape.ts_at, pos + count * shape.size
            raw = arr[at:stop:shape.size].astype(np.int64)
            if shape.ts_width == 2:
                raw = (raw & 0x7F) | (arr[at + 1:stop:shape.size].astype(np.int64) << 7)
            timestamps[rows] = header.base_timestamp + ((raw >> 1) ^ -(raw & 1))
        for at, length_bytes, field_at, field_len in ((shape.key_at, shape.key_bytes, key_at, key_len),
                                                      (shape.value_at, shape.value_bytes, value_at, value_len)):
            length, size = decode_varint(length_bytes, 0)
            field_at[rows] = starts + at + size
            field_len[rows] = length
        k += count
    none = np.zeros(0, np.int64)
    return RecordColumns(data, offsets, timestamps, timestamp_types, key_at, key_len, value_at, value_len,
                         np.zeros(n, np.int64), none, none, none, none)
