"""RecordBatch v2 records: build/decode behaviour, strict validation."""
from __future__ import annotations

import struct

import pytest
from crc32c import crc32c

from wire.batch_header import validate_batch
from wire.errors import CorruptRecordError
from wire.records import (
    Compression,
    ControlRecord,
    ControlType,
    Record,
    SimpleRecord,
    build_batch,
    build_control_batch,
    build_end_txn_marker,
    decode_batch,
    iter_records,
    parse_control_record,
    parse_end_txn_marker,
)
from wire.varint import encode_varint, encode_varlong

RECORDS = [
    SimpleRecord(b"key-0", b"value-0", (("trace", b"abc"), ("empty", None)), timestamp=1_700_000_000_000),
    SimpleRecord(None, b"no key", timestamp=1_700_000_000_005),
    SimpleRecord(b"tombstone", None, timestamp=1_699_999_999_990),
    SimpleRecord(b"", b"", (("ключ", b""),)),  # no timestamp: takes the base timestamp
]


@pytest.mark.parametrize("codec", list(Compression))
def test_round_trip_every_codec(codec):
    batch = build_batch(RECORDS, base_offset=42, compression=codec, partition_leader_epoch=7)
    header, records = decode_batch(batch)
    assert header.compression == codec
    assert header.records_count == 4 and header.last_offset_delta == 3
    assert header.base_timestamp == 1_700_000_000_000  # the first record's, like Kafka
    assert header.max_timestamp == 1_700_000_000_005
    assert header.partition_leader_epoch == 7
    assert records == [
        Record(42, 1_700_000_000_000, b"key-0", b"value-0", (("trace", b"abc"), ("empty", None))),
        Record(43, 1_700_000_000_005, None, b"no key", ()),
        Record(44, 1_699_999_999_990, b"tombstone", None, ()),
        Record(45, 1_700_000_000_000, b"", b"", (("ключ", b""),)),
    ]


def test_iter_records_spans_batches_and_ignores_partial_tail():
    first = build_batch(RECORDS[:2], base_offset=0)
    second = build_batch(RECORDS[2:], base_offset=2, compression=Compression.ZSTD)
    buf = first + second + first[:40]
    assert [r.offset for r in iter_records(buf)] == [0, 1, 2, 3]


def test_crc_mismatch_is_corrupt():
    batch = bytearray(build_batch(RECORDS))
    batch[-1] ^= 0x01
    with pytest.raises(CorruptRecordError):
        decode_batch(batch)


# --------------------------------------------------------------------------- #
# Batch-level options
# --------------------------------------------------------------------------- #


def test_producer_fields_and_flags():
    batch = build_batch(
        RECORDS[:2], producer_id=77, producer_epoch=4, base_sequence=100, transactional=True,
    )
    header = validate_batch(batch)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (77, 4, 100)
    assert header.is_transactional and not header.is_control and not header.log_append_time
    assert header.last_sequence == 101


def test_compaction_keeps_offset_gaps_and_last_offset():
    batch = build_batch(RECORDS[:3], base_offset=100, offset_deltas=[0, 4, 9], last_offset_delta=12)
    header, records = decode_batch(batch)
    assert [r.offset for r in records] == [100, 104, 109]
    assert header.last_offset == 112 and header.next_offset == 113 and header.records_count == 3


def test_empty_batch_after_compaction():
    batch = build_batch([], base_offset=50, last_offset_delta=5, base_timestamp=10, producer_id=3)
    header, records = decode_batch(batch)
    assert records == [] and header.records_count == 0 and header.next_offset == 56


def test_delete_horizon_becomes_base_timestamp_and_keeps_record_times():
    batch = build_batch(RECORDS[:2], delete_horizon_ms=1_800_000_000_000)
    header, records = decode_batch(batch)
    assert header.attributes & 0x40 and header.base_timestamp == 1_800_000_000_000
    assert [r.timestamp for r in records] == [1_700_000_000_000, 1_700_000_000_005]


def test_log_append_time_gives_every_record_the_max_timestamp():
    batch = build_batch(RECORDS, log_append_time=True, max_timestamp=1_750_000_000_000)
    header, records = decode_batch(batch)
    assert header.log_append_time
    assert {r.timestamp for r in records} == {1_750_000_000_000}


def test_no_timestamps_at_all_means_no_timestamp():
    header, records = decode_batch(build_batch([SimpleRecord(b"k", b"v")]))
    assert header.base_timestamp == -1 and records[0].timestamp == -1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"offset_deltas": [0, 0]},
        {"offset_deltas": [1, 0]},
        {"offset_deltas": [-1, 2]},
        {"offset_deltas": [0]},
        {"offset_deltas": [0, 3], "last_offset_delta": 2},
    ],
)
def test_build_rejects_inconsistent_offsets(kwargs):
    with pytest.raises(ValueError):
        build_batch(RECORDS[:2], **kwargs)


def test_build_rejects_empty_batch_without_last_offset_delta():
    with pytest.raises(ValueError):
        build_batch([])


# --------------------------------------------------------------------------- #
# Control records
# --------------------------------------------------------------------------- #


@pytest.mark.parametrize("commit", [True, False])
def test_end_txn_marker_round_trip(commit):
    batch = build_end_txn_marker(
        commit, producer_id=12, producer_epoch=3, coordinator_epoch=27, timestamp=999, base_offset=80
    )
    header, [record] = decode_batch(batch)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch) == (12, 3)
    control = parse_control_record(record)
    assert control.type == (ControlType.COMMIT if commit else ControlType.ABORT)
    assert control.version == 0 and record.offset == 80 and record.timestamp == 999
    assert parse_end_txn_marker(control) == 27


def test_kraft_control_batch_is_not_transactional():
    batch = build_control_batch(ControlType.LEADER_CHANGE, b"\x00\x00leader", timestamp=5, partition_leader_epoch=9)
    header, [record] = decode_batch(batch)
    assert header.is_control and not header.is_transactional and header.partition_leader_epoch == 9
    assert parse_control_record(record) == ControlRecord(0, ControlType.LEADER_CHANGE, b"\x00\x00leader")


def test_unknown_control_type_is_reported_not_rejected():
    _, [record] = decode_batch(build_control_batch(42, None, timestamp=1, version=1))
    assert parse_control_record(record) == ControlRecord(1, 42, None)


@pytest.mark.parametrize("key", [None, b"", b"\x00\x00\x00", b"\xff\xff\x00\x01"])
def test_bad_control_keys(key):
    with pytest.raises(CorruptRecordError):
        parse_control_record(Record(0, 0, key, None, ()))


@pytest.mark.parametrize("value", [None, b"\x00\x00\x00\x00\x00", b"\xff\xff\x00\x00\x00\x01"])
def test_bad_txn_marker_values(value):
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(ControlRecord(0, ControlType.COMMIT, value))


def test_txn_marker_parse_refuses_other_control_types():
    with pytest.raises(CorruptRecordError):
        parse_end_txn_marker(ControlRecord(0, ControlType.LEADER_CHANGE, b"\x00\x00\x00\x00\x00\x01"))


# --------------------------------------------------------------------------- #
# Strict decoding of malformed records inside a batch whose CRC is valid
# --------------------------------------------------------------------------- #


def wrap(payload: bytes, count: int, last_offset_delta: int | None = None, codec: int = 0) -> bytes:
    """A batch header with a correct CRC around an arbitrary records region."""
    if last_offset_delta is None:
        last_offset_delta = max(count - 1, 0)
    after_crc = struct.pack(">hiqqqhii", codec, last_offset_delta, 0, 0, -1, -1, -1, count) + payload
    return struct.pack(">qiib", 0, 49 + len(payload), -1, 2) + struct.pack(">I", crc32c(after_crc)) + after_crc


def record(body: bytes, length: int | None = None) -> bytes:
    return encode_varint(len(body) if length is None else length) + body


def fields(offset_delta=0, key=b"k", value=b"v", headers=b"\x00", ts_delta=0) -> bytes:
    def blob(data):
        return encode_varint(-1) if data is None else encode_varint(len(data)) + data

    return b"\x00" + encode_varlong(ts_delta) + encode_varint(offset_delta) + blob(key) + blob(value) + headers


def test_wrap_helper_builds_what_we_build():
    payload = record(fields(0, b"k", b"v"))
    assert decode_batch(wrap(payload, 1))[1] == [Record(0, 0, b"k", b"v", ())]


MALFORMED = {
    "record overruns the batch": (record(fields(), length=40), 1),
    "record longer than its fields": (record(fields() + b"\x00"), 1),
    "record shorter than its fields": (record(fields(), length=len(fields()) - 1) + b"\x00", 1),
    "negative record length": (record(fields(), length=-3), 1),
    "bytes after the last record": (record(fields()) + b"\x00", 1),
    "count larger than records": (record(fields(0, key=b"k" * 30)) + record(fields(1, key=b"k" * 30)), 3),
    "count smaller than records": (record(fields(0)) + record(fields(1)), 1),
    "offset deltas out of order": (record(fields(1)) + record(fields(0)), 2),
    "duplicate offset delta": (record(fields(0)) + record(fields(0)), 2),
    "offset delta beyond lastOffsetDelta": (record(fields(5)), 1),
    "key length below -1": (record(b"\x00\x00\x00" + encode_varint(-2) + b"\x01\x00"), 1),
    "value overruns record": (record(b"\x00\x00\x00\x01" + encode_varint(50) + b"\x00"), 1),
    "null header key": (record(fields(headers=b"\x02" + encode_varint(-1) + b"\x01")), 1),
    "negative header count": (record(fields(headers=encode_varint(-1))), 1),
    "header count too large": (record(fields(headers=encode_varint(1000))), 1),
    "header key not utf-8": (record(fields(headers=b"\x02\x04\xff\xfe\x01")), 1),
    "varint longer than 10 bytes": (record(b"\x00" + b"\xff" * 11 + b"\x00" * 6), 1),
    "varint beyond 64 bits": (record(b"\x00" + b"\xff" * 9 + b"\x02" + b"\x00" * 6), 1),
    "truncated varint": (record(fields(key=b"k" * 30)) + b"\xff\xff", 2),
    "impossible record count": (b"\x00" * 20, 1_000_000),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_records_raise_corrupt_record_error(case):
    payload, count = MALFORMED[case]
    with pytest.raises(CorruptRecordError):
        decode_batch(wrap(payload, count))


def test_corrupt_compressed_payload():
    with pytest.raises(CorruptRecordError):
        decode_batch(wrap(b"definitely not zstd", 1, codec=4))


def test_unknown_codec_is_corrupt():
    with pytest.raises(CorruptRecordError):
        decode_batch(wrap(record(fields()), 1, codec=6))


def test_decompression_bomb_is_refused():
    bomb = build_batch([SimpleRecord(None, bytes(1_000_000))], compression=Compression.ZSTD)
    assert len(bomb) < 1000
    with pytest.raises(CorruptRecordError, match="beyond"):
        decode_batch(bomb, max_uncompressed=100_000)
    assert len(decode_batch(bomb)[1][0].value) == 1_000_000


def test_decode_at_position_inside_larger_buffer():
    batch = build_batch(RECORDS[:1], base_offset=3)
    buf = memoryview(b"junk" + batch + b"more")
    assert decode_batch(buf, 4)[1][0].offset == 3


def test_compression_level_changes_bytes_not_records():
    records = [SimpleRecord(b"k%d" % i, b"some compressible text %d " % i * 20) for i in range(50)]
    fast = build_batch(records, compression=Compression.LZ4, compression_level=1)
    small = build_batch(records, compression=Compression.LZ4, compression_level=9)
    assert fast != small
    assert decode_batch(fast)[1] == decode_batch(small)[1]


@pytest.mark.parametrize("codec", [Compression.NONE, Compression.ZSTD])
def test_empty_batch_without_payload_decodes_for_any_codec(codec):
    assert decode_batch(wrap(b"", 0, last_offset_delta=4, codec=codec))[1] == []
    with pytest.raises(CorruptRecordError):
        decode_batch(wrap(b"", 1, codec=codec))
