import pytest
import trio

from raftkafka.client.errors import BrokerResponseError, KafkaError
from raftkafka.client.partitioner import murmur2_partition
from raftkafka.client.producer import Producer
from tests.client.memnet import MemEnv
from tests.client.mini_broker import MiniCluster
from wire.error_codes import ErrorCode
from wire.protocol import ApiKey


async def start(nursery, nodes=(1,), **kw):
    env = MemEnv()
    mini = MiniCluster(env, nodes, **kw)
    await mini.serve_all(nursery)
    return env, mini


def produce_requests(mini):
    return [r for r in mini.requests if r[1] == ApiKey.PRODUCE]


async def test_send_returns_partition_and_offsets_in_order(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092") as producer:
        futures = [await producer.send("t", b"v%d" % i) for i in range(5)]
        results = [await f for f in futures]
    assert [(r.partition, r.offset) for r in results] == [(0, i) for i in range(5)]
    assert [r.value for r in mini.records("t", 0)] == [b"v%d" % i for i in range(5)]


async def test_keys_land_on_murmur2_partitions(nursery, autojump_clock):
    env, mini = await start(nursery, nodes=(1, 2))
    mini.create_topic("t", 6)
    keys = [b"key-%d" % i for i in range(40)]
    async with Producer(env, "b1:9092") as producer:
        results = [await producer.send_and_wait("t", b"x", key=k) for k in keys]
    for key, result in zip(keys, results):
        assert result.partition == murmur2_partition(key, 6)
        assert any(r.key == key for r in mini.records("t", result.partition))


async def test_linger_batches_records_into_one_request(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092", linger_ms=50) as producer:
        futures = [await producer.send("t", b"v%d" % i) for i in range(20)]
        await futures[-1]
    assert len(produce_requests(mini)) == 1
    assert len(mini.topics["t"][0].batches) == 1


async def test_a_full_batch_cuts_the_linger_short_and_a_lingering_one_waits_it_out(nursery, autojump_clock):
    # The sender sleeps towards the first batch's linger deadline; a batch that fills up
    # meanwhile (another partition) must wake it at once, and the lingering batch still
    # goes out at its own deadline, not before.
    env, mini = await start(nursery)
    mini.create_topic("t", 2)
    async with Producer(env, "b1:9092", linger_ms=1000, batch_size=300) as producer:
        start_time = trio.current_time()
        lingering = await producer.send("t", b"slow", partition=0)
        await trio.sleep(0.1)
        full = [await producer.send("t", b"x" * 50, partition=1) for _ in range(6)]
        await full[0]
        assert trio.current_time() - start_time < 0.2
        assert not lingering.done()
        await lingering
        assert trio.current_time() - start_time == pytest.approx(1.0, abs=0.01)
        await producer.flush()
    assert len(mini.records("t", 1)) == 6


async def test_batch_size_splits_batches(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092", linger_ms=1000, batch_size=500) as producer:
        for i in range(30):
            await producer.send("t", b"x" * 50)
        await producer.flush()
    batches = mini.topics["t"][0].batches
    assert len(batches) > 3
    assert all(len(data) <= 500 + 100 for _, _, _, data in batches)
    assert len(mini.records("t", 0)) == 30


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_compression_roundtrips(nursery, autojump_clock, codec):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092", compression=codec) as producer:
        for i in range(10):
            await producer.send("t", b"value-%d" % i, key=b"k", headers={"h": "v"})
    records = mini.records("t", 0)
    assert [r.value for r in records] == [b"value-%d" % i for i in range(10)]
    assert records[0].headers == (("h", b"v"),)
    assert mini.topics["t"][0].batches[0][3][22] & 7 == ["none", "gzip", "snappy", "lz4", "zstd"].index(codec)


async def test_not_leader_refreshes_metadata_and_retries_on_new_leader(nursery, autojump_clock):
    env, mini = await start(nursery, nodes=(1, 2))
    mini.create_topic("t", 1, leaders=[1])
    async with Producer(env, "b1:9092") as producer:
        assert (await producer.send_and_wait("t", b"a")).offset == 0
        mini.move_leader("t", 0, 2)
        result = await producer.send_and_wait("t", b"b")
    assert result.offset == 1
    nodes = [node for node, key, _ in produce_requests(mini)]
    assert nodes == [1, 1, 2]


async def test_retriable_error_is_retried_and_idempotence_dedupes(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    mini.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, 2)
    async with Producer(env, "b1:9092") as producer:
        result = await producer.send_and_wait("t", b"a")
        assert producer.producer_id > 0
    assert result.offset == 0
    assert len(produce_requests(mini)) == 3
    assert len(mini.records("t", 0)) == 1


async def test_resent_batch_is_not_duplicated(nursery, autojump_clock):
    # The broker appended but the answer was lost: the retry carries the same sequence.
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092") as producer:
        await producer.send_and_wait("t", b"first")
        future = await producer.send("t", b"second")
        await producer.flush()
        batch_bytes = mini.topics["t"][0].batches[-1][3]
        log = mini.topics["t"][0]
        from wire.batch_header import parse_header
        header = parse_header(batch_bytes)
        err, base = mini._append(log, batch_bytes)
    assert (err, base) == (ErrorCode.DUPLICATE_SEQUENCE_NUMBER, 1)
    assert header.base_sequence == 1 and (await future).offset == 1
    assert len(mini.records("t", 0)) == 2


async def test_non_retriable_error_fails_the_record(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    mini.fail_next(ApiKey.PRODUCE, ErrorCode.INVALID_TOPIC_EXCEPTION)
    async with Producer(env, "b1:9092") as producer:
        future = await producer.send("t", b"a")
        with pytest.raises(BrokerResponseError) as info:
            await future
        assert info.value.code == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert (await producer.send_and_wait("t", b"b")).offset == 0


async def test_delivery_timeout_fails_records_when_broker_is_gone(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    mini.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, 10_000)
    async with Producer(env, "b1:9092", delivery_timeout_ms=2_000, retry_backoff_ms=50) as producer:
        future = await producer.send("t", b"a")
        with pytest.raises(KafkaError) as info:
            await future
    assert info.value.retriable  # NOT_LEADER_OR_FOLLOWER or the delivery timeout, both retriable kinds
    assert trio.current_time() >= 2.0


async def test_acks_zero_gets_no_offsets(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092", acks=0) as producer:
        result = await producer.send_and_wait("t", b"a")
    assert result.offset == -1
    await trio.testing.wait_all_tasks_blocked()
    assert len(mini.records("t", 0)) == 1


async def test_unknown_topic_send_raises(nursery, autojump_clock):
    env, mini = await start(nursery)
    async with Producer(env, "b1:9092", max_block_ms=500) as producer:
        with pytest.raises(BrokerResponseError):
            await producer.send("missing", b"a")
        with pytest.raises(ValueError):
            Producer(env, "b1:9092", acks=1, enable_idempotence=True)


async def test_a_one_partition_topic_takes_every_record_and_refuses_other_partitions(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092", partitioner="random") as producer:
        futures = [await producer.send("t", b"v", key=key) for key in (None, b"k1", b"k2")]
        with pytest.raises(KafkaError) as refused:
            await producer.send("t", b"v", partition=1)
        assert refused.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        results = [await f for f in futures]
    assert [(r.partition, r.offset) for r in results] == [(0, 0), (0, 1), (0, 2)]


async def test_connection_loss_is_retried(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092", enable_idempotence=False) as producer:
        await producer.send_and_wait("t", b"a")
        await env.net.reset("b1", 9092)
        assert (await producer.send_and_wait("t", b"b")).offset == 1
    assert env.net.connects >= 2


async def test_send_waits_for_buffer_space(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    async with Producer(env, "b1:9092", buffer_memory=2000, linger_ms=100, batch_size=100_000) as producer:
        futures = [await producer.send("t", b"x" * 400) for _ in range(12)]
        # 12 x ~420 bytes do not fit in 2000: later sends waited until earlier batches were answered.
        assert futures[0].done()
        assert producer.accumulator.buffered_bytes <= 2000
        await producer.flush()
        assert all(f.done() for f in futures)
    assert len(mini.records("t", 0)) == 12
    assert len(mini.topics["t"][0].batches) >= 3


async def test_explicit_idempotence_needs_init_producer_id(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    original = mini.on_api_versions

    async def without_init_producer_id(node, req, v):
        response = await original(node, req, v)
        response.api_keys = [k for k in response.api_keys if k.api_key != ApiKey.INIT_PRODUCER_ID]
        return response

    mini.on_api_versions = without_init_producer_id
    async with Producer(env, "b1:9092") as producer:  # default: falls back quietly
        assert (await producer.send_and_wait("t", b"a")).offset == 0
        assert not producer.idempotent
    async with Producer(env, "b1:9092", enable_idempotence=True) as producer:
        future = await producer.send("t", b"b")
        with pytest.raises(KafkaError) as info:
            await future
        assert info.value.code == ErrorCode.UNSUPPORTED_VERSION


@pytest.mark.parametrize("retry_waiting", [True, False], ids=["retry-queued", "answer-in-flight"])
async def test_a_batch_sent_under_an_abandoned_producer_id_is_failed_not_resent(
        nursery, autojump_clock, retry_waiting):
    # t-1's batch is written but its answer says REQUEST_TIMED_OUT (the answer was "lost"), while
    # t-0's batch fails for good, which makes the producer give up its producer id. Resending t-1's
    # batch under a new id would write it twice: the broker cannot tell it is a duplicate.
    env, mini = await start(nursery, nodes=(1, 2))
    mini.create_topic("t", 2, leaders=[1, 2])
    original = mini.on_produce
    answered = []

    async def lossy(node, req, v):
        first = not answered
        answered.append(node)
        if node == 1 and first:
            return _answer_all(req, ErrorCode.UNKNOWN_SERVER_ERROR)
        if node == 1:
            return await original(node, req, v)
        # node 2: before (queued retry) or after (answer still in flight) t-0's failure
        await trio.sleep(0 if retry_waiting else 0.05)
        response = await original(node, req, v)
        if answered.count(2) == 1:
            for p in response.responses[0].partition_responses:
                p.error_code, p.base_offset = ErrorCode.REQUEST_TIMED_OUT, -1
        return response

    mini.on_produce = lossy
    async with Producer(env, "b1:9092", retry_backoff_ms=20) as producer:
        lost = await producer.send("t", b"lost answer", partition=1)
        failed = await producer.send("t", b"fails", partition=0)
        with pytest.raises(BrokerResponseError):
            await failed
        with pytest.raises(KafkaError):
            await lost  # its outcome is unknown: it may be (and here is) in the log
        after = await producer.send_and_wait("t", b"after", partition=1)
    assert [r.value for r in mini.records("t", 1)] == [b"lost answer", b"after"]
    assert after.offset == 1


def _answer_all(req, code):
    from wire.protocol import ProduceResponse
    return ProduceResponse(throttle_time_ms=0, responses=[
        ProduceResponse.TopicProduceResponse(name=t.name, partition_responses=[
            ProduceResponse.PartitionProduceResponse(index=p.index, error_code=code, base_offset=-1)
            for p in t.partition_data]) for t in req.topic_data])


async def test_send_many_queues_records_as_sends_of_each_would(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 3)
    records = [(b"k%d" % (i % 4), b"v%d" % i) for i in range(40)] + [(None, b"h", [("a", "1")]), (b"k0", None)]
    async with Producer(env, "b1:9092", batch_size=300) as producer:
        futures = await producer.send_many("t", records)
        results = [await f for f in futures]
        pinned = await producer.send_many("t", [(None, b"p1"), (None, b"p2")], partition=2)
        assert [(await f).partition for f in pinned] == [2, 2]
        with pytest.raises(BrokerResponseError):  # too large: refused as send() refuses it
            await producer.send_many("t", [(None, b"x" * 2_000_000)])
    for (key, value, *_), result in zip(records, results):
        if key is not None:
            assert result.partition == murmur2_partition(key, 3)
    stored = {p: mini.records("t", p) for p in range(3)}
    for (key, value, *headers), result in zip(records, results):
        record = stored[result.partition][result.offset]
        assert (record.key, record.value) == (key, value)
        assert record.headers == ((("a", b"1"),) if headers else ())


async def test_send_values_fills_batches_in_order_and_answers_for_the_block(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 3)
    values = [b"v%03d" % i for i in range(200)]
    async with Producer(env, "b1:9092", batch_size=500, linger_ms=1000) as producer:
        first = await producer.send("t", b"before", partition=1)
        block = await producer.send_values("t", values[:120], partition=1)
        rest = await producer.send_values("t", values[120:], partition=1)
        assert not block.done()  # lingering: nothing answered before the flush
        await producer.flush()
        assert (await block, await rest, block.failed) == (120, 80, 0)
        assert (await first).offset == 0
        spread = await producer.send_values("t", values)  # null keys: a partition per batch
        assert await spread == 200
        with pytest.raises(BrokerResponseError):  # too large: refused as send() refuses it
            await producer.send_values("t", [b"x" * 2_000_000])
    assert [r.value for r in mini.records("t", 1)][:201] == [b"before"] + values
    assert all(len(data) <= 500 + 100 for _, _, _, data in mini.topics["t"][1].batches)
    assert len(mini.topics["t"][1].batches) > 5
    spread_out = [r.value for p in (0, 2) for r in mini.records("t", p)] + [r.value for r in mini.records("t", 1)[201:]]
    assert sorted(spread_out) == values


async def test_a_failed_batch_fails_its_part_of_a_block_and_callbacks_run_in_record_order(nursery, autojump_clock):
    env, mini = await start(nursery)
    mini.create_topic("t", 1)
    mini.fail_next(ApiKey.PRODUCE, ErrorCode.INVALID_TOPIC_EXCEPTION)
    seen = []
    async with Producer(env, "b1:9092", linger_ms=1000) as producer:
        futures = [await producer.send("t", b"r%d" % i) for i in range(3)]  # the same batch as the block
        for future in reversed(futures):  # added out of order: still run in record order
            future.add_callback(lambda f: seen.append(f._index))
        block = await producer.send_values("t", [b"a", b"b"])
        with pytest.raises(BrokerResponseError):
            await block
        assert (block.failed, block.exception().code) == (2, ErrorCode.INVALID_TOPIC_EXCEPTION)
        assert await (await producer.send_values("t", [b"c"])) == 1
    assert seen == [0, 1, 2]
    assert [r.value for r in mini.records("t", 0)] == [b"c"]
