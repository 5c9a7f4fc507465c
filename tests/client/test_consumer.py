import pytest
import trio

from raftkafka.client.consumer import Consumer
from raftkafka.client.errors import BrokerResponseError, KafkaError
from raftkafka.client.producer import Producer
from tests.client.memnet import MemEnv
from tests.client.mini_broker import MiniCluster
from tests.wire.raw_batches import batch_around
from wire.error_codes import ErrorCode
from wire.protocol import ApiKey


async def start(nursery, nodes=(1,), **kw):
    env = MemEnv()
    mini = MiniCluster(env, nodes, **kw)
    await mini.serve_all(nursery)
    return env, mini


async def produce(env, topic, values, partition=None, **kw):
    async with Producer(env, "b1:9092", **kw) as producer:
        for v in values:
            await producer.send(topic, v, partition=partition)


async def drain(consumer, n, timeout=10.0):
    out = []
    with trio.fail_after(timeout):
        while len(out) < n:
            out += await consumer.poll(0.5)
    return out


async def test_assign_earliest_reads_everything_in_order(nursery, autojump_clock):
    env, mini = await start(nursery, nodes=(1, 2))
    mini.create_topic("t", 2)
    await produce(env, "t", [b"a%d" % i for i in range(10)], partition=0)
    await produce(env, "t", [b"b%d" % i for i in range(5)], partition=1)
    async with Consumer(env, "b1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0), ("t", 1)])
        records = await drain(consumer, 15)
    by_part = {p: [r.value for r in records if r.partition == p] for p in (0, 1)}
    assert by_part == {0: [b"a%d" % i for i in range(10)], 1: [b"b%d" % i for i in range(5)]}
    assert [r.offset for r in records if r.partition == 0] == list(range(10))


async def test_latest_only_sees_new_records_and_long_poll_wakes(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    await produce(env, "t", [b"old"])
    async with Consumer(env, "b1:9092", fetch_max_wait_ms=5000) as consumer:
        consumer.assign([("t", 0)])
        assert await consumer.position(("t", 0)) == 1
        async with trio.open_nursery() as n:
            async def later():
                await trio.sleep(1.0)
                await produce(env, "t", [b"new"])
            n.start_soon(later)
            started = trio.current_time()
            records = await consumer.poll(10.0)
        assert [r.value for r in records] == [b"new"]
        assert trio.current_time() - started < 5.0  # woken by the append, not the max wait


async def test_seek_and_max_records(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    await produce(env, "t", [b"%d" % i for i in range(20)], linger_ms=100)
    async with Consumer(env, "b1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        first = await consumer.poll(1.0, max_records=3)
        assert [r.offset for r in first] == [0, 1, 2]
        consumer.seek(("t", 0), 15)
        rest = await drain(consumer, 5)
        assert [r.offset for r in rest] == [15, 16, 17, 18, 19]
        consumer.seek_to_beginning()
        assert (await consumer.poll(1.0, max_records=1))[0].offset == 0
        consumer.seek_to_end(("t", 0))
        assert await consumer.position(("t", 0)) == 20
        assert await consumer.beginning_offsets([("t", 0)]) == {("t", 0): 0}
        assert await consumer.end_offsets([("t", 0)]) == {("t", 0): 20}


async def test_offsets_for_times(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092", linger_ms=0) as producer:
        for i in range(5):
            await producer.send_and_wait("t", b"x", timestamp_ms=1000 * (i + 1))
    async with Consumer(env, "b1:9092") as consumer:
        found = await consumer.offsets_for_times({("t", 0): 2500, ("t", 0): 2500})
        assert found == {("t", 0): (2, -1)}  # the first record at or after 2500 ms


async def test_follows_leader_change(nursery, autojump_clock):
    env, mini = await start(nursery, nodes=(1, 2))
    mini.create_topic("t", 1, leaders=[1])
    await produce(env, "t", [b"a", b"b"])
    async with Consumer(env, "b1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        assert len(await drain(consumer, 2)) == 2
        mini.move_leader("t", 0, 2)
        await produce(env, "t", [b"c"])
        records = await drain(consumer, 1)
    assert [r.value for r in records] == [b"c"]
    assert any(node == 2 and key == ApiKey.FETCH for node, key, _ in mini.requests)


async def test_offset_out_of_range_resets(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    await produce(env, "t", [b"a", b"b"])
    async with Consumer(env, "b1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 99)
        records = await drain(consumer, 2)
    assert [r.offset for r in records] == [0, 1]


async def test_reset_none_raises(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Consumer(env, "b1:9092", group_id="g", auto_offset_reset="none") as consumer:
        consumer.assign([("t", 0)])
        with pytest.raises(BrokerResponseError) as info:
            await consumer.poll(0.1)
        assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


async def test_commit_and_committed_in_assign_mode(nursery, autojump_clock):
    env, mini = await start(nursery, nodes=(1, 2))
    mini.create_topic("t", 1)
    await produce(env, "t", [b"%d" % i for i in range(6)])
    async with Consumer(env, "b1:9092", group_id="g", auto_offset_reset="earliest",
                        enable_auto_commit=False) as consumer:
        consumer.assign([("t", 0)])
        await consumer.poll(1.0, max_records=4)
        await consumer.commit()
        assert await consumer.committed([("t", 0)]) == {("t", 0): 4}
    async with Consumer(env, "b1:9092", group_id="g") as consumer:
        consumer.assign([("t", 0)])
        records = await drain(consumer, 2)
    assert [r.offset for r in records] == [4, 5]


async def test_errors_for_misuse(nursery, autojump_clock):
    env, mini = await start(nursery)
    with pytest.raises(ValueError):
        Consumer(env, "b1:9092", auto_offset_reset="sometimes")
    async with Consumer(env, "b1:9092") as consumer:
        with pytest.raises(KafkaError):
            consumer.subscribe(["t"])
        with pytest.raises(KafkaError):
            await consumer.commit()
        with pytest.raises(KafkaError):
            consumer.seek(("t", 0), 1)


async def test_fatal_fetch_error_surfaces_as_kafka_error(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    mini.fail_next(ApiKey.FETCH, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    async with Consumer(env, "b1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        with pytest.raises(BrokerResponseError) as info:
            await consumer.poll(1.0)
        assert info.value.code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
        await produce(env, "t", [b"a"])
        assert [r.value for r in await drain(consumer, 1)] == [b"a"]


async def test_corrupt_fetch_data_is_a_typed_error(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    await produce(env, "t", [b"abc"])
    base, nxt, ts, data = mini.topics["t"][0].batches[0]
    broken = bytearray(data)
    broken[-1] ^= 0xFF  # breaks the CRC
    mini.topics["t"][0].batches[0] = (base, nxt, ts, bytes(broken))
    async with Consumer(env, "b1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        with pytest.raises(KafkaError) as info:
            await consumer.poll(1.0)
        assert info.value.code == ErrorCode.CORRUPT_MESSAGE


async def test_records_before_an_undecodable_batch_are_handed_out_then_it_raises(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    await produce(env, "t", [b"a"])
    await produce(env, "t", [b"b"])
    await produce(env, "t", [b"c"])
    base, nxt, ts, data = mini.topics["t"][0].batches[1]
    garbage = batch_around(b"\x07" * 12, count=1, base_timestamp=ts)  # valid CRC, records that do not decode
    mini.topics["t"][0].batches[1] = (base, nxt, ts, bytes(data[:8]) + garbage[8:])
    async with Consumer(env, "b1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        assert [r.value for r in await drain(consumer, 1)] == [b"a"]
        with trio.fail_after(5), pytest.raises(KafkaError) as info:
            while True:  # never a silent stall at the bad batch
                assert await consumer.poll(0.5) == []
        assert info.value.code == ErrorCode.CORRUPT_MESSAGE and "offset 1" in str(info.value)


async def test_partitions_taken_away_before_the_fetch_is_sent(nursery, autojump_clock):
    # A rebalance can change the assignment between the round that picks a fetch's
    # partitions and the moment it is sent (its task connects first, or the send waits
    # for the connection): the request reflects the round's view and the answer for
    # partitions no longer assigned is dropped.
    env, mini = await start(nursery)
    mini.create_topic("t", 2)
    await produce(env, "t", [b"x"], partition=0)
    async with Consumer(env, "b1:9092", auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0), ("t", 1)])
        consumer.seek_to_beginning()
        send_fetch = consumer._send_fetch

        async def rebalance_then_send(*args):
            consumer.assign([("t", 1)])  # ("t", 0) is gone before the Fetch goes out
            await send_fetch(*args)

        consumer._send_fetch = rebalance_then_send
        assert await consumer.poll(0.5) == []
        consumer._send_fetch = send_fetch
        consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 0)
        assert [r.value for r in await drain(consumer, 1)] == [b"x"]


async def test_a_fetch_that_cannot_be_sent_ends_the_poll_with_its_error_at_once(nursery, autojump_clock):
    # The round sends its Fetches itself; one refused on the spot (here: the broker lost Fetch
    # from its ApiVersions) must end the round like any Fetch outcome, not after fetch_max_wait.
    from raftkafka.client.errors import UnsupportedVersionError
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Consumer(env, "b1:9092", auto_offset_reset="earliest", fetch_max_wait_ms=500) as consumer:
        consumer.assign([("t", 0)])
        assert await consumer.poll(0.1) == []  # positions resolved, the connection is open
        connection = consumer.cluster.ready_connection(1)
        await trio.sleep(1.0)  # the long-poll Fetch in flight came back
        del connection.broker_versions[ApiKey.FETCH]
        start_time = trio.current_time()
        with pytest.raises(UnsupportedVersionError):
            await consumer.poll(5.0)
        assert trio.current_time() - start_time < 0.1
        assert consumer._in_flight == {}


async def test_a_consumer_cancelled_while_it_opens_leaves_trio_consistent(autojump_clock):
    # A caller's deadline that passes inside `async with Consumer(...)`'s entry: the consumer's
    # own nursery is left in the entering task, so the caller's cancel scope exits cleanly
    # (it used to corrupt trio's cancel-scope stack: simulation seed 1, 10 s).
    env = MemEnv()
    with trio.CancelScope() as scope:
        scope.cancel()
        async with Consumer(env, "b1:9092"):
            pytest.fail("the entry should have been cancelled")
    assert scope.cancelled_caught
    await trio.sleep(1)  # the run goes on
