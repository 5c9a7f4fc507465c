"""The column-wise paths of the Spark source against wire.records (the per-record reference):
decoding Fetch answers into Arrow rows, and encoding sink rows into record sections."""
from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from raftkafka.client.partitioner import murmur2_partition
from spark_source.arrow_batches import decode_fetched
from spark_source.arrow_encode import encode_records
from spark_source.batch_appender import seal_batch
from spark_source.arrow_rows import arrow_schema
from spark_source.sink_rows import SinkRows, murmur2_partitions
from wire.errors import CorruptRecordError
from wire.records import Compression, SimpleRecord, build_batch, build_end_txn_marker, decode_batch, iter_records
from wire.records import seal_batch as records_seal


def _random_records(rng: random.Random, n: int, first_ts: int) -> list[SimpleRecord]:
    def blob(sizes):
        return None if rng.random() < 0.15 else bytes(rng.randrange(256) for _ in range(rng.choice(sizes)))
    return [SimpleRecord(blob([0, 3, 64, 300]), blob([0, 1, 100, 200, 9000]),
                         tuple((f"h{j}-é", None if rng.random() < 0.3 else b"v%d" % j)
                               for j in range(rng.choice([0, 0, 0, 1, 2, 5]))),
                         first_ts + i if rng.random() < 0.9 else None) for i in range(n)]


def _log(seed: int) -> tuple[bytes, int]:
    """Batches of every codec (one with log-append time) in one buffer, as a Fetch answer holds."""
    rng, data, offset = random.Random(seed), b"", 0
    for i, codec in enumerate([0, 1, 2, 3, 4, 0, 2]):
        records = _random_records(rng, rng.randrange(1, 40), 1_000 + offset)
        data += build_batch(records, base_offset=offset, compression=Compression(codec), log_append_time=i == 5)
        offset += len(records)
    return data, offset


def _expected(data: bytes, start: int, end: int) -> list[dict]:
    rows = []
    for record in iter_records(data):
        if start <= record.offset < end:
            rows.append({"key": record.key, "value": record.value, "offset": record.offset,
                         "headers": [{"key": k, "value": v} for k, v in record.headers] or None})
    return rows


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("start_delta,end_delta", [(0, 0), (5, -3)])
def test_decode_matches_wire_records_for_every_codec_headers_and_nulls(seed, start_delta, end_delta):
    data, end = _log(seed)
    start, stop = start_delta, end + end_delta
    batch, next_offset = decode_fetched(data, start, stop, topic="t", partition=3, include_headers=True)
    assert batch.schema == arrow_schema(True)
    got = [{k: row[k] for k in ("key", "value", "offset", "headers")} for row in batch.to_pylist()]
    assert got == _expected(data, start, stop)
    assert set(batch.column("topic").to_pylist()) == {"t"} and set(batch.column("partition").to_pylist()) == {3}
    assert next_offset == stop
    without = decode_fetched(data, start, stop, topic="t", partition=3)[0]
    assert without.schema == arrow_schema(False) and without.column("value") == batch.column("value")


def test_timestamps_types_and_the_missing_timestamp():
    data = (build_batch([SimpleRecord(b"k", b"a", (), 5), SimpleRecord(None, None, (), 7)], base_offset=0)
            + build_batch([SimpleRecord(b"k", b"b", (), 9)], base_offset=2, log_append_time=True, max_timestamp=123)
            + build_batch([SimpleRecord(b"k", b"c")], base_offset=3))  # no timestamp at all: -1
    batch, _ = decode_fetched(data, 0, 10, topic="t", partition=0)
    micros = batch.column("timestamp").cast(pa.int64()).to_pylist()
    assert micros == [5_000, 7_000, 123_000, None]
    assert batch.column("timestampType").to_pylist() == [0, 0, 1, 0]
    assert batch.column("key").to_pylist() == [b"k", None, b"k", b"k"]
    assert batch.column("value").to_pylist() == [b"a", None, b"b", b"c"]


def test_same_size_runs_and_size_changes_decode_alike():
    # long runs of one record size, broken by other sizes (the stride walk's two paths)
    sizes = [100] * 500 + [3] + [100] * 7 + list(range(0, 60)) + [2000] * 300
    records = [SimpleRecord(b"%d" % (i % 10), b"x" * s) for i, s in enumerate(sizes)]
    data = build_batch(records[:700], base_offset=10) + build_batch(records[700:], base_offset=710)
    batch, next_offset = decode_fetched(data, 10, 10 + len(records), topic="t", partition=0)
    assert batch.column("value").to_pylist() == [r.value for r in records]
    assert batch.column("offset").to_pylist() == list(range(10, 10 + len(records)))
    assert next_offset == 10 + len(records)


def test_control_batches_skipped_and_aborted_transactions_only_under_read_committed():
    pid_ok, pid_aborted = 7, 9
    data = (build_batch([SimpleRecord(None, b"plain")], base_offset=0)
            + build_batch([SimpleRecord(None, b"a1"), SimpleRecord(None, b"a2")], base_offset=1, producer_id=pid_aborted,
                          producer_epoch=0, base_sequence=0, transactional=True)
            + build_batch([SimpleRecord(None, b"c1")], base_offset=3, producer_id=pid_ok, producer_epoch=0,
                          base_sequence=0, transactional=True)
            + build_end_txn_marker(False, producer_id=pid_aborted, producer_epoch=0, coordinator_epoch=0,
                                   timestamp=1, base_offset=4)
            + build_end_txn_marker(True, producer_id=pid_ok, producer_epoch=0, coordinator_epoch=0, timestamp=1,
                                   base_offset=5)
            + build_batch([SimpleRecord(None, b"a3")], base_offset=6, producer_id=pid_aborted, producer_epoch=1,
                          base_sequence=0, transactional=True)  # a later transaction of that producer, committed
            + build_end_txn_marker(True, producer_id=pid_aborted, producer_epoch=1, coordinator_epoch=0,
                                   timestamp=1, base_offset=7))
    uncommitted, next_offset = decode_fetched(data, 0, 100, topic="t", partition=0)
    assert uncommitted.column("value").to_pylist() == [b"plain", b"a1", b"a2", b"c1", b"a3"]
    assert next_offset == 8  # past the trailing control batch
    committed, _ = decode_fetched(data, 0, 100, topic="t", partition=0, aborted=[(pid_aborted, 1)])
    assert committed.column("value").to_pylist() == [b"plain", b"c1", b"a3"]
    assert committed.column("offset").to_pylist() == [0, 3, 6]
    only_control, next_offset = decode_fetched(data, 4, 6, topic="t", partition=0)
    assert only_control is None and next_offset == 6


def test_a_partial_trailing_batch_is_left_for_the_next_fetch():
    whole = build_batch([SimpleRecord(None, b"x" * 50)] * 3, base_offset=0)
    second = build_batch([SimpleRecord(None, b"y")], base_offset=3)
    batch, next_offset = decode_fetched(whole + second[:-5], 0, 10, topic="t", partition=0)
    assert batch.num_rows == 3 and next_offset == 3


@pytest.mark.parametrize("damage", ["count", "length", "key_length", "trailing"])
def test_damaged_records_raise_wire_errors(damage):
    records = [SimpleRecord(b"key", b"value%d" % i) for i in range(5)]
    good = build_batch(records)
    payload = bytearray(good[61:])
    if damage == "count":
        bad = build_batch(records + [SimpleRecord(None, b"z")])
        bad = bad[:61] + bytes(payload) + b""  # the header promises 6 records, the payload holds 5
    elif damage == "length":
        payload[0] = 0x7E  # the first record claims 63 bytes
        bad = good[:61] + bytes(payload)
    elif damage == "key_length":
        payload[4] = 0x50  # the first key claims 40 bytes
        bad = good[:61] + bytes(payload)
    else:
        bad = good[:61] + bytes(payload) + b"\x00\x00"
    # re-seal so only the records are wrong (the CRC matches)
    from wire.batch_header import parse_header
    header = parse_header(bad)
    sealed = seal_batch(bytes(bad[61:]), header.records_count, timestamp_ms=header.base_timestamp)
    with pytest.raises(CorruptRecordError):
        decode_fetched(sealed, 0, 100, topic="t", partition=0)


def test_encode_matches_wire_decoding_with_tags_nulls_and_own_headers():
    keys = pa.array([None, b"k", b"", b"k" * 300] + [b"%d" % i for i in range(150)], pa.binary())
    values = pa.array([b"v", None, b"x" * 5000, b""] + [b"x" * 100] * 150, pa.binary())
    n = len(keys)
    for tag in (None, b"sink:3:1:"):
        for codec in (Compression.NONE, Compression.ZSTD):
            numbers = np.arange(n) * 37
            section = encode_records(keys, values, tag_prefix=tag, tag_numbers=numbers if tag else None)
            header, records = decode_batch(seal_batch(section, n, timestamp_ms=1234, producer_id=7,
                                                      producer_epoch=0, base_sequence=5, compression=codec))
            assert [r.key for r in records] == keys.to_pylist()
            assert [r.value for r in records] == values.to_pylist()
            assert {r.timestamp for r in records} == {1234}
            assert (header.producer_id, header.base_sequence, header.compression) == (7, 5, codec)
            expected = [(("raftkafka.sink", tag + b"%d" % i),) if tag else () for i in numbers]
            assert [r.headers for r in records] == expected
    own = encode_records(keys[:3], values[:3], tag_prefix=b"t:", tag_numbers=np.arange(3),
                         headers=[[("a", b"1")], None, [("b", None)]])
    _, records = decode_batch(seal_batch(own, 3, timestamp_ms=5))
    assert [r.headers for r in records] == [(("a", b"1"), ("raftkafka.sink", b"t:0")), (("raftkafka.sink", b"t:1"),),
                                           (("b", None), ("raftkafka.sink", b"t:2"))]


def test_murmur2_partitions_match_the_producer_partitioner():
    rng = random.Random(5)
    keys = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 40))) for _ in range(500)]
    keys += [b"%d" % i for i in range(500)]
    got = murmur2_partitions(pa.array(keys, pa.binary()), 7)
    assert got.tolist() == [murmur2_partition(k, 7) for k in keys]


def test_sink_rows_from_arrow_pick_partitions_like_spark_kafka_sink():
    batch = pa.RecordBatch.from_pydict({
        "topic": pa.array(["a", "b", "a", "a", "b"]),
        "key": pa.array(["k1", None, "k2", None, "k3"]),
        "value": pa.array(["v0", "v1", "v2", "v3", "v4"]),
        "partition": pa.array([None, None, 1, None, 0], pa.int32()),
    })
    rows = SinkRows.from_arrow([batch], topic_option=None, task=2, partition_counts=lambda t: {"a": 3, "b": 4}[t])
    targets = [rows.targets[i] for i in rows.target_of]
    assert targets == [("a", murmur2_partition(b"k1", 3)), ("b", (2 + 1) % 4), ("a", 1), ("a", (2 + 3) % 3), ("b", 0)]
    sections = rows.sections({4}, b"s:0:2:")
    written = {}
    for tp, section, count in sections:
        _, records = decode_batch(seal_batch(section, count, timestamp_ms=1))
        written.setdefault(tp, []).extend((r.value, r.headers[-1][1]) for r in records)
    assert sorted(v for recs in written.values() for v, _ in recs) == [b"v0", b"v1", b"v2", b"v3"]
    assert all(tag == b"s:0:2:%d" % int(v[1:]) for recs in written.values() for v, tag in recs)
    with pytest.raises(ValueError, match="null topic"):
        SinkRows.from_arrow([batch.set_column(0, "topic", pa.array(["a", None, "a", "a", "b"]))], topic_option=None,
                            task=0, partition_counts=lambda t: 3)
    with pytest.raises(ValueError, match="partition 5"):
        SinkRows.from_arrow([batch.set_column(3, "partition", pa.array([5, 0, 0, 0, 0], pa.int32()))],
                            topic_option="a", task=0, partition_counts=lambda t: 3)


def test_sections_split_large_inputs_in_row_order():
    n = 30_000
    rows = SinkRows.from_arrow([pa.RecordBatch.from_pydict({"value": pa.array([b"%06d" % i + b"x" * 90
                                                                               for i in range(n)])})],
                               topic_option="t", task=0, partition_counts=lambda t: 1)
    sections = rows.sections(set(), None, max_bytes=256 * 1024)
    assert len(sections) > 5
    values = []
    for _, section, count in sections:
        values += [r.value for r in decode_batch(seal_batch(section, count, timestamp_ms=1))[1]]
    assert values == [b"%06d" % i + b"x" * 90 for i in range(n)]


def test_rows_taken_in_chunks_go_where_and_carry_the_tags_they_would_taken_whole():
    n = 23
    batch = pa.RecordBatch.from_pydict({
        "key": pa.array([None if i % 3 else b"k%d" % i for i in range(n)], pa.binary()),
        "value": pa.array([b"v%d" % i for i in range(n)], pa.binary()),
    })
    counts = lambda topic: 4  # noqa: E731

    def placed(chunks, skip):
        out = {}
        for chunk in chunks:
            for tp, section, count in chunk.sections(skip, b"s:0:1:"):
                _, records = decode_batch(seal_batch(section, count, timestamp_ms=1))
                out.setdefault(tp, []).extend((r.value, dict(r.headers)["raftkafka.sink"]) for r in records)
        return out

    whole = SinkRows.from_arrow([batch], topic_option="t", task=1, partition_counts=counts)
    chunks = [SinkRows.from_arrow([batch.slice(start, length)], topic_option="t", task=1, partition_counts=counts,
                                  first_row=start) for start, length in ((0, 5), (5, 11), (16, 7))]
    for skip in (set(), {0, 4, 5, 22}):
        assert placed(chunks, skip) == placed([whole], skip)
    assert sum(len(v) for v in placed(chunks, {0, 4, 5, 22}).values()) == n - 4


def test_a_writer_groups_sparks_batches_into_chunks_of_at_least_the_chunk_size_in_order():
    from spark_source.writers import _grouped
    batches = [pa.RecordBatch.from_pydict({"value": pa.array([b"x" * 100] * n, pa.binary())}) for n in (5, 30, 2, 9, 1)]
    groups = list(_grouped(iter(batches), min_bytes=batches[1].nbytes))
    assert [b for group in groups for b in group] == batches
    assert [len(group) for group in groups] == [2, 3]  # the last group holds what is left
    assert all(sum(b.nbytes for b in group) >= batches[1].nbytes for group in groups[:-1])
    assert list(_grouped(iter([]), min_bytes=1)) == []


def _uniform_log(rng: random.Random, batches: int) -> tuple[bytes, int]:
    """Batches of header-less records of one shape each (what producers mostly send: the
    record-runs path), with timestamp deltas of one and two bytes and now and then a record of
    another size, key or timestamp, so some batches are several runs and some none."""
    data, offset = b"", 0
    for i in range(batches):
        n = rng.choice([8, 30, 300, 3000])
        key = rng.choice([None, b"", b"k" * 5])
        size = rng.choice([0, 1, 100])
        step = rng.choice([0, 1, 3])  # ms between records: deltas up to 2 bytes for 3,000 records
        records = [SimpleRecord(key, bytes(rng.randrange(256) for _ in range(size)), (), 10_000 + offset + step * j)
                   for j in range(n)]
        if rng.random() < 0.3:
            odd = rng.randrange(n)
            records[odd] = SimpleRecord(b"other", b"x" * (size + 2), (), records[odd].timestamp + 70_000)
        data += build_batch(records, base_offset=offset, compression=Compression(rng.choice([0, 0, 2, 4])),
                            log_append_time=rng.random() < 0.2)
        offset += n
    return data, offset


def test_records_in_runs_decode_as_the_field_by_field_path_does(monkeypatch):
    from spark_source import arrow_batches
    runs, paths = arrow_batches._runs, []

    def noting_the_path(*args):
        found = runs(*args)
        paths.append(found is not None)
        return found

    for seed in range(12):
        rng = random.Random(seed)
        data, end = _uniform_log(rng, rng.randrange(1, 5))
        start, stop = rng.randrange(0, 10), end - rng.randrange(0, 10)
        monkeypatch.setattr(arrow_batches, "_runs", noting_the_path)
        by_runs = decode_fetched(data, start, stop, topic="t", partition=1, include_headers=True)
        monkeypatch.setattr(arrow_batches, "_runs", lambda *a: None)
        field_by_field = decode_fetched(data, start, stop, topic="t", partition=1, include_headers=True)
        assert by_runs[1] == field_by_field[1], seed
        assert by_runs[0].equals(field_by_field[0]), seed
        assert [(r["key"], r["value"], r["offset"]) for r in by_runs[0].to_pylist()] == \
            [(e["key"], e["value"], e["offset"]) for e in _expected(data, start, stop)], seed
    assert any(paths) and not all(paths)  # the logs took both paths, so both were compared


def test_batches_of_one_shape_take_the_runs_path(monkeypatch):
    from spark_source import arrow_batches
    data = b"".join(build_batch([SimpleRecord(None, b"v%03d" % j, (), 7_000 + j) for j in range(300)],
                                base_offset=300 * i, compression=Compression(2 * i)) for i in range(3))
    taken = []
    runs = arrow_batches._runs
    monkeypatch.setattr(arrow_batches, "_runs", lambda *a: taken.append(runs(*a)) or taken[-1])
    batch, next_offset = decode_fetched(data, 0, 900, topic="t", partition=0)
    assert taken[0] is not None and len(taken[0]) == 6  # two per batch: deltas take a second byte from 64
    assert batch.column("value").to_pylist() == [b"v%03d" % j for j in range(300)] * 3
    assert batch.column("offset").to_pylist() == list(range(900)) and next_offset == 900


def test_a_damaged_record_in_a_run_is_refused():
    records = [SimpleRecord(None, b"v" * 100, (), 5_000 + i) for i in range(50)]
    good = build_batch(records, base_offset=0)
    payload = bytearray(good[61:])
    stride = len(payload) // 50
    payload[20 * stride] ^= 0x40  # record 20's length varint
    bad = seal_batch(bytes(payload), 50, timestamp_ms=5_000)
    with pytest.raises(CorruptRecordError):
        decode_fetched(bad, 0, 50, topic="t", partition=0)
    trailing = seal_batch(good[61:] + b"\x00\x00", 50, timestamp_ms=5_000)  # bytes after the last record
    with pytest.raises(CorruptRecordError):
        decode_fetched(trailing, 0, 50, topic="t", partition=0)
    short = records_seal(good[61:], 50, last_offset_delta=40, base_timestamp=5_000, max_timestamp=5_049)
    with pytest.raises(CorruptRecordError):  # 50 records, but the header says deltas end at 40
        decode_fetched(short, 0, 50, topic="t", partition=0)
