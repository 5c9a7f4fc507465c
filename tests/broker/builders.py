"""Concise request builders for broker tests."""
from __future__ import annotations

from wire.protocol import (
    CreateTopicsRequest, DeleteTopicsRequest, FetchRequest, ListOffsetsRequest, MetadataRequest,
    OffsetForLeaderEpochRequest, ProduceRequest,
)
from wire.records import SimpleRecord, build_batch

F = FetchRequest


def batch(n: int = 3, *, value_size: int = 8, timestamp: int | None = None, **kw) -> bytes:
    return build_batch([SimpleRecord(b"k%d" % i, bytes([65 + i % 26]) * value_size, timestamp=timestamp)
                        for i in range(n)], **kw)


def produce(topic: str, partition: int, records, *, acks: int = 1, timeout_ms: int = 5000,
            extra: dict | None = None) -> ProduceRequest:
    parts = {partition: records, **(extra or {})}
    return ProduceRequest(transactional_id=None, acks=acks, timeout_ms=timeout_ms, topic_data=[
        ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.PartitionProduceData(index=p, records=r) for p, r in parts.items()])])


def fetch(wanted, *, max_wait_ms: int = 0, min_bytes: int = 0, max_bytes: int = 1 << 20,
          partition_max_bytes: int = 1 << 20, isolation_level: int = 0, epoch: int = -1,
          replica_id: int = -1) -> FetchRequest:
    """wanted: [(topic, partition, offset)]"""
    topics: dict[str, list] = {}
    for topic, partition, offset in wanted:
        topics.setdefault(topic, []).append(F.FetchPartition(
            partition=partition, current_leader_epoch=epoch, fetch_offset=offset, log_start_offset=-1,
            partition_max_bytes=partition_max_bytes))
    return F(replica_id=replica_id, max_wait_ms=max_wait_ms, min_bytes=min_bytes, max_bytes=max_bytes,
             isolation_level=isolation_level, session_id=0, session_epoch=-1,
             topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
             forgotten_topics_data=[], rack_id="")


def create_topic(name: str, partitions: int = 1, rf: int = 1, *, configs=None, assignments=None):
    C = CreateTopicsRequest
    return C(topics=[C.CreatableTopic(
        name=name, num_partitions=-1 if assignments else partitions, replication_factor=-1 if assignments else rf,
        assignments=[C.CreatableReplicaAssignment(partition_index=i, broker_ids=list(a))
                     for i, a in enumerate(assignments or [])],
        configs=[C.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()])],
        timeout_ms=5000, validate_only=False)


def delete_topics(*names: str) -> DeleteTopicsRequest:
    return DeleteTopicsRequest(topic_names=list(names), timeout_ms=5000)


def list_offsets(topic: str, partition: int, timestamp: int, *, isolation_level: int = 0) -> ListOffsetsRequest:
    L = ListOffsetsRequest
    return L(replica_id=-1, isolation_level=isolation_level, topics=[L.ListOffsetsTopic(
        name=topic, partitions=[L.ListOffsetsPartition(partition_index=partition, timestamp=timestamp)])])


def metadata(*names: str, all_topics: bool = False, auto_create: bool = True) -> MetadataRequest:
    return MetadataRequest(topics=None if all_topics else [MetadataRequest.MetadataRequestTopic(name=n)
                                                           for n in names],
                           allow_auto_topic_creation=auto_create)


def offset_for_epoch(topic: str, partition: int, epoch: int, current: int = -1):
    O = OffsetForLeaderEpochRequest
    return O(replica_id=-1, topics=[O.OffsetForLeaderTopic(topic=topic, partitions=[
        O.OffsetForLeaderPartition(partition=partition, current_leader_epoch=current, leader_epoch=epoch)])])


def one_partition(produce_or_fetch_response):
    """The single partition result of a one-partition Produce/Fetch response."""
    resp = produce_or_fetch_response
    if hasattr(resp.responses[0], "partition_responses"):
        return resp.responses[0].partition_responses[0]
    return resp.responses[0].partitions[0]
