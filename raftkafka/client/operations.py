"""Cluster operations over the Kafka protocol: UnregisterBroker, DeleteRecords, DescribeLogDirs,
DescribeQuorum, AddRaftVoter, RemoveRaftVoter (what kafka-cluster, kafka-delete-records,
kafka-log-dirs and kafka-metadata-quorum send). Each takes the admin's `Cluster`.
"""
from __future__ import annotations

from dataclasses import dataclass

from raftkafka.client.cluster import Cluster
from raftkafka.client.errors import KafkaError, KafkaTimeoutError, error_for
from wire.error_codes import ErrorCode
from wire.kafka_uuid import uuid_from_str
from wire.protocol import (
    AddRaftVoterRequest, DeleteRecordsRequest, DescribeLogDirsRequest, DescribeQuorumRequest, RemoveRaftVoterRequest,
    UnregisterBrokerRequest,
)

__all__ = ["unregister_broker", "delete_records", "describe_log_dirs", "LogDirInfo", "describe_quorum",
           "METADATA_TOPIC", "add_raft_voter", "remove_raft_voter"]

METADATA_TOPIC = "__cluster_metadata"


async def unregister_broker(cluster: Cluster, broker_id: int) -> None:
    """Decommission `broker_id` (raises the broker's error, e.g. BROKER_ID_NOT_REGISTERED)."""
    response = await cluster.request_any(UnregisterBrokerRequest(broker_id=broker_id))
    if response.error_code:
        raise error_for(response.error_code, response.error_message, f"UnregisterBroker {broker_id}")


async def delete_records(cluster: Cluster, offsets: dict[tuple[str, int], int], *, timeout_ms: int = 30_000,
                         ) -> dict[tuple[str, int], int | KafkaError]:
    """{tp: offset (-1: the high watermark)} → {tp: low watermark, or the partition's error}.
    Each partition goes to its leader; leadership changes are retried until the timeout."""
    R = DeleteRecordsRequest
    cluster.add_topics({t for t, _ in offsets})
    pending = dict(offsets)
    out: dict[tuple[str, int], int | KafkaError] = {}
    deadline = cluster.env.now() + timeout_ms / 1000
    while pending:
        await cluster.refresh()
        by_leader: dict[int, dict[str, list]] = {}
        for (topic, partition), offset in sorted(pending.items()):
            info = cluster.topics.get(topic)
            leader = cluster.leader(topic, partition)
            if info is None or info.error == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION or partition not in info.partitions:
                out[(topic, partition)] = error_for(ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                                                    context=f"{topic}-{partition}")
                del pending[(topic, partition)]
            elif leader >= 0:
                by_leader.setdefault(leader, {}).setdefault(topic, []).append(
                    R.DeleteRecordsPartition(partition_index=partition, offset=offset))
        for leader, topics in sorted(by_leader.items()):
            left_ms = max(1, int((deadline - cluster.env.now()) * 1000))
            try:
                response = await cluster.send(leader, R(timeout_ms=left_ms, topics=[
                    R.DeleteRecordsTopic(name=t, partitions=ps) for t, ps in sorted(topics.items())]))
            except KafkaError as exc:
                if not exc.retriable:
                    raise
                continue
            for t in response.topics:
                for p in t.partitions:
                    tp = (t.name, p.partition_index)
                    if tp not in pending:
                        continue
                    error = error_for(p.error_code, context=f"{t.name}-{p.partition_index}") if p.error_code else None
                    if error is not None and error.retriable and cluster.env.now() < deadline:
                        continue  # a moved leader: ask the new one
                    out[tp] = p.low_watermark if error is None else error
                    del pending[tp]
        if pending:
            if cluster.env.now() >= deadline:
                for tp in pending:
                    out[tp] = KafkaTimeoutError(f"DeleteRecords {tp[0]}-{tp[1]}: no leader answered in time")
                break
            await cluster.env.sleep(cluster.retry_backoff)
    return out


@dataclass(frozen=True)
class LogDirInfo:
    path: str
    error: KafkaError | None
    partitions: dict[tuple[str, int], tuple[int, int, bool]]  # tp -> (size, offset lag, is future)
    total_bytes: int = -1
    usable_bytes: int = -1


async def describe_log_dirs(cluster: Cluster, broker_id: int, topics: dict[str, list[int]] | None = None,
                            ) -> list[LogDirInfo]:
    """One broker's log dirs (DescribeLogDirs goes to each broker: it answers for its own)."""
    R = DescribeLogDirsRequest
    request = R(topics=None if topics is None else [R.DescribableLogDirTopic(topic=t, partitions=ps)
                                                    for t, ps in sorted(topics.items())])
    response = await cluster.send(broker_id, request)
    if getattr(response, "error_code", 0):
        raise error_for(response.error_code, context=f"DescribeLogDirs on broker {broker_id}")
    return [LogDirInfo(r.log_dir, error_for(r.error_code, context=r.log_dir) if r.error_code else None,
                       {(t.name, p.partition_index): (p.partition_size, p.offset_lag, p.is_future_key)
                        for t in r.topics for p in t.partitions}, r.total_bytes, r.usable_bytes)
            for r in response.results]


async def describe_quorum(cluster: Cluster):
    """The metadata quorum's state (DescribeQuorumResponse.PartitionData of __cluster_metadata-0)
    and the response's controller nodes (v2)."""
    R = DescribeQuorumRequest
    response = await cluster.request_any(R(topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[
        R.PartitionData(partition_index=0)])]))
    if response.error_code:
        raise error_for(response.error_code, response.error_message, "DescribeQuorum")
    partition = response.topics[0].partitions[0]
    if partition.error_code:
        raise error_for(partition.error_code, partition.error_message, "DescribeQuorum")
    return partition, response.nodes


async def add_raft_voter(cluster: Cluster, voter_id: int, directory_id: str, listeners: list[tuple[str, str, int]],
                         *, timeout_ms: int = 30_000) -> None:
    """Add controller (voter_id, directory_id) reachable on listeners [(name, host, port)] to the
    metadata quorum (KIP-853); returns once the change is committed, raises the quorum's error."""
    R = AddRaftVoterRequest
    request = R(cluster_id=None, timeout_ms=timeout_ms, voter_id=voter_id,
                voter_directory_id=uuid_from_str(directory_id),
                listeners=[R.Listener(name=n, host=h, port=p) for n, h, p in listeners])
    response = await cluster.request_any(request, timeout=timeout_ms / 1000)
    if response.error_code:
        raise error_for(response.error_code, response.error_message, f"AddRaftVoter {voter_id}")


async def remove_raft_voter(cluster: Cluster, voter_id: int, directory_id: str) -> None:
    """Remove controller (voter_id, directory_id) from the metadata quorum, once committed."""
    request = RemoveRaftVoterRequest(cluster_id=None, voter_id=voter_id,
                                     voter_directory_id=uuid_from_str(directory_id))
    response = await cluster.request_any(request, timeout=30.0)
    if response.error_code:
        raise error_for(response.error_code, response.error_message, f"RemoveRaftVoter {voter_id}")
