"""`RemoteLogClient` (the source's LogClient over raftkafka's own client) against the real
3-node cluster of conftest.py; no Spark needed."""
from __future__ import annotations

import pytest

from spark_source.cluster_io import RemoteLogClient, scan
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
    # a fetch past the log end is reported as out of range (the range reader then waits or reports loss)
    beyond = client.fetch(("io-t", 0), 25, max_records=10, max_wait_s=0.1)
    assert beyond.out_of_range and beyond.records == []
    # the pooled consumer recovers: the next fetch reads again
    again = client.fetch(("io-t", 0), 18, max_records=10, max_wait_s=0.5)
    while not again.records:
        again = client.fetch(("io-t", 0), 18, max_records=10, max_wait_s=0.5)
    assert [r.offset for r in again.records] == [18, 19] and again.next_offset == 20
