"""Partition replication across in-process brokers: followers, HW, ISR changes, acks=all, truncation."""
from __future__ import annotations

import trio

from broker.controller_channel import CreatableTopic
from metadata.records import PartitionChange
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.batch_header import iter_batches
from wire.error_codes import ErrorCode as E

FAST = {
    "replica.lag.time.max.ms": "800",
    "replica.fetch.backoff.ms": "50",
    "replica.fetch.wait.max.ms": "100",
}


async def make_topic(c, name="t", replicas=(1, 2, 3), configs=None):
    reply = await c.controller.create_topics([CreatableTopic(name, assignments={0: replicas},
                                                             configs=dict(configs or {}))])
    assert reply.results[0].error == E.NONE, reply
    await c.settle()


async def wait_for(predicate, timeout=10.0, what="condition"):
    with trio.fail_after(timeout):
        while not predicate():
            await trio.sleep(0.01)


def part(c, node_id, topic="t"):
    return c.broker(node_id).replicas.get(topic, 0)


def log_bytes(c, node_id, upto, topic="t"):
    return part(c, node_id, topic).log.read_bytes(0, 1 << 30, max_offset=upto)


def isr(c, topic="t"):
    return tuple(sorted(c.controller.image.topics_by_name[topic].partitions[0].isr))


async def cut_off(broker, cluster=None):
    """Stall a follower (as SIGSTOP would): its fetchers can no longer reach anyone. With
    `cluster`, no leader acts on its fetch connections closing (a stopped process keeps them
    open), so only the lag check takes it out of their ISRs."""
    if cluster is not None:
        for other in cluster.brokers:
            other.server._closed = lambda conn: None
    broker.fetchers.address_of = lambda _id: None
    for fetcher in list(broker.fetchers.fetchers.values()):
        fetcher.address_of = broker.fetchers.address_of
        await fetcher._close()


def heal(broker):
    broker.fetchers.address_of = broker.broker_address
    for fetcher in broker.fetchers.fetchers.values():
        fetcher.address_of = broker.broker_address


async def produce(client, records, *, acks=-1, timeout_ms=5000, topic="t"):
    return B.one_partition(await client.call(B.produce(topic, 0, records, acks=acks, timeout_ms=timeout_ms), 8,
                                             timeout=30))


async def test_followers_replicate_and_the_hw_advances_over_the_isr():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        for i in range(5):
            r = await produce(client, B.batch(3), acks=1)
            assert (r.error_code, r.base_offset) == (E.NONE, 3 * i)
        await wait_for(lambda: all(part(c, n).high_watermark == 15 for n in (1, 2, 3)))
        assert log_bytes(c, 1, 15) == log_bytes(c, 2, 15) == log_bytes(c, 3, 15)
        assert not part(c, 2).is_leader and part(c, 2).log_end_offset == 15
        fetched = B.one_partition(await client.call(B.fetch([("t", 0, 0)]), 11))
        assert fetched.high_watermark == 15
        assert [h.base_offset for _, h in iter_batches(bytes(fetched.records))] == [0, 3, 6, 9, 12]


async def test_acks_all_answers_once_every_isr_member_has_the_batch():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c, configs={"min.insync.replicas": "2"})
        client = await RawClient.connect(c.broker(1).port)
        for i in range(3):
            r = await produce(client, B.batch(2))
            assert (r.error_code, r.base_offset) == (E.NONE, 2 * i)
            # Acknowledged means: on every ISR member, below the leader's HW.
            assert part(c, 1).high_watermark >= 2 * (i + 1)
            assert part(c, 2).log_end_offset >= 2 * (i + 1) and part(c, 3).log_end_offset >= 2 * (i + 1)


async def test_consumers_never_see_records_above_the_hw():
    async with running_cluster(3, static={**FAST, "replica.lag.time.max.ms": "30000"}) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        assert (await produce(client, B.batch(2))).error_code == E.NONE
        await cut_off(c.broker(2), c)
        await cut_off(c.broker(3), c)
        r = await produce(client, B.batch(3), acks=1)
        assert (r.error_code, r.base_offset) == (E.NONE, 2)
        leader = part(c, 1)
        assert (leader.log_end_offset, leader.high_watermark) == (5, 2)
        fetched = B.one_partition(await client.call(B.fetch([("t", 0, 0)], max_wait_ms=200, min_bytes=1 << 20), 11))
        assert fetched.high_watermark == 2
        assert [h.last_offset for _, h in iter_batches(bytes(fetched.records))] == [1]
        at_hw = B.one_partition(await client.call(B.fetch([("t", 0, 2)], max_wait_ms=100, min_bytes=1), 11))
        assert bytes(at_hw.records) == b""
        heal(c.broker(2))
        heal(c.broker(3))
        await wait_for(lambda: leader.high_watermark == 5)


async def test_a_stalled_follower_leaves_the_isr_after_the_lag_time_and_rejoins_when_caught_up():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        assert (await produce(client, B.batch(2))).error_code == E.NONE
        await cut_off(c.broker(3), c)
        t0 = trio.current_time()
        r = await produce(client, B.batch(2), timeout_ms=10000)  # waits for the ISR to drop broker 3
        assert r.error_code == E.NONE
        assert trio.current_time() - t0 >= 0.8 * 0.9  # not before the lag time (loosely)
        assert isr(c) == (1, 2) and part(c, 1).isr == (1, 2)
        assert part(c, 1).under_replicated and c.broker(1).replicas.under_replicated_count == 1
        for _ in range(3):
            assert (await produce(client, B.batch(2))).error_code == E.NONE
        heal(c.broker(3))
        await wait_for(lambda: isr(c) == (1, 2, 3))
        await wait_for(lambda: part(c, 1).isr == (1, 2, 3) and part(c, 3).log_end_offset == 10)
        assert log_bytes(c, 3, 10) == log_bytes(c, 1, 10)
        assert part(c, 1).isr_shrinks == 1 and part(c, 1).isr_expands == 1
        assert c.broker(1).replicas.under_replicated_count == 0


async def test_the_leader_keeps_the_old_isr_until_the_controller_commits_the_shrink():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c, configs={"min.insync.replicas": "2"})
        client = await RawClient.connect(c.broker(1).port)
        assert (await produce(client, B.batch(1))).error_code == E.NONE
        c.controller.alter_partition_gate = gate = trio.Event()
        await cut_off(c.broker(3), c)
        leader = part(c, 1)
        r = await produce(client, B.batch(1), acks=1)
        assert r.error_code == E.NONE
        await wait_for(lambda: leader.isr_state.inflight)
        # The shrink is pending: broker 3 still counts for the HW, so nothing new is committed...
        await trio.sleep(0.3)
        assert leader.isr == (1, 2, 3) and leader.high_watermark == 1
        # ...and an acks=all produce times out rather than being acknowledged early.
        timed_out = await produce(client, B.batch(1), timeout_ms=200)
        assert (timed_out.error_code, timed_out.base_offset) == (E.REQUEST_TIMED_OUT, -1)
        gate.set()
        await wait_for(lambda: leader.isr == (1, 2) and leader.high_watermark == 3)
        assert isr(c) == (1, 2)


async def test_not_enough_replicas_before_the_append_and_nothing_is_written():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c, configs={"min.insync.replicas": "2"})
        client = await RawClient.connect(c.broker(1).port)
        assert (await produce(client, B.batch(2))).error_code == E.NONE
        await cut_off(c.broker(2), c)
        await cut_off(c.broker(3), c)
        r = await produce(client, B.batch(2), timeout_ms=10000)
        # Appended with the full ISR, then the ISR shrank below min.insync.replicas meanwhile.
        assert r.error_code == E.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        await wait_for(lambda: isr(c) == (1,))
        end = part(c, 1).log_end_offset
        refused = await produce(client, B.batch(2))
        assert (refused.error_code, refused.base_offset) == (E.NOT_ENOUGH_REPLICAS, -1)
        assert part(c, 1).log_end_offset == end  # refused before the append
        assert (await produce(client, B.batch(1), acks=1)).error_code == E.NONE  # acks=1 still works


async def test_produce_to_a_follower_is_refused():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(2).port)
        r = await produce(client, B.batch(1))
        assert r.error_code == E.NOT_LEADER_OR_FOLLOWER


async def test_a_leader_with_uncommitted_records_rejoins_as_follower_and_truncates_them():
    async with running_cluster(3, static={**FAST, "replica.lag.time.max.ms": "30000"}) as c:
        await make_topic(c, configs={"min.insync.replicas": "2"})
        c1 = await RawClient.connect(c.broker(1).port)
        for _ in range(5):
            assert (await produce(c1, B.batch(1))).error_code == E.NONE
        await cut_off(c.broker(2), c)
        await cut_off(c.broker(3), c)
        # Appended, never committed; the same size as what the next leader writes at those
        # offsets, so only epoch-based truncation (not an offset mismatch) can tell them apart.
        doomed = await produce(c1, B.batch(2, value_size=50), acks=1)
        assert (doomed.error_code, doomed.base_offset) == (E.NONE, 5)
        seen = B.one_partition(await c1.call(B.fetch([("t", 0, 0)]), 11))
        assert seen.high_watermark == 5
        assert max(h.last_offset for _, h in iter_batches(bytes(seen.records))) == 4
        old_epoch = part(c, 1).leader_epoch
        await c.stop(1)
        c.controller.fence(1)
        await c.settle()
        heal(c.broker(2))
        heal(c.broker(3))
        new_leader = c.controller.image.topics_by_name["t"].partitions[0].leader
        assert new_leader in (2, 3)
        await wait_for(lambda: part(c, new_leader).is_leader)
        client = await RawClient.connect(c.broker(new_leader).port)
        fresh = await produce(client, B.batch(2, value_size=9))
        assert (fresh.error_code, fresh.base_offset) == (E.NONE, 5)
        assert (await produce(client, B.batch(1))).error_code == E.NONE
        await c.restart(1)
        follower = part(c, 1)
        await wait_for(lambda: not follower.is_leader and follower.log_end_offset == 8
                       and follower.high_watermark == 8)
        assert log_bytes(c, 1, 8) == log_bytes(c, new_leader, 8)
        epochs = [h.partition_leader_epoch for _, h in iter_batches(log_bytes(c, 1, 8))]
        assert epochs[-2:] == [old_epoch + 1] * 2 and epochs[0] == old_epoch
        assert sum(f.truncations for f in c.broker(1).fetchers.fetchers.values()) == 1
        await wait_for(lambda: isr(c) == (1, 2, 3))


async def test_follower_reconciles_across_several_epochs_it_never_saw():
    async with running_cluster(3, static={**FAST, "replica.lag.time.max.ms": "30000"}) as c:
        await make_topic(c, replicas=(1, 2, 3))
        c1 = await RawClient.connect(c.broker(1).port)
        assert (await produce(c1, B.batch(2))).error_code == E.NONE
        await cut_off(c.broker(3), c)  # 3 misses everything from here on
        assert (await produce(c1, B.batch(2), acks=1)).error_code == E.NONE
        await wait_for(lambda: part(c, 2).log_end_offset == 4)
        # Leadership moves 1 -> 2 -> 1, each time with writes; 3 sees none of it.
        await c.stop(1)
        c.controller.fence(1)
        await c.settle()
        c2 = await RawClient.connect(c.broker(2).port)
        await wait_for(lambda: part(c, 2).is_leader)
        assert (await produce(c2, B.batch(1), acks=1)).error_code == E.NONE
        await c.restart(1)
        await wait_for(lambda: part(c, 1).log_end_offset == 5)
        heal(c.broker(3))
        await wait_for(lambda: part(c, 3).log_end_offset == 5 and part(c, 3).high_watermark >= 4)
        assert log_bytes(c, 3, 5) == log_bytes(c, 2, 5)


async def test_an_uncleanly_restarted_replica_leaves_the_isr_until_it_catches_up():
    # KIP-966: a new incarnation without a clean shutdown may have lost unflushed records,
    # so the controller takes it out of the ISR/ELR; it only rejoins by fetching back up to the HW.
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        for _ in range(4):
            assert (await produce(client, B.batch(2))).error_code == E.NONE
        await c.stop(3)
        await c.restart(3, fenced=False)
        # Immediately after registering it is out of the ISR; it comes back by replication.
        await wait_for(lambda: isr(c) == (1, 2, 3) and part(c, 3).log_end_offset == 8)
        assert log_bytes(c, 3, 8) == log_bytes(c, 1, 8)
        requests = c.controller.alter_partition_requests
        assert any(3 in item.new_isr for _b, _e, items in requests for item in items)


async def test_a_parked_fetch_from_a_stopped_follower_does_not_bring_it_back_into_the_isr():
    # SIGSTOP leaves the follower's last long-poll Fetch parked on the leader. Re-reads of it
    # (after any change to the partition) are not fresh fetches: they must not re-admit it.
    async with running_cluster(3, static={**FAST, "replica.lag.time.max.ms": "30000"}) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        assert (await produce(client, B.batch(1))).error_code == E.NONE
        await wait_for(lambda: part(c, 1).high_watermark == 1)
        await cut_off(c.broker(3), c)
        stalled = await RawClient.connect(c.broker(1).port)
        request = B.fetch([("t", 0, 1)], max_wait_ms=20000, min_bytes=1 << 30, epoch=part(c, 1).leader_epoch)
        request.replica_id = 3
        await stalled.send(request, 11)  # parked on the leader; never read back
        await trio.sleep(0.1)
        topic_id = c.controller.image.topic("t").topic_id
        c.controller.commit([PartitionChange(0, topic_id, isr=(1, 2))])  # 3 is dropped
        await c.settle()
        await trio.sleep(0.3)  # the parked fetch was woken and re-read meanwhile
        assert part(c, 1).isr == (1, 2) and isr(c) == (1, 2)
        assert not any(3 in item.new_isr for _b, _e, items in c.controller.alter_partition_requests
                       for item in items)


async def test_followers_follow_the_leaders_log_start_offset():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        for _ in range(3):
            assert (await produce(client, B.batch(2))).error_code == E.NONE
        part(c, 1).log.delete_records_before(4)  # what DeleteRecords / retention do on the leader
        assert (await produce(client, B.batch(1))).error_code == E.NONE
        await wait_for(lambda: part(c, 2).log_start_offset == 4 and part(c, 3).log_start_offset == 4)
