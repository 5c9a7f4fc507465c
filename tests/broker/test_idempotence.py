"""The idempotent producer on real brokers (in-process, raw protocol): retries answered with
their first offsets, sequence and epoch errors, state rebuilt from the log after a restart
and on a new leader after a leader change."""
from __future__ import annotations

import trio

from broker.controller_channel import CreatableTopic
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.error_codes import ErrorCode as E
from wire.protocol import InitProducerIdRequest
from wire.records import SimpleRecord, build_batch

BIG = b"x" * 100_000  # four records of it per batch: a segment roll every few batches
FAST = {"replica.lag.time.max.ms": "2000", "replica.fetch.backoff.ms": "50", "replica.fetch.wait.max.ms": "100"}


def batch(pid, seq, n=2, epoch=0, tag=b""):
    return build_batch([SimpleRecord(b"k", b"v%d" % (seq + i) + tag) for i in range(n)],
                       producer_id=pid, producer_epoch=epoch, base_sequence=seq)


async def produce(client, records, acks=-1):
    return B.one_partition(await client.call(B.produce("t", 0, records, acks=acks), 8, timeout=30))


async def producer_id(client):
    resp = await client.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1)
    assert resp.error_code == 0
    return resp.producer_id


async def make_topic(c, replicas=(1,), configs=None):
    reply = await c.controller.create_topics([CreatableTopic("t", assignments={0: replicas},
                                                             configs=dict(configs or {}))])
    assert reply.results[0].error == E.NONE, reply
    await c.settle()


def leo(c, node):
    return c.broker(node).replicas.get("t", 0).log_end_offset


async def test_a_retried_batch_is_answered_with_its_first_offset_and_written_once():
    async with running_cluster(1) as c:
        await make_topic(c)
        client = await RawClient.connect(c.broker(1).port)
        pid = await producer_id(client)
        answers = [await produce(client, batch(pid, seq)) for seq in (0, 2, 4)]
        assert [(a.error_code, a.base_offset) for a in answers] == [(0, 0), (0, 2), (0, 4)]
        for seq, offset in ((4, 4), (2, 2)):  # the last 5 batches are remembered, not only the last
            again = await produce(client, batch(pid, seq))
            assert (again.error_code, again.base_offset) == (E.NONE, offset)
        assert leo(c, 1) == 6
        gap = await produce(client, batch(pid, 9))
        assert gap.error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER and gap.base_offset == -1
        assert (await produce(client, batch(pid, 6))).base_offset == 6
        # A new epoch restarts the sequence at 0; the old epoch is fenced from then on.
        assert (await produce(client, batch(pid, 1, epoch=1))).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert (await produce(client, batch(pid, 0, epoch=1))).error_code == E.NONE
        assert (await produce(client, batch(pid, 8, epoch=0))).error_code == E.INVALID_PRODUCER_EPOCH
        # A producer this partition has never seen must start at sequence 0.
        assert (await produce(client, batch(pid + 1, 5))).error_code == E.UNKNOWN_PRODUCER_ID
        # Plain (non-idempotent) batches are untouched by all this.
        assert (await produce(client, B.batch(2))).error_code == E.NONE
        assert leo(c, 1) == 12


async def test_producer_state_is_rebuilt_from_the_log_and_snapshot_after_a_restart():
    async with running_cluster(1) as c:
        await make_topic(c, configs={"segment.bytes": str(1 << 20)})  # the smallest segments: several rolls
        client = await RawClient.connect(c.broker(1).port)
        pid = await producer_id(client)
        offsets = {}
        for seq in range(0, 40, 4):
            offsets[seq] = (await produce(client, batch(pid, seq, n=4, tag=BIG))).base_offset
        plog = c.broker(1).replicas.get("t", 0).log
        assert len(plog.producer_snapshots.offsets()) >= 2 and len(plog.segments) >= 3
        await c.stop(1)
        await c.restart(1)
        client = await RawClient.connect(c.broker(1).port)
        states = c.broker(1).producer_states
        again = await produce(client, batch(pid, 36, n=4, tag=BIG))
        assert (again.error_code, again.base_offset) == (E.NONE, offsets[36])
        assert states.rebuilds == 1
        assert (await produce(client, batch(pid, 44))).error_code == E.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert (await produce(client, batch(pid, 40))).base_offset == 40


async def test_a_new_leader_knows_the_producers_of_the_replicated_log():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c, replicas=(1, 2, 3), configs={"min.insync.replicas": "2"})
        client = await RawClient.connect(c.broker(1).port)
        pid = await producer_id(client)
        for seq in (0, 2, 4):
            assert (await produce(client, batch(pid, seq))).error_code == E.NONE
        with trio.fail_after(10):  # every replica has the batches
            while min(leo(c, n) for n in (2, 3)) < 6:
                await trio.sleep(0.01)
        await c.stop(1)
        c.controller.fence(1)
        await c.settle()
        leader = c.controller.image.topics_by_name["t"].partitions[0].leader
        assert leader in (2, 3)
        client = await RawClient.connect(c.broker(leader).port)
        with trio.fail_after(10):
            while True:  # the retried last batch (its answer was lost with the old leader)
                retry = await produce(client, batch(pid, 4))
                if retry.error_code != E.NOT_LEADER_OR_FOLLOWER:
                    break
                await trio.sleep(0.02)
        assert (retry.error_code, retry.base_offset) == (E.NONE, 4)
        assert (await produce(client, batch(pid, 6))).base_offset == 6
        assert leo(c, leader) == 8
