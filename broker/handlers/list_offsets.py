"""ListOffsets v1-3: earliest (-2), latest (-1), max timestamp (-3), or the first offset
whose timestamp is at or after a given time.

Consumers (replica_id -1) only see offsets below the high watermark (the last
stable offset for read_committed), as in Kafka; -1 answers that bound.
"""
from __future__ import annotations

from broker.authorization import topic_allowed
from metadata.acls import AclOperation
from broker.request_caps import Pacer
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP
from wire.error_codes import ErrorCode
from wire.protocol import ListOffsetsResponse

__all__ = ["handle", "error_response"]

R = ListOffsetsResponse
READ_COMMITTED = 1
DEBUGGING_REPLICA_ID = -2


def _error(index: int, code: int) -> R.ListOffsetsPartitionResponse:
    return R.ListOffsetsPartitionResponse(partition_index=index, error_code=code, timestamp=-1, offset=-1)


async def handle(broker, header, request) -> ListOffsetsResponse:
    deadline = broker.env.now() + broker.config.replica_apply_timeout_s
    committed = header.api_version >= 2 and request.isolation_level == READ_COMMITTED
    topics = []
    pacer = Pacer()
    for topic in request.topics:
        if not topic_allowed(broker, AclOperation.DESCRIBE, topic.name):
            topics.append(R.ListOffsetsTopicResponse(name=topic.name, partitions=[
                _error(p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic.partitions]))
            continue
        parts = []
        for p in topic.partitions:
            await pacer.step()
            found = await broker.leader_partition(topic.name, p.partition_index, deadline)
            if isinstance(found, int):
                parts.append(_error(p.partition_index, found))
                continue
            parts.append(_lookup(found, p, request.replica_id, committed))
        topics.append(R.ListOffsetsTopicResponse(name=topic.name, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def _lookup(partition, p, replica_id: int, committed: bool) -> R.ListOffsetsPartitionResponse:
    consumer = replica_id < 0 and replica_id != DEBUGGING_REPLICA_ID
    if consumer and partition.high_watermark < partition.leader_epoch_start:
        # A new leader learns the HW from its followers' fetches: until it reaches the start of
        # its epoch it may lag the old leader's, so "latest" could hide acknowledged records.
        # Kafka answers OFFSET_NOT_AVAILABLE (retriable) then too.
        return _error(p.partition_index, ErrorCode.OFFSET_NOT_AVAILABLE)
    if not consumer:
        bound = partition.log_end_offset
    else:
        bound = partition.last_stable_offset if committed else partition.high_watermark
    log = partition.log
    if p.timestamp == LATEST_TIMESTAMP:
        return R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.NONE,
                                              timestamp=-1, offset=bound)
    if p.timestamp == EARLIEST_TIMESTAMP:
        return R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.NONE,
                                              timestamp=-1, offset=log.log_start_offset)
    if p.timestamp < 0 and p.timestamp != MAX_TIMESTAMP:
        return _error(p.partition_index, ErrorCode.INVALID_REQUEST)
    found = log.offset_for_timestamp(p.timestamp)
    if found is None or found.offset >= bound:
        return R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.NONE,
                                              timestamp=-1, offset=-1)
    return R.ListOffsetsPartitionResponse(partition_index=p.partition_index, error_code=ErrorCode.NONE,
                                          timestamp=found.timestamp, offset=found.offset)


def error_response(broker, header, request, code: int) -> ListOffsetsResponse:
    return R(throttle_time_ms=0, topics=[R.ListOffsetsTopicResponse(
        name=t.name, partitions=[_error(p.partition_index, code) for p in t.partitions]) for t in request.topics])
