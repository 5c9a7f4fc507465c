"""DeleteRecords and DescribeLogDirs on in-process brokers: Kafka's error per partition, the
log start moving on the leader (checkpointed) and on the follower, the low watermark answered."""
from __future__ import annotations

import posixpath

from broker.controller_channel import CreatableTopic
from storage.log.checkpoints import LOG_START_OFFSET_CHECKPOINT, read_offsets
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.error_codes import ErrorCode as E
from wire.protocol import DeleteRecordsRequest as R, DescribeLogDirsRequest


def delete(offsets: dict[tuple[str, int], int], timeout_ms: int = 5000) -> R:
    topics: dict[str, list] = {}
    for (t, p), o in offsets.items():
        topics.setdefault(t, []).append(R.DeleteRecordsPartition(partition_index=p, offset=o))
    return R(timeout_ms=timeout_ms, topics=[R.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in topics.items()])


def answers(response) -> dict[tuple[str, int], tuple[int, int]]:
    return {(t.name, p.partition_index): (p.error_code, p.low_watermark) for t in response.topics for p in t.partitions}


async def test_delete_records_moves_the_log_start_on_leader_and_follower():
    async with running_cluster(2) as c:
        await c.controller.create_topics([CreatableTopic("t", 1, 2),
                                          CreatableTopic("kept", 1, 1, configs={"cleanup.policy": "compact"})])
        await c.settle()
        leader = c.controller.image.topic("t").partitions[0].leader
        follower = 3 - leader
        client = await RawClient.connect(c.broker(leader).port)
        assert B.one_partition(await client.call(B.produce("t", 0, B.batch(10), acks=-1), 8)).error_code == 0

        got = answers(await client.call(delete({("t", 0): 4, ("nope", 0): 1, ("t", 7): 1}), 2))
        assert got == {("t", 0): (E.NONE, 4), ("nope", 0): (E.UNKNOWN_TOPIC_OR_PARTITION, -1),
                       ("t", 7): (E.UNKNOWN_TOPIC_OR_PARTITION, -1)}
        assert c.broker(follower).replicas.get("t", 0).log.log_start_offset == 4  # answered once it had it
        assert answers(await client.call(delete({("t", 0): 11}), 2)) == {("t", 0): (E.OFFSET_OUT_OF_RANGE, -1)}
        assert answers(await client.call(delete({("t", 0): -5}), 2)) == {("t", 0): (E.OFFSET_OUT_OF_RANGE, -1)}
        assert answers(await client.call(delete({("t", 0): -1}), 2)) == {("t", 0): (E.NONE, 10)}  # -1: the HW
        assert answers(await client.call(delete({("t", 0): 3}), 2)) == {("t", 0): (E.NONE, 10)}  # never back

        broker = c.broker(leader)
        data_dir = broker.log_manager.data_dir_of("t", 0)
        assert read_offsets(broker.env.fs, posixpath.join(data_dir, LOG_START_OFFSET_CHECKPOINT))[("t", 0)] == 10
        other = await RawClient.connect(c.broker(follower).port)
        assert answers(await other.call(delete({("t", 0): 10}), 2)) == {("t", 0): (E.NOT_LEADER_OR_FOLLOWER, -1)}
        kept_leader = c.controller.image.topic("kept").partitions[0].leader
        kept = await RawClient.connect(c.broker(kept_leader).port)
        assert answers(await kept.call(delete({("kept", 0): 0}), 2)) == {("kept", 0): (E.POLICY_VIOLATION, -1)}


async def test_describe_log_dirs_sizes_and_filter():
    async with running_cluster(1) as c:
        await c.controller.create_topics([CreatableTopic("a", 2, 1), CreatableTopic("b", 1, 1)])
        await c.settle()
        client = await RawClient.connect(c.broker(1).port)
        await client.call(B.produce("a", 1, B.batch(5)), 8)
        everything = await client.call(DescribeLogDirsRequest(topics=None), 4)
        (result,) = everything.results
        assert everything.error_code == 0 and result.error_code == 0 and result.log_dir
        sizes = {(t.name, p.partition_index): p.partition_size for t in result.topics for p in t.partitions}
        assert set(sizes) == {("a", 0), ("a", 1), ("b", 0)} and sizes[("a", 1)] > sizes[("a", 0)]
        R2 = DescribeLogDirsRequest
        some = await client.call(R2(topics=[R2.DescribableLogDirTopic(topic="a", partitions=[1]),
                                            R2.DescribableLogDirTopic(topic="zzz", partitions=[0])]), 0)
        assert [(t.name, [p.partition_index for p in t.partitions]) for t in some.results[0].topics] == [("a", [1])]
