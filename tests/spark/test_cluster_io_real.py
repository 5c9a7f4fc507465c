"""`RemoteLogClient` (the source's LogClient over raftkafka's own client) against the real
3-node cluster of conftest.py; no Spark needed."""
from __future__ import annotations

import pytest

from spark_source.cluster_io import RemoteLogClient, appending, scan
from wire.records import SimpleRecord

pytestmark = pytest.mark.e2e


@pytest.fixture
def client(cluster):
    c = RemoteLogClient(cluster.bootstrap_servers, request_timeout_ms=15_000)
    yield c
    c.close()


def test_topics_offsets_ranged_fetch_and_idempotent_writes(client):
    client.ensure_topic("io-t", 2, {"retention.ms": "-1"})
    client.ensure_topic("io-t", 2)  # exists: nothing to do
    assert client.partitions(["io-t", "io-missing"]) == {"io-t": [0, 1]}
    assert client.partitions(None)["io-t"] == [0, 1]
    rows = [(("io-t", i % 2), SimpleRecord(b"k%d" % i, b"v%d" % i, (("h", b"%d" % i),), 1_000 + i)) for i in range(40)]
    client.produce(rows)
    assert client.list_offsets([("io-t", 0), ("io-t", 1)], -1) == {("io-t", 0): 20, ("io-t", 1): 20}
    assert client.list_offsets([("io-t", 0)], -2) == {("io-t", 0): 0}
    assert client.list_offsets([("io-t", 1)], 1_021) == {("io-t", 1): 10}  # row 21 (2 * 10 + 1)
    got = list(scan(client, ("io-t", 0), 5, 15))
    assert [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in got] == [
        (j, b"k%d" % (2 * j), b"v%d" % (2 * j), (("h", b"%d" % (2 * j)),), 1_000 + 2 * j) for j in range(5, 15)]
    # a range fetched ahead (the next range of a packed task) answers as a fetch of it would
    plain = client.fetch_raw(("io-t", 1), 3, max_wait_s=0.5)
    client.prefetch_raw(("io-t", 1), 3, max_wait_s=0.5)
    assert client.fetch_raw(("io-t", 1), 3, max_wait_s=0.5).records == plain.records and plain.records
    client.prefetch_raw(("io-t", 1), 7, max_wait_s=0.5)  # a hint not taken up is dropped at the next fetch
    assert client.fetch_raw(("io-t", 1), 3, max_wait_s=0.5).records == plain.records
    # a fetch past the log end is reported as out of range (the range reader then waits or reports loss)
    beyond = client.fetch(("io-t", 0), 25, max_records=10, max_wait_s=0.1)
    assert beyond.out_of_range and beyond.records == []
    # the pooled consumer recovers: the next fetch reads again
    again = client.fetch(("io-t", 0), 18, max_records=10, max_wait_s=0.5)
    while not again.records:
        again = client.fetch(("io-t", 0), 18, max_records=10, max_wait_s=0.5)
    assert [r.offset for r in again.records] == [18, 19] and again.next_offset == 20


def test_sections_appended_idempotently_read_back_as_arrow_rows(cluster):
    """The sink's write path and the source's read path over the real cluster: lz4 batches
    with headers and null keys, split into several sections per partition."""
    import numpy as np
    import pyarrow as pa

    from spark_source.client_properties import ClientTuning
    from spark_source.planning import OffsetRange
    from spark_source.range_reader import read_range
    from spark_source.sink_rows import SinkRows

    writer = RemoteLogClient(cluster.bootstrap_servers, request_timeout_ms=15_000,
                             tuning=ClientTuning(producer=(("compression", "lz4"),)))
    try:
        writer.ensure_topic("io-sections", 2)
        n = 3_000
        keys = pa.array([None if i % 7 == 0 else b"k%d" % i for i in range(n)], pa.binary())
        batch = pa.RecordBatch.from_pydict({"key": keys, "value": pa.array([b"v%d" % i * 20 for i in range(n)])})
        rows = SinkRows.from_arrow([batch], topic_option="io-sections", task=0, partition_counts=lambda t: 2)
        sections = rows.sections(set(), b"io:0:0:", max_bytes=64 * 1024)
        assert len(sections) > 2
        writer.produce_sections(sections, 1_700_000_000_000)
        # the second copy given a few sections at a time while the first ones are in flight
        with appending(writer, 1_700_000_000_001) as streamed:
            later = rows.sections(set(), b"io:1:0:", max_bytes=64 * 1024)
            for start in range(0, len(later), 3):
                streamed.add(later[start:start + 3])
    finally:
        writer.close()
    reader = RemoteLogClient(cluster.bootstrap_servers, request_timeout_ms=15_000)
    try:
        ends = reader.list_offsets([("io-sections", 0), ("io-sections", 1)], -1)
        assert sum(ends.values()) == 2 * n
        got = []
        for (topic, partition), end in sorted(ends.items()):
            for b in read_range(reader, OffsetRange(topic, partition, 0, end), include_headers=True):
                got += b.to_pylist()
    finally:
        reader.close()
    second = sorted(int(row["headers"][0]["value"][len(b"io:1:0:"):]) for row in got
                    if row["headers"][0]["value"].startswith(b"io:1:0:"))
    assert second == list(range(n))
    first = [row for row in got if row["headers"][0]["value"].startswith(b"io:0:0:")]
    by_index = {int(row["headers"][0]["value"][len(b"io:0:0:"):]): row for row in first}
    assert sorted(by_index) == list(range(n))
    target = np.asarray(rows.target_of)
    for i, row in by_index.items():
        assert (row["key"], row["value"]) == (keys[i].as_py(), b"v%d" % i * 20)
        assert row["partition"] == rows.targets[target[i]][1]
        assert row["timestamp"].timestamp() == 1_700_000_000
    for partition in (0, 1):  # row order is kept within each partition
        offsets = [i for i, row in sorted(by_index.items()) if row["partition"] == partition]
        assert [by_index[i]["offset"] for i in offsets] == sorted(by_index[i]["offset"] for i in offsets)


def test_read_committed_leaves_out_aborted_transactions(cluster):
    """librdkafka's transactional producer commits one transaction and aborts another; the range
    reader returns the committed and plain records only under kafka.isolation.level=read_committed."""
    confluent_kafka = pytest.importorskip("confluent_kafka")

    from spark_source.client_properties import ClientTuning
    from spark_source.planning import OffsetRange
    from spark_source.range_reader import read_range

    setup = RemoteLogClient(cluster.bootstrap_servers, request_timeout_ms=15_000)
    setup.ensure_topic("io-txn", 1)
    setup.produce([(("io-txn", 0), SimpleRecord(None, b"plain"))])
    producer = confluent_kafka.Producer({"bootstrap.servers": cluster.bootstrap_servers,
                                         "transactional.id": "io-txn-writer"})
    producer.init_transactions(30)
    for values, commit in (([b"c1", b"c2"], True), ([b"a1", b"a2"], False), ([b"c3"], True)):
        producer.begin_transaction()
        for value in values:
            producer.produce("io-txn", value, partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    setup.close()

    def read(isolation: str) -> list[bytes]:
        client = RemoteLogClient(cluster.bootstrap_servers, request_timeout_ms=15_000,
                                 tuning=ClientTuning(consumer=(("isolation_level", isolation),)))
        try:
            end = client.list_offsets([("io-txn", 0)], -1)[("io-txn", 0)]
            return [v for b in read_range(client, OffsetRange("io-txn", 0, 0, end))
                    for v in b.column("value").to_pylist()]
        finally:
            client.close()

    assert read("read_committed") == [b"plain", b"c1", b"c2", b"c3"]
    assert read("read_uncommitted") == [b"plain", b"c1", b"c2", b"a1", b"a2", b"c3"]
