"""FetchState: fetched batches into buffered ConsumerRecords, and prefetching from the buffer's end."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from raftkafka.client.errors import KafkaError
from raftkafka.client.fetcher import ConsumerRecord, FetchState
from wire.records import Compression, SimpleRecord, build_batch, build_end_txn_marker

TP = ("t", 0)


def _batch(first: int, count: int, compression=Compression.NONE) -> bytes:
    return build_batch([SimpleRecord(b"k%d" % (first + i) if i % 3 else None, b"v%d" % (first + i), (), 1000 + i)
                        for i in range(count)], base_offset=first, compression=compression)


def _answer(request, records: bytes):
    asked = request.topics[0].partitions[0]
    return SimpleNamespace(error_code=0, responses=[SimpleNamespace(topic="t", partitions=[SimpleNamespace(
        partition_index=asked.partition, error_code=0, high_watermark=100, log_start_offset=0, records=records)])])


def _state(position: int, prefetch_below: int = 1) -> FetchState:
    state = FetchState(prefetch_below=prefetch_below)
    state.assign([TP])
    state.seek(TP, position)
    return state


def _fetch(state: FetchState, records: bytes):
    request = state.build_request([TP], max_wait_ms=10, min_bytes=1, max_bytes=1 << 20)
    return request, state.handle_response(request, _answer(request, records))


def test_control_batches_and_records_before_the_position_are_skipped():
    marker = build_end_txn_marker(True, producer_id=1, producer_epoch=0, coordinator_epoch=0, timestamp=5,
                                  base_offset=10)
    state = _state(3)
    _, (count, stale, errors) = _fetch(state, _batch(0, 10) + marker + _batch(11, 10, Compression.ZSTD))
    assert (count, stale, errors) == (17, [], [])
    records = state.take(100)
    assert [r.offset for r in records] == list(range(3, 10)) + list(range(11, 21))
    assert records[0] == ConsumerRecord("t", 0, 3, 1003, 0, None, b"v3", ())
    assert records[1].key == b"k4"
    assert state.partitions[TP].position == 21


def test_a_partition_is_fetched_again_from_the_end_of_its_buffer():
    state = _state(0, prefetch_below=8)
    _fetch(state, _batch(0, 10))
    assert state.fetchable() == []  # 10 buffered: not yet
    assert len(state.take(3)) == 3
    assert state.fetchable() == [TP]  # 7 left
    request, (count, _, _) = _fetch(state, _batch(10, 5))
    assert request.topics[0].partitions[0].fetch_offset == 10
    assert [r.offset for r in state.take(100)] == list(range(3, 15))
    assert state.partitions[TP].position == 15


def test_an_answer_for_an_old_position_is_dropped():
    state = _state(0, prefetch_below=100)
    stale_request = state.build_request([TP], max_wait_ms=10, min_bytes=1, max_bytes=1 << 20)
    _fetch(state, _batch(0, 5))
    assert state.handle_response(stale_request, _answer(stale_request, _batch(0, 5)))[0] == 0
    assert [r.offset for r in state.take(100)] == [0, 1, 2, 3, 4]


def test_a_corrupt_batch_after_good_ones_keeps_the_good_records_whole():
    bad = bytearray(_batch(5, 5))
    bad[-3] ^= 0xFF  # CRC mismatch
    state = _state(0)
    _, (count, _, errors) = _fetch(state, _batch(0, 5) + bytes(bad))
    assert errors == [] and [r.offset for r in state.take(100)] == [0, 1, 2, 3, 4]
    _, (_, _, errors) = _fetch(state, bytes(bad))  # the next fetch starts at it: now an error
    assert len(errors) == 1 and isinstance(errors[0], KafkaError)
    with pytest.raises(IndexError):
        state.take(1)[0]
