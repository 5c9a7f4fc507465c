"""RecordBatch v2 records: build/decode behaviour, strict validation."""
from __future__ import annotations

import pytest

from wire.batch_header import validate_batch
from wire.errors import CorruptRecordError
from wire.records import Compression, Record, SimpleRecord, build_batch, decode_batch, iter_records

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
