"""DescribeQuorum v0-2 on the Kafka port: the metadata quorum's state, asked of its Raft leader.

Kafka's brokers forward DescribeQuorum to the controllers; ours asks the Raft leader over
the controller channel and answers in Kafka's shape, so AdminClients get
kafka-metadata-quorum's view. DESCRIBE on the cluster (CLUSTER_AUTHORIZATION_FAILED); only
__cluster_metadata-0 exists (else the top-level UNKNOWN_TOPIC_OR_PARTITION, as Kafka's
KafkaRaftClient); no reachable leader is NOT_LEADER_OR_FOLLOWER on the partition. Times are
wall-clock ms: the leader reports each replica's last fetch as an age; a replica whose log
end was at the leader's end at that fetch counts as caught up then. Each replica's directory id
(KIP-853, v2) is a voter's as the voter set records it and an observer's as its fetches name it
(the zero UUID when unknown: a static voter that has not fetched yet).
"""
from __future__ import annotations

import uuid

from broker.authorization import cluster_allowed
from broker.controller_channel import ControllerUnavailableError
from metadata.acls import AclOperation
from wire.error_codes import ErrorCode
from wire.kafka_uuid import is_valid_uuid, uuid_from_str
from wire.protocol import DescribeQuorumResponse

__all__ = ["handle", "error_response", "quorum_partition", "METADATA_TOPIC"]

METADATA_TOPIC = "__cluster_metadata"
TIMEOUT_S = 10.0


async def handle(broker, header, request) -> DescribeQuorumResponse:
    R = DescribeQuorumResponse
    if not cluster_allowed(broker, AclOperation.DESCRIBE):
        return error_response(broker, header, request, ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    asked = [(t.topic_name, p.partition_index) for t in request.topics for p in t.partitions]
    if asked != [(METADATA_TOPIC, 0)]:
        return error_response(broker, header, request, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
    try:
        reply = await broker.controller.describe_quorum(timeout_s=TIMEOUT_S)
    except ControllerUnavailableError as exc:
        return _partition_error(ErrorCode.NOT_LEADER_OR_FOLLOWER, str(exc))
    if reply.error != ErrorCode.NONE:
        return _partition_error(reply.error, "no leader of the metadata quorum answered")
    listener = (broker.static.get("controller.listener.names") or "CONTROLLER").split(",")[0].strip()
    voters = broker.controller.controller_addresses()
    partition = quorum_partition(reply, broker.env.wall_ms())
    return R(error_code=ErrorCode.NONE, topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[partition])],
             nodes=[R.Node(node_id=n, listeners=[R.Listener(name=listener, host=host, port=port)])
                    for n, (host, port) in sorted(voters.items())])


def quorum_partition(reply, now_ms: int) -> DescribeQuorumResponse.PartitionData:
    """The Raft leader's DescribeQuorum answer (raft.messages) as Kafka's partition data,
    its fetch ages turned into wall-clock timestamps as of `now_ms`."""
    R = DescribeQuorumResponse
    leader_end = next((v.log_end_offset for v in reply.voters if v.replica_id == reply.leader_id), -1)

    def states(rows, kind):
        out = []
        for r in sorted(rows, key=lambda r: r.replica_id):
            fetched = -1 if r.last_fetch_age_ms < 0 else now_ms - r.last_fetch_age_ms
            if r.replica_id == reply.leader_id:
                fetched = now_ms  # the leader is always caught up with itself
            caught_up = fetched if 0 <= leader_end <= r.log_end_offset else -1
            directory = uuid_from_str(r.directory_id) if is_valid_uuid(r.directory_id) else uuid.UUID(int=0)
            out.append(kind(replica_id=r.replica_id, replica_directory_id=directory, log_end_offset=r.log_end_offset,
                            last_fetch_timestamp=fetched, last_caught_up_timestamp=caught_up))
        return out

    return R.PartitionData(
        partition_index=0, error_code=ErrorCode.NONE, leader_id=reply.leader_id, leader_epoch=reply.epoch,
        high_watermark=reply.high_watermark, current_voters=states(reply.voters, R.Voter),
        observers=states(reply.observers, R.Observer))


def _partition_error(code: int, message: str) -> DescribeQuorumResponse:
    R = DescribeQuorumResponse
    return R(error_code=ErrorCode.NONE, topics=[R.TopicData(topic_name=METADATA_TOPIC, partitions=[
        R.PartitionData(partition_index=0, error_code=code, error_message=message, leader_id=-1, leader_epoch=-1,
                        high_watermark=-1, current_voters=[], observers=[])])], nodes=[])


def error_response(broker, header, request, code: int) -> DescribeQuorumResponse:
    return DescribeQuorumResponse(error_code=code, topics=[], nodes=[])
