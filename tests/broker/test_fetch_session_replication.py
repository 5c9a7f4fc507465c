"""Fetch sessions between in-process brokers: followers replicate through incremental fetches,
and a raw client sees the broker's side of the protocol (KIP-227)."""
from __future__ import annotations

import trio

from broker.controller_channel import CreatableTopic
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_replication import FAST, wait_for
from wire.error_codes import ErrorCode as E

PARTITIONS = 12


async def make_topic(c, name="s", partitions=PARTITIONS):
    reply = await c.controller.create_topics([CreatableTopic(
        name, assignments={i: (1, 2, 3) for i in range(partitions)})])
    assert reply.results[0].error == E.NONE, reply
    await c.settle()


def replicas(c, node_id, topic="s"):
    return [c.broker(node_id).replicas.get(topic, i) for i in range(PARTITIONS)]


def fetcher(c, node_id, source_id=1):
    return c.broker(node_id).fetchers.fetchers[source_id]


def in_sync(c, index, end, topic="s"):
    parts = [c.broker(n).replicas.get(topic, index) for n in (1, 2, 3)]
    return all(p.log_end_offset == end and p.high_watermark == end for p in parts)


async def produce(client, index, n, topic="s"):
    r = B.one_partition(await client.call(B.produce(topic, index, B.batch(n), acks=1), 8, timeout=30))
    assert r.error_code == E.NONE
    return r.base_offset


def session_fetch(wanted, *, session_id, epoch, forgotten=(), max_wait_ms=0, min_bytes=0):
    request = B.fetch(wanted, max_wait_ms=max_wait_ms, min_bytes=min_bytes)
    gone: dict[str, list] = {}
    for topic, index in forgotten:
        gone.setdefault(topic, []).append(index)
    F = type(request)
    request.session_id, request.session_epoch = session_id, epoch
    request.forgotten_topics_data = [F.ForgottenTopic(topic=t, partitions=ps) for t, ps in gone.items()]
    return request


async def test_followers_replicate_through_incremental_fetches_and_idle_partitions_wake_up():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        await produce(client, 0, 3)
        await wait_for(lambda: in_sync(c, 0, 3))
        sessions = c.broker(1).fetch_sessions
        await wait_for(lambda: sessions.incremental_fetches >= 10)  # idle rounds, all incremental
        for follower in (2, 3):
            f = fetcher(c, follower)
            assert f.session.session_id in sessions.sessions
            assert sessions.sessions[f.session.session_id].size == PARTITIONS
            assert f.session.incremental_requests > f.session.full_requests
        # A partition idle since the sessions opened is replicated when it gets records, and so
        # is one that had data already.
        for index, base in ((7, 0), (0, 3), (7, 2)):
            assert await produce(client, index, 2) == base
            await wait_for(lambda: in_sync(c, index, base + 2))
        for index in range(PARTITIONS):
            leader = c.broker(1).replicas.get("s", index)
            for follower in (2, 3):
                p = c.broker(follower).replicas.get("s", index)
                assert p.log.read_bytes(0, 1 << 20, max_offset=p.log_end_offset) == \
                    leader.log.read_bytes(0, 1 << 20, max_offset=leader.log_end_offset)


async def test_a_follower_whose_session_is_lost_falls_back_to_a_full_fetch_and_goes_on():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        await produce(client, 1, 2)
        await wait_for(lambda: in_sync(c, 1, 2))
        sessions = c.broker(1).fetch_sessions
        await wait_for(lambda: len(sessions) == 2)
        fulls = {n: fetcher(c, n).session.full_requests for n in (2, 3)}
        sessions.sessions.clear()  # as after an eviction or a leader restart
        await produce(client, 4, 5)
        await wait_for(lambda: in_sync(c, 4, 5))
        assert sessions.session_errors >= 1
        assert all(fetcher(c, n).session.full_requests > fulls[n] for n in (2, 3))
        await wait_for(lambda: len(sessions) == 2)


async def test_followers_still_replicate_when_the_broker_keeps_no_sessions():
    async with running_cluster(3, static={**FAST, "max.incremental.fetch.session.cache.slots": "0"}) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        await produce(client, 5, 4)
        await wait_for(lambda: in_sync(c, 5, 4))
        assert len(c.broker(1).fetch_sessions) == 0 and c.broker(1).fetch_sessions.incremental_fetches == 0


async def test_a_parked_incremental_fetch_answers_only_the_partition_that_got_records():
    async with running_cluster(1) as c:
        reply = await c.controller.create_topics([CreatableTopic("s", assignments={i: (1,) for i in range(4)})])
        assert reply.results[0].error == E.NONE
        await c.settle()
        client = await RawClient.connect(c.broker(1).port)
        producer = await RawClient.connect(c.broker(1).port)
        await produce(producer, 2, 1)
        wanted = [("s", i, 1 if i == 2 else 0) for i in range(4)]  # past partition 2's record
        full = await client.call(session_fetch(wanted, session_id=0, epoch=0), 11)
        sid = full.session_id
        assert full.error_code == E.NONE and sid != 0
        assert sorted(p.partition_index for t in full.responses for p in t.partitions) == [0, 1, 2, 3]

        # Nothing new: an empty incremental request gets an empty answer (after max_wait).
        idle = await client.call(session_fetch([], session_id=sid, epoch=1, max_wait_ms=50, min_bytes=1), 11)
        assert (idle.error_code, idle.session_id, idle.responses) == (E.NONE, sid, [])

        # Back to partition 2's record: answered, and again as long as the fetcher does not move.
        back = await client.call(session_fetch([("s", 2, 0)], session_id=sid, epoch=2), 11)
        again = await client.call(session_fetch([], session_id=sid, epoch=3), 11)
        for r in (back, again):
            assert [(t.topic, p.partition_index) for t in r.responses for p in t.partitions] == [("s", 2)]
            assert len(r.responses[0].partitions[0].records) > 0

        # Move partition 2 past it, forget partition 0, then park until partition 3 gets records.
        async with trio.open_nursery() as nursery:
            result = {}

            async def parked():
                result["r"] = await client.call(session_fetch(
                    [("s", 2, 1)], session_id=sid, epoch=4, forgotten=[("s", 0)], max_wait_ms=5000, min_bytes=1), 11)
            nursery.start_soon(parked)
            await trio.sleep(0.1)
            assert "r" not in result
            await produce(producer, 3, 2)
        r = result["r"]
        assert [(t.topic, p.partition_index) for t in r.responses for p in t.partitions] == [("s", 3)]
        part = r.responses[0].partitions[0]
        assert (part.high_watermark, len(part.records) > 0) == (2, True)
        assert sorted(k[1] for k in c.broker(1).fetch_sessions.sessions[sid].partitions) == [1, 2, 3]

        # A stale epoch and an unknown id are top-level errors without partitions.
        stale = await client.call(session_fetch([], session_id=sid, epoch=4), 11)
        assert (stale.error_code, stale.responses) == (E.INVALID_FETCH_SESSION_EPOCH, [])
        unknown = await client.call(session_fetch([], session_id=sid + 1, epoch=1), 11)
        assert (unknown.error_code, unknown.responses) == (E.FETCH_SESSION_ID_NOT_FOUND, [])
        # Closing: answered sessionless, and the session is gone.
        closed = await client.call(session_fetch(wanted, session_id=sid, epoch=-1), 11)
        assert closed.session_id == 0 and sid not in c.broker(1).fetch_sessions.sessions


async def test_idle_followers_stay_in_the_isr_while_their_fetches_skip_unchanged_partitions():
    async with running_cluster(3, static=FAST) as c:  # replica.lag.time.max.ms = 800
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        await produce(client, 3, 2)
        await wait_for(lambda: in_sync(c, 3, 2))
        before = trio.current_time()
        await trio.sleep(2.5)  # three lag periods of incremental rounds that change nothing
        leaders = replicas(c, 1)
        # Each round still counts as a fetch by both followers on every partition.
        assert all(p.followers[f].last_fetch_time > before for p in leaders for f in (2, 3))
        assert all(p.isr == (1, 2, 3) and p.isr_shrinks == 0 for p in leaders)
        assert c.broker(1).fetch_sessions.incremental_fetches >= 10
        sessions = c.broker(1).fetch_sessions.sessions.values()
        assert all(cached.served is not None for s in sessions for cached in s.partitions.values())
