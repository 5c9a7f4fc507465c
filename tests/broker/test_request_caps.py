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


async def test_group_ids_beyond_the_hashing_cap_are_answered_invalid_request():
    # Found by the protocol fuzzer: DeleteGroups naming 2,000 ids of 32,767 characters held
    # the event loop ~8 s, hashing each id a character at a time to find its coordinator.
    from broker.request_caps import MAX_COORDINATOR_KEY_CHARS
    from wire.protocol import DeleteGroupsRequest, OffsetFetchRequest

    longest = 32767  # what a Kafka log's int16 string holds
    fits = MAX_COORDINATOR_KEY_CHARS // longest
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        at_cap = [f"{i:05d}".ljust(longest, "g") for i in range(fits)]
        answered = await client.call(DeleteGroupsRequest(group_names=at_cap), 1, timeout=60)
        assert [r.group_id for r in answered.results] == at_cap
        handled = {ErrorCode.GROUP_ID_NOT_FOUND, ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE}
        assert {r.error_code for r in answered.results} <= handled  # looked up, not refused
        over = at_cap + ["x".ljust(longest, "g")]
        refused = await client.call(DeleteGroupsRequest(group_names=over), 1, timeout=60)
        assert [r.group_id for r in refused.results] == over
        assert {r.error_code for r in refused.results} == {ErrorCode.INVALID_REQUEST}
        # A flexible version's string has no int16 bound: one id can be over the cap alone.
        one = "g" * (MAX_COORDINATOR_KEY_CHARS + 1)
        fetched = await client.call(OffsetFetchRequest(group_id=one, topics=None), 7, timeout=60)
        assert fetched.error_code == ErrorCode.INVALID_REQUEST
        assert (await client.call(ApiVersionsRequest(), 0)).error_code == 0  # the connection stays open
