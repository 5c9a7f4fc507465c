"""Requests naming too many items: INVALID_REQUEST over the cap, the connection closed when
even decoding would cost too much; a large legal request is served."""
from broker.request_caps import MAX_DECODED_ITEMS, MAX_REQUEST_ITEMS
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.error_codes import ErrorCode
from wire.protocol import ApiVersionsRequest, ListOffsetsRequest as L


def _list_offsets(topics: int, partitions: int) -> L:
    return L(replica_id=-1, isolation_level=0, topics=[L.ListOffsetsTopic(name="t", partitions=[
        L.ListOffsetsPartition(partition_index=0, timestamp=-1) for _ in range(partitions)]) for _ in range(topics)])


def _codes(response) -> set[int]:
    return {p.error_code for t in response.topics for p in t.partitions}


async def test_a_request_over_the_item_cap_is_answered_invalid_request_per_partition():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await client.call(B.create_topic("t", 1), 4)
        at_cap = _list_offsets(10, MAX_REQUEST_ITEMS // 10 - 1)  # 10 topics + their partitions
        assert _codes(await client.call(at_cap, 2, timeout=60)) == {ErrorCode.NONE}
        over = _list_offsets(10, MAX_REQUEST_ITEMS // 10)
        response = await client.call(over, 2, timeout=60)
        assert _codes(response) == {ErrorCode.INVALID_REQUEST}
        assert sum(len(t.partitions) for t in response.topics) == MAX_REQUEST_ITEMS
        assert (await client.call(ApiVersionsRequest(), 0)).error_code == 0  # the connection stays open


async def test_a_request_holding_more_than_the_decoding_limit_closes_only_its_connection():
    async with running_cluster() as c:
        port = c.brokers[0].port
        healthy = await RawClient.connect(port)
        client = await RawClient.connect(port)
        await client.send(_list_offsets(1, MAX_DECODED_ITEMS), 2)
        assert await client.is_closed(timeout=60)
        assert c.brokers[0].server.closed_for_bad_input == 1
        assert (await healthy.call(ApiVersionsRequest(), 0)).error_code == 0
