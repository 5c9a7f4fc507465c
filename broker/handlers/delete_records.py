"""DeleteRecords v0-2: move partitions' log start offsets up (Kafka's kafka-delete-records).

Per partition, as Kafka's ReplicaManager.deleteRecords: DELETE on the topic
(TOPIC_AUTHORIZATION_FAILED), the partition must exist (UNKNOWN_TOPIC_OR_PARTITION) and be
led here (NOT_LEADER_OR_FOLLOWER), internal topics are refused (INVALID_TOPIC_EXCEPTION),
so is a topic whose cleanup.policy has no `delete` (POLICY_VIOLATION), and the offset must
lie within [0, high watermark] or be -1, meaning the high watermark (else
OFFSET_OUT_OF_RANGE). The leader moves its log start (checkpointed before answering);
followers follow it through the log start offset in their fetch answers. The answer waits,
as Kafka's DelayedDeleteRecords, until the low watermark — the lowest log start over the
leader and its followers on live brokers — reaches the offset (REQUEST_TIMED_OUT after the
request's timeout) and reports it. Whole segments below the new start go at the next
retention pass.
"""
from __future__ import annotations

from broker.authorization import topic_allowed
from broker.handlers.metadata import INTERNAL_TOPICS
from broker.partition import Partition
from metadata.acls import AclOperation
from storage.log import OffsetOutOfRangeError
from wire.error_codes import ErrorCode
from wire.protocol import DeleteRecordsResponse

__all__ = ["handle", "error_response"]

HIGH_WATERMARK = -1  # DeleteRecordsRequest.HIGH_WATERMARK: delete everything committed


async def handle(broker, header, request) -> DeleteRecordsResponse:
    R = DeleteRecordsResponse
    deadline = broker.env.now() + max(request.timeout_ms, 0) / 1000
    results: dict[tuple[str, int], list] = {}  # (topic, partition) -> [low watermark, error]
    waits: list[tuple[Partition, int, list]] = []
    moved = False
    for topic in request.topics:
        allowed = topic_allowed(broker, AclOperation.DELETE, topic.name)
        for p in topic.partitions:
            slot = results[(topic.name, p.partition_index)] = [-1, ErrorCode.NONE]
            if not allowed:
                slot[1] = ErrorCode.TOPIC_AUTHORIZATION_FAILED
                continue
            found = await _deletable(broker, topic.name, p.partition_index, deadline)
            if isinstance(found, int):
                slot[1] = found
                continue
            offset = found.high_watermark if p.offset == HIGH_WATERMARK else p.offset
            if offset < 0:
                slot[1] = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            try:
                before = found.log.log_start_offset
                found.log.delete_records_before(offset)
            except OffsetOutOfRangeError:
                slot[1] = ErrorCode.OFFSET_OUT_OF_RANGE
                continue
            moved |= found.log.log_start_offset != before
            waits.append((found, offset, slot))
    if moved:
        await broker.log_manager.checkpoint()  # a restart must not bring deleted records back
    for partition, offset, slot in waits:
        slot[0], slot[1] = await _low_watermark_reaches(broker, partition, offset, deadline)
    by_topic: dict[str, list] = {}
    for (name, index), (low, error) in results.items():
        by_topic.setdefault(name, []).append(R.DeleteRecordsPartitionResult(
            partition_index=index, low_watermark=low, error_code=error))
    return R(throttle_time_ms=0, topics=[R.DeleteRecordsTopicResult(name=n, partitions=ps)
                                         for n, ps in by_topic.items()])


async def _deletable(broker, topic: str, index: int, deadline: float) -> Partition | int:
    found = await broker.leader_partition(topic, index, deadline)
    if isinstance(found, int):
        return found
    if topic in INTERNAL_TOPICS:
        return ErrorCode.INVALID_TOPIC_EXCEPTION
    if "delete" not in {s.strip() for s in found.log.config.cleanup_policy.split(",")}:
        return ErrorCode.POLICY_VIOLATION  # a compacted log keeps its records by key
    return found


async def _low_watermark_reaches(broker, partition: Partition, offset: int, deadline: float) -> tuple[int, int]:
    """(low watermark, error) once every live replica's log starts at `offset` or later."""
    while True:
        current = broker.replicas.get(*partition.key)
        if current is not partition or not partition.is_leader:
            return -1, ErrorCode.NOT_LEADER_OR_FOLLOWER
        low = partition.low_watermark()
        if low >= offset:
            return low, ErrorCode.NONE
        if broker.env.now() >= deadline:
            return low, ErrorCode.REQUEST_TIMED_OUT
        await broker.purgatory.wait([partition.key], deadline)


def error_response(broker, header, request, code: int) -> DeleteRecordsResponse:
    R = DeleteRecordsResponse
    return R(throttle_time_ms=0, topics=[R.DeleteRecordsTopicResult(name=t.name, partitions=[
        R.DeleteRecordsPartitionResult(partition_index=p.partition_index, low_watermark=-1, error_code=code)
        for p in t.partitions]) for t in request.topics])
