"""DescribeLogDirs v0-4: this broker's log dirs and, per partition, its size and offset lag.

As Kafka's ReplicaManager.describeLogDirs: DESCRIBE on the cluster (else, from v3, the
top-level CLUSTER_AUTHORIZATION_FAILED and no dirs); `topics` null means every partition;
an offline dir answers KAFKA_STORAGE_ERROR and no partitions; the offset lag is how far the
log end is below the high watermark (a follower catching up), never negative. This broker
moves no replicas between its dirs, so no partition is a future replica. The disk's total
and usable bytes are not known to the node (-1, Kafka's "unknown").
"""
from __future__ import annotations

from broker.authorization import cluster_allowed
from metadata.acls import AclOperation
from wire.error_codes import ErrorCode
from wire.protocol import DescribeLogDirsResponse

__all__ = ["handle", "error_response"]


async def handle(broker, header, request) -> DescribeLogDirsResponse:
    if not cluster_allowed(broker, AclOperation.DESCRIBE):
        return error_response(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    R = DescribeLogDirsResponse
    manager = broker.log_manager
    wanted = None if request.topics is None else {}
    for t in request.topics or ():
        wanted.setdefault(t.topic, set()).update(t.partitions)
    by_dir: dict[str, dict[str, list]] = {d: {} for d in manager.data_dirs}
    for (topic, index), plog in manager.all_logs():
        if wanted is not None and index not in wanted.get(topic, ()):
            continue
        data_dir = manager.data_dir_of(topic, index)
        if data_dir not in by_dir or manager.failures.is_offline(data_dir):
            continue
        by_dir[data_dir].setdefault(topic, []).append(R.DescribeLogDirsPartition(
            partition_index=index, partition_size=plog.size_in_bytes,
            offset_lag=max(plog.high_watermark - plog.log_end_offset, 0), is_future_key=False))
    results = []
    for data_dir, topics in by_dir.items():
        offline = manager.failures.is_offline(data_dir)
        results.append(R.DescribeLogDirsResult(
            error_code=ErrorCode.KAFKA_STORAGE_ERROR if offline else ErrorCode.NONE, log_dir=data_dir,
            topics=[R.DescribeLogDirsTopic(name=name, partitions=parts) for name, parts in sorted(topics.items())]))
    return R(throttle_time_ms=0, error_code=ErrorCode.NONE, results=results)


def error_response(broker, header, request, code: int) -> DescribeLogDirsResponse:
    return DescribeLogDirsResponse(throttle_time_ms=0, error_code=code, results=[])
