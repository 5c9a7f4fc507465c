"""Interop with the record codecs of real Kafka clients (kafka-python, aiokafka).

Batches they build decode identically with ours, for every codec; batches we
build are read back correctly by their readers.
"""
from __future__ import annotations

import aiokafka.record.default_records as aiokafka_records
import kafka.record.default_records as kafka_python_records
import pytest

from wire.records import Compression, Record, SimpleRecord, build_batch, decode_batch

BUILDERS = {
    "kafka-python": kafka_python_records.DefaultRecordBatchBuilder,
    "aiokafka": aiokafka_records.DefaultRecordBatchBuilder,
    "aiokafka-py": aiokafka_records._DefaultRecordBatchBuilderPy,
}
READERS = {
    "kafka-python": kafka_python_records.DefaultRecordBatch,
    "aiokafka": aiokafka_records.DefaultRecordBatch,
    "aiokafka-py": aiokafka_records._DefaultRecordBatchPy,
}

# Compressible values, so the clients really compress (they send uncompressed
# when compression does not shrink the batch).
SAMPLES = [
    (b"user-%d" % i if i % 5 else None,
     None if i % 7 == 3 else b"event payload %d " % i * 8,
     [("trace-id", b"%08x" % i), ("null", None)] if i % 3 == 0 else [],
     1_700_000_000_000 + i * 13)
    for i in range(60)
]


def expected_records(base_offset: int) -> list[Record]:
    return [
        Record(base_offset + i, ts, key, value, tuple(headers))
        for i, (key, value, headers, ts) in enumerate(SAMPLES)
    ]


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("client", sorted(BUILDERS))
def test_client_built_batches_decode_identically(client, codec):
    builder = BUILDERS[client](
        magic=2, compression_type=int(codec), is_transactional=False,
        producer_id=4242, producer_epoch=3, base_sequence=17, batch_size=1 << 20,
    )
    for i, (key, value, headers, ts) in enumerate(SAMPLES):
        assert builder.append(i, timestamp=ts, key=key, value=value, headers=headers) is not None
    batch = bytes(builder.build())

    header, records = decode_batch(batch)

    assert header.compression == codec
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (4242, 3, 17)
    assert header.records_count == len(SAMPLES) and header.last_offset_delta == len(SAMPLES) - 1
    assert header.max_timestamp == SAMPLES[-1][3]
    assert records == expected_records(0)


@pytest.mark.parametrize("codec", list(Compression))
@pytest.mark.parametrize("client", sorted(READERS))
def test_our_batches_read_by_client_readers(client, codec):
    ours = [SimpleRecord(key, value, tuple(headers), ts) for key, value, headers, ts in SAMPLES]
    batch = build_batch(
        ours, base_offset=1000, compression=codec, producer_id=9, producer_epoch=1, base_sequence=0,
        partition_leader_epoch=5,
    )
    reader = READERS[client](batch)

    assert reader.validate_crc()
    assert reader.compression_type == codec
    assert (reader.producer_id, reader.producer_epoch, reader.base_sequence) == (9, 1, 0)
    got = [
        Record(r.offset, r.timestamp, r.key, r.value, tuple(tuple(h) for h in r.headers))
        for r in reader
    ]
    assert got == expected_records(1000)


@pytest.mark.parametrize("client", sorted(READERS))
def test_control_batch_flagged_for_client_readers(client):
    from wire.records import build_end_txn_marker

    batch = build_end_txn_marker(False, producer_id=7, producer_epoch=2, coordinator_epoch=11, timestamp=5)
    reader = READERS[client](batch)
    assert reader.is_control_batch and reader.is_transactional
