"""Produce, Fetch, ListOffsets and OffsetForLeaderEpoch against in-process brokers (raw protocol)."""
import trio

from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from storage.log import MAX_TIMESTAMP
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode as E
from wire.protocol import FetchResponse, ListOffsetsResponse, ProduceResponse
from wire.records import decode_batch


async def setup_topic(cluster, client, name="t", partitions=1, **kw):
    resp = await client.call(B.create_topic(name, partitions, **kw), 4)
    assert resp.topics[0].error_code == E.NONE, resp
    return resp


def records_of(partition_data) -> bytes:
    return bytes(partition_data.records)


async def test_produce_then_fetch_returns_the_same_records_with_assigned_offsets():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        first, second = B.batch(3, timestamp=1000), B.batch(2, timestamp=2000)
        r1 = B.one_partition(await client.call(B.produce("t", 0, first), 8))
        r2 = B.one_partition(await client.call(B.produce("t", 0, second), 8))
        assert (r1.error_code, r1.base_offset, r2.base_offset) == (0, 0, 3)
        assert r2.log_start_offset == 0 and r2.log_append_time_ms == -1
        part = B.one_partition(await client.call(B.fetch([("t", 0, 0)]), 11))
        assert part.error_code == E.NONE and part.high_watermark == 5 and part.last_stable_offset == 5
        data = records_of(part)
        batches = list(iter_batches(data))
        assert [h.base_offset for _, h in batches] == [0, 3]
        assert [h.partition_leader_epoch for _, h in batches] == [0, 0]
        # Only the 8-byte baseOffset and the epoch changed: the rest is what the client sent.
        assert data[batches[1][0] + 8:batches[1][0] + 12] == second[8:12]
        assert data[batches[1][0] + 16:] == second[16:]
        assert [r.offset for r in decode_batch(data, batches[1][0])[1]] == [3, 4]


async def test_fetch_from_the_middle_of_a_batch_starts_at_that_batch():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        await client.call(B.produce("t", 0, B.batch(4)), 8)
        part = B.one_partition(await client.call(B.fetch([("t", 0, 2)]), 11))
        assert [h.base_offset for _, h in iter_batches(records_of(part))] == [0]
        at_end = B.one_partition(await client.call(B.fetch([("t", 0, 4)]), 11))
        assert at_end.error_code == E.NONE and records_of(at_end) == b""


async def test_fetch_out_of_range_and_unknown_partitions():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        await client.call(B.produce("t", 0, B.batch(2)), 8)
        resp = await client.call(B.fetch([("t", 0, 3), ("t", 5, 0), ("nope", 0, 0)], max_wait_ms=30000,
                                         min_bytes=1), 11)
        codes = [p.error_code for t in resp.responses for p in t.partitions]
        # Errors answer at once (the 30 s long-poll would trip the client's 10 s timeout).
        assert codes == [E.OFFSET_OUT_OF_RANGE, E.UNKNOWN_TOPIC_OR_PARTITION, E.UNKNOWN_TOPIC_OR_PARTITION]
        assert resp.responses[0].partitions[0].records == b""


async def test_partition_max_bytes_still_returns_one_whole_batch():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        big = B.batch(5, value_size=500)
        await client.call(B.produce("t", 0, big), 8)
        await client.call(B.produce("t", 0, B.batch(1)), 8)
        part = B.one_partition(await client.call(B.fetch([("t", 0, 0)], partition_max_bytes=100), 11))
        assert len(records_of(part)) == len(big)  # whole first batch, not a truncated one
        both = B.one_partition(await client.call(B.fetch([("t", 0, 0)]), 11))
        assert len(list(iter_batches(records_of(both)))) == 2


async def test_max_bytes_is_shared_across_partitions():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client, partitions=2)
        for p in (0, 1):
            await client.call(B.produce("t", p, B.batch(5, value_size=300)), 8)
        resp = await client.call(B.fetch([("t", 0, 0), ("t", 1, 0)], max_bytes=100), 11)
        p0, p1 = resp.responses[0].partitions
        assert len(records_of(p0)) > 100  # the first gets one whole batch regardless
        assert p1.error_code == E.NONE and records_of(p1) == b"" and p1.high_watermark == 5


async def test_long_poll_fetch_wakes_on_append():
    async with running_cluster() as c:
        port = c.brokers[0].port
        client = await RawClient.connect(port)
        await setup_topic(c, client, partitions=2)
        waiting = await RawClient.connect(port)
        result = {}

        async def long_poll():
            # max_wait 60 s > the client's 10 s timeout: only an append can answer it in time.
            result["resp"] = await waiting.call(B.fetch([("t", 0, 0)], max_wait_ms=60000, min_bytes=1), 11)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(long_poll)
            await wait_for(lambda: c.brokers[0].purgatory.waiting == 1)
            await client.call(B.produce("t", 1, B.batch(1)), 8)  # another partition: stays parked
            assert c.brokers[0].purgatory.waiting == 1 and "resp" not in result
            await client.call(B.produce("t", 0, B.batch(2)), 8)
        part = B.one_partition(result["resp"])
        assert part.high_watermark == 2 and len(list(iter_batches(records_of(part)))) == 1


async def test_long_poll_times_out_with_empty_records():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        part = B.one_partition(await client.call(B.fetch([("t", 0, 0)], max_wait_ms=200, min_bytes=1), 11))
        assert part.error_code == E.NONE and part.records == b"" and part.high_watermark == 0


async def test_fetch_leader_epoch_fencing():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        assert B.one_partition(await client.call(B.fetch([("t", 0, 0)], epoch=0), 11)).error_code == E.NONE
        assert B.one_partition(await client.call(B.fetch([("t", 0, 0)], epoch=3), 11)).error_code == \
            E.UNKNOWN_LEADER_EPOCH


async def test_list_offsets_earliest_latest_by_timestamp_and_max():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        now = c.env.wall_ms()
        for i, ts in enumerate((now - 3000, now - 2000, now - 1000)):
            await client.call(B.produce("t", 0, B.batch(2, timestamp=ts)), 8)

        async def lookup(ts):
            resp = await client.call(B.list_offsets("t", 0, ts), 3)
            p = resp.topics[0].partitions[0]
            return p.error_code, p.offset, p.timestamp

        assert await lookup(-2) == (0, 0, -1)
        assert await lookup(-1) == (0, 6, -1)
        assert await lookup(now - 2500) == (0, 2, now - 2000)
        assert await lookup(now - 2000) == (0, 2, now - 2000)
        assert await lookup(now) == (0, -1, -1)
        code, offset, ts = await lookup(MAX_TIMESTAMP)
        assert code == 0 and ts == now - 1000 and offset in (4, 5)  # within the batch holding the max
        resp = await client.call(B.list_offsets("missing", 0, -1), 3)
        assert resp.topics[0].partitions[0].error_code == E.UNKNOWN_TOPIC_OR_PARTITION


async def test_offset_for_leader_epoch_answers_the_epoch_end():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        await client.call(B.produce("t", 0, B.batch(3)), 8)
        resp = await client.call(B.offset_for_epoch("t", 0, 0, current=0), 3)
        p = resp.topics[0].partitions[0]
        assert (p.error_code, p.leader_epoch, p.end_offset) == (0, 0, 3)
        stale = (await client.call(B.offset_for_epoch("t", 0, 0, current=7), 3)).topics[0].partitions[0]
        assert stale.error_code == E.UNKNOWN_LEADER_EPOCH


async def test_log_append_time_topic_stamps_batches():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client, configs={"message.timestamp.type": "LogAppendTime"})
        r = B.one_partition(await client.call(B.produce("t", 0, B.batch(2, timestamp=5)), 8))
        assert r.error_code == E.NONE and r.log_append_time_ms > 5
        part = B.one_partition(await client.call(B.fetch([("t", 0, 0)]), 11))
        header, records = decode_batch(records_of(part))
        assert header.log_append_time and header.max_timestamp == r.log_append_time_ms
        assert {rec.timestamp for rec in records} == {r.log_append_time_ms}


async def test_produce_errors_per_partition():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client, partitions=3, configs={"max.message.bytes": "1000"})
        bad_crc = bytearray(B.batch(2))
        bad_crc[-1] ^= 0xFF
        resp = await client.call(B.produce("t", 0, bytes(bad_crc), extra={
            1: B.batch(20, value_size=100), 2: B.batch(1), 9: B.batch(1)}), 8)
        codes = {p.index: p.error_code for p in resp.responses[0].partition_responses}
        assert codes == {0: E.CORRUPT_MESSAGE, 1: E.MESSAGE_TOO_LARGE, 2: E.NONE, 9: E.UNKNOWN_TOPIC_OR_PARTITION}
        unknown = B.one_partition(await client.call(B.produce("missing", 0, B.batch(1)), 8))
        assert unknown.error_code == E.UNKNOWN_TOPIC_OR_PARTITION
        # Nothing of the refused batches reached the log.
        assert c.brokers[0].replicas.get("t", 0).log_end_offset == 0


async def test_produce_v2_and_bad_acks_are_refused():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        assert B.one_partition(await client.call(B.produce("t", 0, B.batch(1)), 2)).error_code == \
            E.UNSUPPORTED_VERSION
        assert B.one_partition(await client.call(B.produce("t", 0, B.batch(1), acks=2), 8)).error_code == \
            E.INVALID_REQUIRED_ACKS
        assert c.brokers[0].replicas.get("t", 0).log_end_offset == 0


async def test_acks_all_with_a_lone_leader_answers_at_once_and_min_isr_refuses():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client, name="ok")
        await setup_topic(c, client, name="strict", configs={"min.insync.replicas": "2"})
        assert B.one_partition(await client.call(B.produce("ok", 0, B.batch(1), acks=-1), 8)).error_code == 0
        refused = B.one_partition(await client.call(B.produce("strict", 0, B.batch(1), acks=-1), 8))
        assert refused.error_code == E.NOT_ENOUGH_REPLICAS
        assert B.one_partition(await client.call(B.produce("strict", 0, B.batch(1), acks=1), 8)).error_code == 0


async def test_acks_zero_gets_no_response_and_failure_closes_the_connection():
    async with running_cluster() as c:
        client = await RawClient.connect(c.brokers[0].port)
        await setup_topic(c, client)
        await client.send(B.produce("t", 0, B.batch(2), acks=0), 8)
        # The next answer on the connection is for the following request, not the acks=0 one.
        part = B.one_partition(await client.call(B.fetch([("t", 0, 0)]), 11))
        assert part.high_watermark == 2
        await client.send(B.produce("missing", 0, B.batch(1), acks=0), 8)
        assert await client.is_closed()
        other = await RawClient.connect(c.brokers[0].port)
        assert B.one_partition(await other.call(B.fetch([("t", 0, 0)]), 11)).high_watermark == 2


async def wait_for(predicate, timeout=10.0):
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.01)


__all__ = ["FetchResponse", "ListOffsetsResponse", "ProduceResponse"]
