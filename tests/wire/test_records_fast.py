"""wire.records_fast: the one-pass encoder and the columnar decoder.

Batches built by kafka-python's builder (an independent codec) decode into the
same records through `decode_columns` (runs of same-shaped records sliced as
columns, the rest one by one), for every codec; batches built by our encoder
read back the same through kafka-python's reader. Damaged bytes inside runs
are judged exactly as the one-by-one reader judges them.
"""
from __future__ import annotations

import random

import kafka.record.default_records as kafka_python_records
import pytest

from wire.batch_header import HEADER_SIZE, set_max_timestamp, validate_batch
from wire.errors import CorruptRecordError
from wire.records import Compression, Record, SimpleRecord, build_batch, decode_batch
from wire.records_fast import RecordColumns, _one_by_one, decode_columns, encode_records

T0 = 1_700_000_000_000


def _shapes() -> dict[str, list[tuple]]:
    """(key, value, headers, timestamp) lists that exercise runs, breaks in runs and odd records."""
    rng = random.Random(7)
    return {
        "uniform 100 B, no key": [(None, b"v%05d" % i + b"x" * 94, [], T0) for i in range(300)],
        "uniform keyed": [(b"k%03d" % i, b"value-%04d" % i, [], T0 + i) for i in range(150)],
        "null values (tombstones)": [(b"k%03d" % i, None, [], T0) for i in range(40)],
        "two-byte timestamp deltas": [(None, b"x" * 20, [], T0 + 100 * i) for i in range(120)],
        "negative timestamp deltas": [(None, b"x" * 20, [], T0 - i) for i in range(40)],
        "varied value lengths": [(None, b"y" * rng.randrange(0, 300), [], T0) for i in range(200)],
        "runs broken by headers and keys": [
            (b"key" if i % 37 == 0 else None, b"z" * 50,
             [("h", b"1"), ("empty", None)] if i % 23 == 0 else [], T0 + (i // 10))
            for i in range(400)],
        "3-byte offset deltas": [(None, b"q" * 8, [], T0) for i in range(9000)],
        "empty values and keys": [(b"", b"", [], T0) for _ in range(30)],
        "a single record": [(None, b"alone", [("a", b"b")], T0)],
    }


SHAPES = _shapes()


def _kafka_python_batch(records, codec: Compression, *, base_offset: int = 0) -> bytes:
    builder = kafka_python_records.DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=False,
        producer_id=-1, producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    for i, (key, value, headers, ts) in enumerate(records):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    batch = bytearray(builder.build())
    batch[0:8] = base_offset.to_bytes(8, "big")  # outside the CRC
    return bytes(batch)


def _expected(records, base_offset: int = 0) -> list[Record]:
    return [Record(base_offset + i, ts, key, value, tuple(headers))
            for i, (key, value, headers, ts) in enumerate(records)]


def _columns_as_records(columns: RecordColumns) -> list[Record]:
    assert len({len(c) for c in columns}) == 1
    return list(map(Record, *columns))


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_batches_of_another_codec_decode_into_the_same_records(shape, codec):
    records = SHAPES[shape]
    batch = _kafka_python_batch(records, codec, base_offset=1000)
    header = validate_batch(batch, 0)
    columns = decode_columns(header, memoryview(batch)[HEADER_SIZE:header.size])
    assert _columns_as_records(columns) == _expected(records, 1000)


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_our_batches_read_back_through_another_codec(shape, codec):
    records = SHAPES[shape]
    batch = build_batch([SimpleRecord(k, v, tuple(h), ts) for k, v, h, ts in records], compression=codec)
    reader = kafka_python_records.DefaultRecordBatch(batch)
    assert reader.compression_type == int(codec)
    got = [(r.key, r.value, [tuple(h) for h in r.headers], r.timestamp, r.offset) for r in reader]
    assert got == [(k, v, list(h), ts, i) for i, (k, v, h, ts) in enumerate(records)]
    assert decode_batch(batch)[1] == _expected(records)  # and through our own reader


def test_encode_records_is_the_records_section_of_build_batch():
    records = SHAPES["runs broken by headers and keys"]
    section = encode_records([(k, v, tuple(h), ts) for k, v, h, ts in records], T0)
    batch = build_batch([SimpleRecord(k, v, tuple(h), ts) for k, v, h, ts in records])
    assert batch[HEADER_SIZE:] == section


def test_min_offset_keeps_only_the_records_from_it():
    records = SHAPES["uniform 100 B, no key"]
    batch = _kafka_python_batch(records, Compression.NONE, base_offset=50)
    header = validate_batch(batch, 0)
    for min_offset in (0, 50, 51, 200, 349, 350, 10_000):
        columns = decode_columns(header, batch[HEADER_SIZE:], min_offset=min_offset)
        assert _columns_as_records(columns) == [r for r in _expected(records, 50) if r.offset >= min_offset]


def test_log_append_time_gives_every_record_the_batch_time():
    records = SHAPES["two-byte timestamp deltas"]
    batch = bytearray(_kafka_python_batch(records, Compression.NONE))
    set_max_timestamp(batch, 0, validate_batch(batch, 0), 42_000)
    header = validate_batch(batch, 0)
    columns = decode_columns(header, bytes(batch[HEADER_SIZE:]))
    assert columns.timestamps == [42_000] * len(records)
    assert columns.values == [v for _, v, _, _ in records]


def _one_at_a_time(header, data: bytes) -> list[Record]:
    """The reference: every record read one by one (no runs)."""
    columns = RecordColumns([], [], [], [], [])
    pos, _ = _one_by_one(columns, header, data, 0, header.records_count, -1, len(data))
    if pos != len(data):
        raise CorruptRecordError("trailing bytes")
    return _columns_as_records(columns)


@pytest.mark.parametrize("shape", ["uniform 100 B, no key", "uniform keyed", "two-byte timestamp deltas",
                                   "runs broken by headers and keys"])
def test_damaged_bytes_inside_runs_are_judged_as_one_by_one(shape):
    records = SHAPES[shape][:80]
    batch = build_batch([SimpleRecord(k, v, tuple(h), ts) for k, v, h, ts in records])
    header = validate_batch(batch, 0)
    section = batch[HEADER_SIZE:]
    rng = random.Random(shape)
    for _ in range(400):
        damaged = bytearray(section)
        at = rng.randrange(len(damaged))
        damaged[at] = rng.choice([0x00, 0x01, 0x02, 0x7F, 0x80, 0xFF, damaged[at] ^ 0x02])
        try:
            expected = _one_at_a_time(header, bytes(damaged))
        except CorruptRecordError:
            with pytest.raises(CorruptRecordError):
                decode_columns(header, bytes(damaged))
        else:
            assert _columns_as_records(decode_columns(header, bytes(damaged))) == expected


def test_a_run_past_the_last_offset_delta_is_refused():
    """80 records of one shape whose header says the offset deltas end at 40: the columnar
    reader refuses the batch, as the one-by-one reader does."""
    from wire.records import seal_batch

    records = [SimpleRecord(None, b"v" * 100, (), T0) for _ in range(80)]
    section = build_batch(records)[HEADER_SIZE:]
    batch = seal_batch(section, 80, last_offset_delta=40, base_timestamp=T0, max_timestamp=T0)
    header = validate_batch(batch, 0)
    with pytest.raises(CorruptRecordError):
        _one_at_a_time(header, bytes(batch[HEADER_SIZE:]))
    with pytest.raises(CorruptRecordError):
        decode_columns(header, bytes(batch[HEADER_SIZE:]))
