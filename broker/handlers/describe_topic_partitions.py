"""DescribeTopicPartitions (KIP-966): topics and their partitions a page at a time, with each
partition's eligible leader replicas (ELR) and last known ELR.

As Kafka's DescribeTopicPartitionsRequestHandler: no topics named means every topic the caller
may DESCRIBE (the others are never mentioned); named topics the caller may not describe answer
TOPIC_AUTHORIZATION_FAILED with a zero topic id, without saying whether they exist. Topics are
answered in name order from the cursor's topic on (a cursor naming a topic outside a given list
is INVALID_REQUEST), its first page from the cursor's partition. At most
min(response_partition_limit, 2000) partitions are answered; when a topic does not fit, the
response's next_cursor names where the next page starts. A named topic that does not exist
answers UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for an invalid name). Partitions are
never auto-created here, and a partition whose leader is not alive answers leader -1.
"""
from __future__ import annotations

from broker.authorization import authorized_operations, topic_allowed
from broker.handlers.metadata import INTERNAL_TOPICS, topic_name_error
from broker.request_caps import Pacer
from metadata.acls import AclOperation, ResourceType
from metadata.records import NO_LEADER
from wire.error_codes import ErrorCode
from wire.protocol import DescribeTopicPartitionsResponse

__all__ = ["handle", "error_response", "MAX_PARTITIONS_PER_RESPONSE"]

R = DescribeTopicPartitionsResponse
MAX_PARTITIONS_PER_RESPONSE = 2000  # Kafka's max.request.partition.size.limit default


async def handle(broker, header, request) -> DescribeTopicPartitionsResponse:
    image = broker.metadata.image
    cursor = request.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    every_topic = not request.topics
    wanted = image.topics_by_name if every_topic else {t.name for t in request.topics}
    if cursor is not None and not every_topic and cursor_topic not in wanted:
        return error_response(broker, header, request, ErrorCode.INVALID_REQUEST)
    alive = {b.node_id for b in broker.metadata.alive_brokers()}
    remaining = min(MAX_PARTITIONS_PER_RESPONSE, request.response_partition_limit)
    topics, refused = [], []
    next_cursor = None
    pacer = Pacer()
    for name in sorted(n for n in wanted if n >= cursor_topic):
        await pacer.step()
        if not topic_allowed(broker, AclOperation.DESCRIBE, name):
            if not every_topic:
                refused.append(R.DescribeTopicPartitionsResponseTopic(
                    error_code=ErrorCode.TOPIC_AUTHORIZATION_FAILED, name=name, partitions=[]))
            continue
        if remaining < 0:  # a negative limit: no partitions, but the refusals are still answered
            continue
        if remaining == 0:  # the previous topic filled the page exactly: the next one starts the next page
            next_cursor = R.NextCursor(topic_name=name, partition_index=0)
            break
        topic = image.topics_by_name.get(name)
        if topic is None:
            if not every_topic:
                topics.append(R.DescribeTopicPartitionsResponseTopic(
                    error_code=topic_name_error(name) or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, name=name,
                    is_internal=name in INTERNAL_TOPICS, partitions=[],
                    topic_authorized_operations=authorized_operations(broker, ResourceType.TOPIC, name)))
            continue
        start = cursor.partition_index if name == cursor_topic and cursor is not None else 0
        end = min(len(topic.partitions), start + remaining)
        partitions = [_partition(pid, topic.partitions[pid], alive)
                      for pid in range(start, end) if pid in topic.partitions]
        topics.append(R.DescribeTopicPartitionsResponseTopic(
            error_code=ErrorCode.NONE, name=name, topic_id=topic.topic_id, is_internal=name in INTERNAL_TOPICS,
            partitions=partitions, topic_authorized_operations=authorized_operations(broker, ResourceType.TOPIC, name)))
        if end < len(topic.partitions):
            next_cursor = R.NextCursor(topic_name=name, partition_index=end)
            break
        remaining -= len(partitions)
    return R(throttle_time_ms=0, topics=topics + refused, next_cursor=next_cursor)


def _partition(pid: int, reg, alive: set[int]):
    return R.DescribeTopicPartitionsResponsePartition(
        error_code=ErrorCode.NONE, partition_index=pid,
        leader_id=reg.leader if reg.leader in alive else NO_LEADER, leader_epoch=reg.leader_epoch,
        replica_nodes=list(reg.replicas), isr_nodes=list(reg.isr),
        eligible_leader_replicas=list(reg.eligible_leader_replicas), last_known_elr=list(reg.last_known_elr),
        offline_replicas=[r for r in reg.replicas if r not in alive])


def error_response(broker, header, request, code: int) -> DescribeTopicPartitionsResponse:
    return R(throttle_time_ms=0, topics=[R.DescribeTopicPartitionsResponseTopic(error_code=code, name=t.name,
                                                                                partitions=[])
                                         for t in request.topics])
