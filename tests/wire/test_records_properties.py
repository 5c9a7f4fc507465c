"""Property tests: round trips for random records, and fuzzing of the decoder."""
from __future__ import annotations

import os
import struct

import kafka.record.default_records as kafka_python_records
from crc32c import crc32c
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from wire.batch_header import HEADER_SIZE
from wire.errors import DecodeError
from wire.records import Compression, Record, SimpleRecord, build_batch, decode_batch, iter_records

# RAFTKAFKA_FUZZ_EXAMPLES=5000 runs a deep fuzz; the default keeps the suite fast.
SETTINGS = settings(
    max_examples=int(os.environ.get("RAFTKAFKA_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)

blobs = st.none() | st.binary(max_size=300)
headers = st.lists(st.tuples(st.text(max_size=20), blobs), max_size=4).map(tuple)
timestamps = st.none() | st.integers(min_value=0, max_value=1 << 45)
simple_records = st.builds(SimpleRecord, blobs, blobs, headers, timestamps)
codecs = st.sampled_from(list(Compression))


@st.composite
def batches(draw):
    records = draw(st.lists(simple_records, min_size=1, max_size=20))
    codec = draw(codecs)
    base_offset = draw(st.integers(min_value=0, max_value=1 << 60))
    gaps = draw(st.lists(st.integers(min_value=1, max_value=1000), min_size=len(records), max_size=len(records)))
    offset_deltas = [sum(gaps[:i + 1]) - gaps[0] for i in range(len(records))]
    return records, codec, base_offset, offset_deltas


@SETTINGS
@given(batches())
def test_build_decode_round_trip(case):
    records, codec, base_offset, offset_deltas = case
    batch = build_batch(records, base_offset=base_offset, compression=codec, offset_deltas=offset_deltas)
    header, decoded = decode_batch(batch)

    base_timestamp = next((r.timestamp for r in records if r.timestamp is not None), -1)
    expected = [
        Record(base_offset + delta, base_timestamp if r.timestamp is None else r.timestamp, r.key, r.value, r.headers)
        for r, delta in zip(records, offset_deltas)
    ]
    assert decoded == expected
    assert header.compression == codec and header.records_count == len(records)
    assert header.last_offset == base_offset + offset_deltas[-1]
    assert header.max_timestamp == max(r.timestamp for r in expected)
    assert list(iter_records(batch + batch[: len(batch) // 2])) == expected

    # An independent reader (kafka-python) sees the same records.
    theirs = [
        Record(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers))
        for r in kafka_python_records.DefaultRecordBatch(batch)
    ]
    assert theirs == expected


def _decode_or_decode_error(buf):
    try:
        decode_batch(buf)
    except DecodeError:
        pass
    try:
        list(iter_records(buf))
    except DecodeError:
        pass


mutations = st.lists(
    st.tuples(st.sampled_from(["flip", "truncate", "insert", "delete"]), st.integers(0, 1 << 16), st.integers(0, 255)),
    min_size=1,
    max_size=4,
)


def _mutate(data: bytes, ops, start: int = 0) -> bytes:
    buf = bytearray(data)
    for op, where, byte in ops:
        span = len(buf) - start
        if span <= 0:
            break
        i = start + where % span
        if op == "flip":
            buf[i] ^= byte or 1
        elif op == "truncate":
            del buf[i:]
        elif op == "insert":
            buf.insert(i, byte)
        else:
            del buf[i]
    return bytes(buf)


def _fix_crc(buf: bytes) -> bytes:
    """Re-seal a mutated batch so the record decoder, not the CRC, meets the damage."""
    if len(buf) < HEADER_SIZE:
        return buf
    buf = bytearray(buf)
    struct.pack_into(">i", buf, 8, len(buf) - 12)
    struct.pack_into(">I", buf, 17, crc32c(bytes(buf[21:])))
    return bytes(buf)


@SETTINGS
@given(batches(), mutations)
def test_mutated_batches_raise_only_decode_errors(case, ops):
    records, codec, base_offset, offset_deltas = case
    batch = build_batch(records, base_offset=base_offset, compression=codec, offset_deltas=offset_deltas)
    _decode_or_decode_error(_mutate(batch, ops))


@SETTINGS
@given(batches(), mutations)
def test_mutated_records_with_valid_crc_raise_only_decode_errors(case, ops):
    records, codec, base_offset, offset_deltas = case
    batch = build_batch(records, base_offset=base_offset, compression=codec, offset_deltas=offset_deltas)
    _decode_or_decode_error(_fix_crc(_mutate(batch, ops, start=21)))


@SETTINGS
@given(st.binary(max_size=400), st.integers(-1, 50), codecs)
def test_random_records_region_raises_only_decode_errors(payload, count, codec):
    after_crc = struct.pack(">hiqqqhii", codec, max(count - 1, 0), 0, 0, -1, -1, -1, count) + payload
    batch = struct.pack(">qiib", 0, 49 + len(payload), -1, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc
    _decode_or_decode_error(batch)
