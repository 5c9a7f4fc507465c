"""Quota enforcement on a broker (KIP-219): a produce over its client-id's byte-rate quota is
answered at once with throttle_time_ms, then the broker reads nothing more from that
connection for that long; our client holds its next request back as long; another client-id
is not throttled; the request-time and partition-mutation quotas answer their throttles (the
mutation quota refuses over it from CreateTopics v6, as Kafka);
DescribeClientQuotas shows what AlterClientQuotas set."""
from __future__ import annotations

import trio

from broker.controller_channel import CreatableTopic, QuotaAlteration, QuotaOp
from raftkafka.client.connection import BrokerConnection
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.protocol import AlterClientQuotasRequest, DescribeClientQuotasRequest, ProduceResponse, decode_response

QUOTA = 50_000.0  # bytes/s: a new entity may send 10 windows' worth (500 kB) before a throttle
BIG = B.batch(53, value_size=10_000)  # ~530 kB: about 0.6 s of throttle


async def test_an_entity_over_its_quota_is_throttled_and_its_connection_muted():
    async with running_cluster() as c:
        await c.controller.create_topics([CreatableTopic("t", 1, 1)])
        await c.controller.alter_client_quotas([
            QuotaAlteration((("client-id", client),), (QuotaOp("producer_byte_rate", QUOTA),))
            for client in ("raw-client", "ours")])
        await c.settle()
        raw = await RawClient.connect(c.brokers[0].port)
        await raw.send(B.produce("t", 0, BIG), 7)
        await raw.send(B.metadata("t"), 7)
        first = await raw.read_frame()
        answered = trio.current_time()
        second = await raw.read_frame()
        muted = trio.current_time() - answered
        _, produced = decode_response(first, ProduceResponse.API_KEY, 7)
        assert produced.responses[0].partition_responses[0].error_code == 0
        throttle_s = produced.throttle_time_ms / 1000
        assert 0.3 < throttle_s < 2.0
        assert second is not None and muted >= throttle_s - 0.05  # read only after the throttle

        async with trio.open_nursery() as nursery:
            slow = await BrokerConnection.open(c.brokers[0].env, nursery, "127.0.0.1", c.brokers[0].port,
                                               client_id="ours")
            other = await BrokerConnection.open(c.brokers[0].env, nursery, "127.0.0.1", c.brokers[0].port,
                                                client_id="other")
            assert (await other.request(B.produce("t", 0, BIG), version=7)).throttle_time_ms == 0
            throttled = await slow.request(B.produce("t", 0, BIG), version=7)
            assert throttled.throttle_time_ms > 0
            sent = trio.current_time()
            # our client holds its next request back (KIP-219), as the broker reads nothing meanwhile
            assert slow.throttled_until >= c.brokers[0].env.now() + throttled.throttle_time_ms / 1000 - 0.1
            await slow.request(B.metadata("t"), version=7)
            assert trio.current_time() - sent >= throttled.throttle_time_ms / 1000 - 0.05
            nursery.cancel_scope.cancel()


async def test_quota_window_num_bounds_the_burst_a_new_entity_may_send():
    """quota.window.num=3: the rate of a new entity is measured over at least 2 windows, not 10,
    so the same produce is measured 5 times higher and throttled for its excess over 2 s."""
    async with running_cluster(static={"quota.window.num": "3"}) as c:
        await c.controller.create_topics([CreatableTopic("t", 1, 1)])
        await c.controller.alter_client_quotas([
            QuotaAlteration((("client-id", "raw-client"),), (QuotaOp("producer_byte_rate", QUOTA),))])
        await c.settle()
        raw = await RawClient.connect(c.brokers[0].port)
        await raw.send(B.produce("t", 0, BIG), 7)
        _, produced = decode_response(await raw.read_frame(), ProduceResponse.API_KEY, 7)
        # ~530 kB over 2 s against 50 kB/s: (265 - 50) / 50 x 2 s (with 11 windows: ~0.6 s)
        assert 8_000 < produced.throttle_time_ms < 9_500, produced.throttle_time_ms


async def test_alter_and_describe_client_quotas_over_the_wire():
    async with running_cluster() as c:
        raw = await RawClient.connect(c.brokers[0].port)
        A = AlterClientQuotasRequest
        altered = await raw.call(A(entries=[
            A.EntryData(entity=[A.EntityData(entity_type="user", entity_name=None)],
                        ops=[A.OpData(key="consumer_byte_rate", value=2e6, remove=False)]),
            A.EntryData(entity=[A.EntityData(entity_type="user", entity_name="x")],
                        ops=[A.OpData(key="bogus", value=1, remove=False)])], validate_only=False), 1)
        assert [e.error_code for e in altered.entries] == [0, 42]  # INVALID_REQUEST for the bad one only
        assert altered.entries[1].error_message == "Invalid configuration key bogus"
        D = DescribeClientQuotasRequest
        described = await raw.call(D(components=[D.ComponentData(entity_type="user", match_type=1, match=None)],
                                     strict=True), 1)
        assert described.error_code == 0
        [entry] = described.entries
        assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("user", None)]
        assert [(v.key, v.value) for v in entry.values] == [("consumer_byte_rate", 2e6)]
        refused = await raw.call(D(components=[D.ComponentData(entity_type="group", match_type=0, match="g")],
                                   strict=False), 1)
        assert refused.error_code == 35 and refused.entries is None  # UNSUPPORTED_VERSION, as Kafka


async def test_request_time_and_partition_mutation_quotas_answer_their_throttles():
    async with running_cluster() as c:
        await c.controller.alter_client_quotas([QuotaAlteration((("client-id", "raw-client"),), (
            QuotaOp("controller_mutation_rate", 10.0),  # a bucket of 100 partitions, refilled at 10/s
            QuotaOp("request_percentage", 1e-6)))])  # any handling at all is over it
        await c.settle()
        raw = await RawClient.connect(c.brokers[0].port)
        created = await raw.call(B.create_topic("many", 115), 4)
        assert created.topics[0].error_code == 0
        # 115 partitions: 15 over the bucket, 1.5 s to refill (above the request quota's bound of one window)
        assert 1_400 <= created.throttle_time_ms <= 1_500
        described = await raw.call(B.metadata("many", auto_create=False), 7)
        assert 0 < described.throttle_time_ms <= 1000  # request_percentage: bounded by one window


async def test_mutation_quota_is_strict_from_create_topics_v6_and_permissive_before():
    async with running_cluster() as c:
        await c.controller.alter_client_quotas([QuotaAlteration((("client-id", "raw-client"),), (
            QuotaOp("controller_mutation_rate", 10.0),))])  # a bucket of 100 partitions
        await c.settle()
        raw = await RawClient.connect(c.brokers[0].port)
        first = await raw.call(B.create_topic("a", 105, configs={"retention.ms": "1000"}), 6)
        [a] = first.topics  # admitted: the bucket was not in debt before it (5 after)
        assert (a.error_code, a.num_partitions, a.replication_factor, first.throttle_time_ms) == (0, 105, 1, 0)
        assert {x.name: (x.value, x.config_source) for x in a.configs}["retention.ms"] == ("1000", 1)  # topic's own
        refused = await raw.call(B.create_topic("b", 1), 6)
        assert refused.topics[0].error_code == 89 and refused.throttle_time_ms == 500  # THROTTLING_QUOTA_EXCEEDED
        assert c.controller.image.topic("b") is None
        permissive = await raw.call(B.create_topic("c", 1), 4)  # v4: created, and told the debt's refill time
        assert permissive.topics[0].error_code == 0 and permissive.throttle_time_ms == 600


async def test_a_throttled_fetch_is_answered_without_its_records_which_do_not_count():
    async with running_cluster() as c:
        await c.controller.create_topics([CreatableTopic("t", 1, 1)])
        await c.settle()
        raw = await RawClient.connect(c.brokers[0].port)
        for _ in range(3):
            assert (await raw.call(B.produce("t", 0, BIG), 7)).responses[0].partition_responses[0].error_code == 0
        await c.controller.alter_client_quotas([QuotaAlteration((("client-id", "raw-client"),),
                                                                (QuotaOp("consumer_byte_rate", QUOTA),))])
        await c.settle()
        fetched = await raw.call(B.fetch([("t", 0, 0)], max_bytes=4 << 20, partition_max_bytes=4 << 20), 11)
        assert fetched.throttle_time_ms > 0
        [partition] = fetched.responses[0].partitions
        assert partition.error_code == 0 and partition.high_watermark == 3 * 53 and not partition.records
        [stats] = c.brokers[0].client_quotas.fetch.stats(c.brokers[0].env.now() * 1000)
        assert stats.rate * 10 < 10_000  # only the answer's headers were counted, not ~1.6 MB of records
