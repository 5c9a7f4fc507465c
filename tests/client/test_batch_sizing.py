"""Batches filled by exact record sizes, and sticky partitioning of null-key records."""
import random

from raftkafka.client.accumulator import RecordAccumulator, fixed_size
from raftkafka.client.partitioner import murmur2_partition
from raftkafka.client.producer import Producer
from tests.client.memnet import MemEnv
from tests.client.mini_broker import MiniCluster
from wire.records import Compression


def fill(accumulator, records):
    for record in records:
        key, value, headers, _ = record
        accumulator.append(("t", 0), record, fixed_size(key, value, headers), now=0.0)
    return list(accumulator.drop_all())


def test_a_batch_counts_each_record_as_encoded_and_holds_as_many_as_kafkas():
    # 100-byte values: 64 records of 109 bytes, then 110 (two-byte offset deltas), after the
    # 61-byte header: 148 fit in 16 384 bytes, as in Kafka's producer.
    batches = fill(RecordAccumulator(16384, 1.0), [(None, b"x" * 100, (), 1_000)] * 1000)
    assert [b.count for b in batches[:6]] == [148] * 6
    assert all(len(b.encode(Compression.NONE)) == b.size <= 16384 for b in batches)


def test_sizes_are_exact_for_keys_headers_nulls_and_timestamps():
    rng = random.Random(5)
    records = []
    for i in range(3000):
        key = None if i % 3 == 0 else bytes(rng.randrange(200))
        value = None if i % 7 == 0 else bytes(rng.choice((0, 10, 63, 64, 100, 8200)))
        headers = tuple((f"h{j}" * rng.randrange(40), None if j % 2 else b"v" * j)
                        for j in range(rng.choice((0, 0, 1, 3))))
        records.append((key, value, headers, 10_000 + rng.randrange(-5, 20_000)))
    batches = fill(RecordAccumulator(20000, 1.0), records)
    assert sum(b.count for b in batches) == 3000
    for batch in batches:
        assert len(batch.encode(Compression.NONE)) == batch.size
        assert batch.size <= 20000 or batch.count == 1  # a record larger than a batch goes alone


async def test_null_keys_stick_to_one_partition_until_its_batch_is_full(nursery, autojump_clock):
    env = MemEnv()
    mini = MiniCluster(env, (1,))
    await mini.serve_all(nursery)
    mini.create_topic("t", 4)
    async with Producer(env, "b1:9092", linger_ms=1000, batch_size=1100) as producer:
        futures = [await producer.send("t", b"x" * 100) for _ in range(60)]
        keyed = await producer.send_and_wait("t", b"k", key=b"a")  # keys keep murmur2
        await producer.flush()
    partitions = [f.partition for f in futures]
    runs = [partitions[i:i + 9] for i in range(0, 54, 9)]  # 9 records of 109 bytes to a batch
    assert all(len(set(run)) == 1 for run in runs)
    assert all(a[0] != b[0] for a, b in zip(runs, runs[1:]))  # the next batch goes elsewhere
    assert keyed.partition == murmur2_partition(b"a", 4)
