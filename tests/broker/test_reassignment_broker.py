"""Reassignment and leader election through the Kafka port, with real replication in-process."""
from __future__ import annotations

from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_replication import FAST, log_bytes, make_topic, part, produce, wait_for
from wire.error_codes import ErrorCode as E
from wire.protocol import (
    AlterPartitionReassignmentsRequest as Alter, ElectLeadersRequest as Elect,
    ListPartitionReassignmentsRequest as List,
)


def registration(c, topic="t"):
    return c.controller.image.topics_by_name[topic].partitions[0]


def alter(target):
    return Alter(timeout_ms=5000, topics=[Alter.ReassignableTopic(name="t", partitions=[
        Alter.ReassignablePartition(partition_index=0, replicas=target)])])


async def test_moving_a_partition_copies_its_log_moves_leadership_and_deletes_the_old_replica():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c, replicas=(1, 2))
        c1 = await RawClient.connect(c.broker(1).port)
        for _ in range(3):
            assert (await produce(c1, B.batch(4))).error_code == E.NONE
        r = await c1.call(alter([2, 3]), 0)
        assert r.error_code == E.NONE and r.responses[0].partitions[0].error_code == E.NONE
        await wait_for(lambda: registration(c).replicas == (2, 3), what="reassignment completes")
        reg = registration(c)
        assert reg.leader == 2 and set(reg.isr) == {2, 3} and reg.adding_replicas == ()
        await wait_for(lambda: c.broker(1).replicas.get("t", 0) is None)
        assert c.broker(1).log_manager.get_log("t", 0) is None  # the removed replica's log is gone
        await wait_for(lambda: part(c, 3).log_end_offset == 12)
        assert log_bytes(c, 3, 12) == log_bytes(c, 2, 12)
        c2 = await RawClient.connect(c.broker(2).port)
        assert (await produce(c2, B.batch(1))).error_code == E.NONE
        listed = await c2.call(List(timeout_ms=5000, topics=None), 0)
        assert (listed.error_code, listed.topics) == (E.NONE, [])


async def test_cancel_lists_and_reverts_a_reassignment_that_cannot_finish():
    async with running_cluster(3, static=FAST) as c:
        await make_topic(c, replicas=(1, 2))
        await c.stop(3)  # the adding replica never catches up
        c1 = await RawClient.connect(c.broker(1).port)
        assert (await c1.call(alter([1, 2, 3]), 0)).error_code == E.NONE
        listed = await c1.call(List(timeout_ms=5000, topics=None), 0)
        [ongoing] = listed.topics[0].partitions
        assert (ongoing.replicas, ongoing.adding_replicas, ongoing.removing_replicas) == ([1, 2, 3], [3], [])
        r = await c1.call(alter(None), 0)
        assert r.responses[0].partitions[0].error_code == E.NONE
        assert registration(c).replicas == (1, 2) and registration(c).adding_replicas == ()
        again = await c1.call(alter(None), 0)
        assert again.responses[0].partitions[0].error_code == E.NO_REASSIGNMENT_IN_PROGRESS


async def test_preferred_election_over_the_kafka_port():
    async with running_cluster(2, static=FAST) as c:
        await make_topic(c, replicas=(1, 2))
        await wait_for(lambda: len(registration(c).isr) == 2)
        c.controller.fence(1)  # leadership moves to 2
        c.controller.unfence(1)
        await wait_for(lambda: set(registration(c).isr) == {1, 2})
        c2 = await RawClient.connect(c.broker(2).port)
        req = Elect(election_type=0, timeout_ms=5000, topic_partitions=[
            Elect.TopicPartitions(topic="t", partitions=[0, 5])])
        r = await c2.call(req, 2)
        got = {p.partition_id: p.error_code for p in r.replica_election_results[0].partition_result}
        assert got == {0: E.NONE, 5: E.UNKNOWN_TOPIC_OR_PARTITION} and registration(c).leader == 1
        r = await c2.call(req, 2)
        got = {p.partition_id: p.error_code for p in r.replica_election_results[0].partition_result}
        assert got[0] == E.ELECTION_NOT_NEEDED
