"""OffsetForLeaderEpoch v0-3: the end offset of a leader epoch on the leader's log (KIP-101/279).

A follower (or a consumer validating its position, KIP-320) asks where epoch E
ended; the answer is (largest epoch <= E, the start offset of the next epoch
or the log end). Served by the leader only; a stale current_leader_epoch is
fenced, a newer one is unknown here yet.
"""
from __future__ import annotations

from broker.authorization import cluster_allowed, topic_allowed
from broker.handlers.fetch import check_leader_epoch
from metadata.acls import AclOperation
from broker.request_caps import Pacer
from wire.error_codes import ErrorCode
from wire.protocol import OffsetForLeaderEpochResponse

__all__ = ["handle", "error_response"]

R = OffsetForLeaderEpochResponse
CONSUMER_REPLICA_ID = -1  # v0-2 requests (replica id -2) come from followers only: CLUSTER_ACTION


def _error(index: int, code: int) -> R.EpochEndOffset:
    return R.EpochEndOffset(error_code=code, partition=index, leader_epoch=-1, end_offset=-1)


async def handle(broker, header, request) -> OffsetForLeaderEpochResponse:
    deadline = broker.env.now() + broker.config.replica_apply_timeout_s
    if request.replica_id != CONSUMER_REPLICA_ID and not cluster_allowed(broker, AclOperation.CLUSTER_ACTION):
        return error_response(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    topics = []
    pacer = Pacer()
    for topic in request.topics:
        if not topic_allowed(broker, AclOperation.DESCRIBE, topic.topic):
            topics.append(R.OffsetForLeaderTopicResult(topic=topic.topic, partitions=[
                _error(p.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED) for p in topic.partitions]))
            continue
        parts = []
        for p in topic.partitions:
            await pacer.step()
            found = await broker.leader_partition(topic.topic, p.partition, deadline)
            if isinstance(found, int):
                parts.append(_error(p.partition, found))
                continue
            code = check_leader_epoch(p.current_leader_epoch, found.leader_epoch)
            if code:
                parts.append(_error(p.partition, code))
                continue
            epoch, end_offset = found.log.end_offset_for_epoch(p.leader_epoch)
            parts.append(R.EpochEndOffset(error_code=ErrorCode.NONE, partition=p.partition,
                                          leader_epoch=epoch, end_offset=end_offset))
        topics.append(R.OffsetForLeaderTopicResult(topic=topic.topic, partitions=parts))
    return R(throttle_time_ms=0, topics=topics)


def error_response(broker, header, request, code: int) -> OffsetForLeaderEpochResponse:
    return R(throttle_time_ms=0, topics=[R.OffsetForLeaderTopicResult(
        topic=t.topic, partitions=[_error(p.partition, code) for p in t.partitions]) for t in request.topics])
