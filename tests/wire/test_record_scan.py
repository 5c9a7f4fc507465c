"""wire.record_scan: every record of a producer's batch checked in one pass, no record objects built."""
import random

import pytest

from tests.wire.raw_batches import batch_around, raw_record
from wire.batch_header import HEADER_SIZE, parse_header
from wire.compression import Compression
from wire.errors import CorruptRecordError
from wire.record_runs import uniform_run, varied_run
from wire.record_scan import _scan_one_by_one, scan_records
from wire.records import SimpleRecord, build_batch, decode_records


def scan(raw: bytes):
    header = parse_header(raw)
    return scan_records(header, memoryview(raw)[HEADER_SIZE:])


def refused(raw: bytes) -> str:
    with pytest.raises(CorruptRecordError) as info:
        scan(raw)
    return str(info.value)


def records(n: int, **kw):
    return b"".join(raw_record(offset_delta=i, **kw) for i in range(n))


@pytest.mark.parametrize("value_size,count", [(0, 3), (60, 70), (200, 300), (20_000, 3), (1, 9000)])
def test_valid_batches_of_every_varint_width_pass_and_agree_with_the_decoder(value_size, count):
    recs = [SimpleRecord(None if i % 3 == 0 else b"key-%d" % i, b"v" * value_size, timestamp=5_000 + (i * 37) % 9000 - 4000,
                         headers=(("h", b"x"),) if i % 7 == 0 else ()) for i in range(count)]
    raw = build_batch(recs)
    result = scan(raw)
    decoded = decode_records(parse_header(raw), memoryview(raw)[HEADER_SIZE:])
    assert result.min_timestamp == min(r.timestamp for r in decoded)
    assert result.max_timestamp == max(r.timestamp for r in decoded)
    assert result.keyless == sum(1 for r in decoded if r.key is None)


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_compressed_batches_are_scanned_after_decompression(codec):
    raw = build_batch([SimpleRecord(b"k%d" % i, b"value" * 20, timestamp=100 + i) for i in range(50)], compression=codec)
    assert scan(raw).max_timestamp == 149
    garbage = batch_around(b"\x00" * 40, count=3, attributes=int(codec))
    assert refused(garbage)


def test_a_neighbour_made_by_hand_passes():
    assert scan(batch_around(records(3), count=3)).keyless == 0


def test_declared_count_above_the_records_is_refused():
    assert "impossible" in refused(batch_around(records(3), count=4))  # 3 records cannot hold 4
    assert "truncated" in refused(batch_around(records(3, value=b"v" * 30), count=4))


def test_bytes_after_the_last_record_are_refused():
    assert "trail" in refused(batch_around(records(3), count=2, last_offset_delta=2))


def test_offset_deltas_must_run_0_to_n_minus_1():
    gap = raw_record(offset_delta=0) + raw_record(offset_delta=2)
    assert "offset delta 2, expected 1" in refused(batch_around(gap, count=2))
    assert "offset delta" in refused(batch_around(raw_record(offset_delta=1), count=1))
    late = b"".join(raw_record(offset_delta=i) for i in range(100)) + raw_record(offset_delta=99)
    assert "offset delta 99, expected 100" in refused(batch_around(late, count=101))


def test_record_length_must_match_its_fields():
    assert refused(batch_around(raw_record(length_adjust=1) + raw_record(offset_delta=1), count=2))
    assert refused(batch_around(raw_record(length_adjust=-1) + raw_record(offset_delta=1), count=2))
    assert refused(batch_around(raw_record(length_adjust=-3), count=1))
    assert refused(batch_around(raw_record(length_adjust=500), count=1))


def test_invalid_key_and_value_lengths_are_refused():
    valid = raw_record()
    bad_key = bytearray(valid)
    bad_key[4] = 3  # key length -2
    assert refused(batch_around(bytes(bad_key), count=1))
    bad_value = bytearray(valid)
    bad_value[6] = 5  # value length -3
    assert refused(batch_around(bytes(bad_value), count=1))
    overrun = bytearray(valid)
    overrun[4] = 40  # key of 20 bytes in a 9-byte record
    assert refused(batch_around(bytes(overrun), count=1))


def test_headers_are_checked():
    assert scan(batch_around(raw_record(headers=[(b"h", None), (b"i", b"x")]), count=1))
    assert "header count" in refused(batch_around(raw_record(header_count=-1), count=1))
    assert "header key" in refused(batch_around(raw_record(headers=[(None, b"x")]), count=1))
    assert "UTF-8" in refused(batch_around(raw_record(headers=[(b"\xff\xfe", b"x")]), count=1))
    assert refused(batch_around(raw_record(header_count=3, headers=[(b"h", b"x")]), count=1))


def test_overlong_varints_are_refused():
    six_bytes = b"\x80\x80\x80\x80\x80\x00"
    assert "longer than 5 bytes" in refused(batch_around(raw_record(offset_delta_bytes=six_bytes), count=1))
    assert scan(batch_around(raw_record(offset_delta_bytes=b"\x80\x00"), count=1))  # long but within 5 bytes


def test_a_timestamp_beyond_int64_is_refused():
    assert "int64" in refused(batch_around(raw_record(ts_delta=(1 << 62)), count=1, base_timestamp=(1 << 62)))


def test_log_append_time_batches_report_the_header_timestamp():
    raw = batch_around(records(2), count=2, attributes=0x08, max_timestamp=777)
    assert scan(raw)[:2] == (777, 777)


def test_random_damage_is_refused_or_decodes():
    """The scan is at least as strict as the decoder: whatever it passes, decode_records reads."""
    rng = random.Random(16)
    base = bytearray(build_batch([SimpleRecord(b"k%d" % i if i % 2 else None, b"v" * rng.randrange(300),
                                               headers=(("h", b"1"),) if i % 5 == 0 else (), timestamp=50 + i)
                                  for i in range(40)]))
    passed = 0
    for _ in range(3000):
        raw = bytearray(base)
        for _ in range(rng.randrange(1, 4)):
            raw[rng.randrange(HEADER_SIZE, len(raw))] = rng.randrange(256)
        header = parse_header(raw)
        try:
            result = scan_records(header, memoryview(raw)[HEADER_SIZE:])
        except CorruptRecordError:
            continue
        passed += 1
        decoded = decode_records(header, memoryview(raw)[HEADER_SIZE:])
        assert [r.offset for r in decoded] == list(range(40))
        assert result.max_timestamp == max(r.timestamp for r in decoded)
    assert 0 < passed < 3000


def _one_by_one(raw: bytes):
    """The reference: every record read field by field (no runs)."""
    header = parse_header(raw)
    data = bytes(memoryview(raw)[HEADER_SIZE:])
    try:
        pos, low, high, keyless = _scan_one_by_one(data, 0, 0, header.records_count, len(data))
    except CorruptRecordError:
        return None
    return None if pos != len(data) else (header.base_timestamp + low, header.base_timestamp + high, keyless)


def _scanned(raw: bytes):
    try:
        return tuple(scan(raw))
    except CorruptRecordError:
        return None


def _random_damage_gets_the_one_by_one_verdict(base: bytearray, rng: random.Random, tries: int, *,
                                               most_bytes: int = 1) -> None:
    """Damage up to `most_bytes` random bytes of a copy of `base`, `tries` times: each time the scan
    gives the field-by-field reader's verdict, and some damage is refused."""
    refused_count = 0
    for _ in range(tries):
        raw = bytearray(base)
        for _ in range(rng.randrange(1, most_bytes + 1) if most_bytes > 1 else 1):
            raw[rng.randrange(HEADER_SIZE, len(raw))] = rng.randrange(256)
        verdict = _scanned(bytes(raw))
        assert verdict == _one_by_one(bytes(raw))
        refused_count += verdict is None
    assert refused_count > 0


@pytest.mark.parametrize("count", [9, 70, 150, 300, 8300])
def test_runs_of_same_shaped_records_are_judged_exactly_as_one_by_one(count):
    """Same-shaped records are checked a column at a time (wire.record_runs); damage anywhere in a
    run, at any varint width of the offset delta, gets the verdict the field-by-field reader gives."""
    rng = random.Random(count)
    base = bytearray(build_batch([SimpleRecord(None if count % 2 else b"key", b"v" * 20, timestamp=10 + i % 50)
                                  for i in range(count)]))
    assert _scanned(bytes(base)) == _one_by_one(bytes(base)) != None
    data = bytes(base[HEADER_SIZE:])
    assert uniform_run(data, 0, 0, count)[0] == min(count, 64)  # the fast path is what is tested here
    _random_damage_gets_the_one_by_one_verdict(base, rng, 150 if count > 1000 else 400)


def test_runs_broken_by_other_shapes_are_read_correctly():
    shapes = [SimpleRecord(None, b"v" * 20, timestamp=1000)] * 20 + [SimpleRecord(b"k", b"w", timestamp=900)] \
        + [SimpleRecord(None, b"v" * 20, timestamp=1200 + i) for i in range(100)] \
        + [SimpleRecord(b"h", b"x", headers=(("a", b"b"),), timestamp=5000)] * 12
    raw = build_batch(shapes)
    assert _scanned(raw) == _one_by_one(raw) == (900, 5000, 120)


@pytest.mark.parametrize("count,key", [(40, None), (300, b"key-1"), (9000, None)])
def test_runs_of_records_differing_only_in_value_length_are_judged_exactly_as_one_by_one(count, key):
    """Values of 0-200 bytes: record and value length varints of one or two bytes, no fixed
    stride (wire.record_runs.varied_run); random damage gets the field-by-field reader's verdict."""
    rng = random.Random(count)
    base = bytearray(build_batch([SimpleRecord(key, b"v" * rng.randrange(0, 200), timestamp=10 + i % 40)
                                  for i in range(count)]))
    data = bytes(base[HEADER_SIZE:])
    assert uniform_run(data, 0, 0, count) is None and varied_run(data, 0, 0, count)[0] == min(count, 64)
    assert _scanned(bytes(base)) == _one_by_one(bytes(base)) != None
    _random_damage_gets_the_one_by_one_verdict(base, rng, 100 if count > 1000 else 500, most_bytes=2)


@pytest.mark.parametrize("count,headers", [
    (70, (("raftkafka.sink", b"s1:0:3:"),)),  # the Spark sink's tag, its row number added below
    (300, (("trace-id", b"0123456789abcdef"), ("empty", b""), ("null", None))),
    (150, (("ключ", b"v"),)),  # a UTF-8 key of two-byte characters
])
def test_runs_of_records_with_headers_are_judged_exactly_as_one_by_one(count, headers):
    """Records whose headers repeat their keys and value lengths are checked a column at a time;
    random damage (in a header key too: it must stay UTF-8) gets the field-by-field verdict."""
    rng = random.Random(count)
    tagged = headers[0][0] == "raftkafka.sink"
    base = bytearray(build_batch([
        SimpleRecord(b"k", b"v" * 40, timestamp=10 + i % 30,
                     headers=((headers[0][0], headers[0][1] + b"%05d" % i),) if tagged else headers)
        for i in range(count)]))
    data = bytes(base[HEADER_SIZE:])
    assert uniform_run(data, 0, 0, count)[0] == min(count, 64)  # the fast path is what is tested here
    assert _scanned(bytes(base)) == _one_by_one(bytes(base)) != None
    _random_damage_gets_the_one_by_one_verdict(base, rng, 400)


def test_a_header_key_that_is_not_utf8_is_refused_inside_a_run():
    recs = [SimpleRecord(None, b"v", headers=(("hk", b"x"),)) for _ in range(40)]
    raw = bytearray(build_batch(recs))
    at = raw.index(b"hk", HEADER_SIZE + 30 * 10)  # a record well inside the run
    raw[at] = 0xFF
    assert _one_by_one(bytes(raw)) is None
    assert "UTF-8" in refused(bytes(raw))


def test_readers_that_slice_columns_take_no_runs_with_headers():
    from wire.record_runs import uniform_run_shape

    data = build_batch([SimpleRecord(None, b"v", headers=(("h", b"x"),)) for _ in range(40)])[HEADER_SIZE:]
    assert uniform_run(data, 0, 0, 40)[0] == 40
    assert uniform_run_shape(data, 0, 0, 40, 39) is None
