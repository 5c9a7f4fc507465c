"""The data path: Produce, Fetch, ListOffsets, Metadata, OffsetForLeaderEpoch.

Produce v10 answers NOT_LEADER_OR_FOLLOWER with the partition's current leader and that
leader's endpoint (KIP-951, tagged fields), so a client re-routes without a Metadata round.

Fetch v13+ names topics by id, and v16 carries the same leader hints as Produce v10.

Produce v0-2 are defined (not only rejected) so the broker can parse them and
answer UNSUPPORTED_VERSION per partition, as Kafka 4 does (KAFKA-18659).
OffsetForLeaderEpoch is what our own follower replicas send.
"""
from __future__ import annotations

from wire.protocol.message import request, response
from wire.protocol.schema import ArrayOf, F, FieldSpec, StructOf, BOOL, INT16, INT32, INT64, INT8, RECORDS, STRING, UUID

__all__ = [
    "ProduceRequest", "ProduceResponse", "FetchRequest", "FetchResponse", "ListOffsetsRequest",
    "ListOffsetsResponse", "MetadataRequest", "MetadataResponse", "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
]



def _current_leader(since: str, tag: int) -> FieldSpec:
    """KIP-951: the partition's leader as the answering broker knows it (tagged)."""
    return F("current_leader", StructOf("LeaderIdAndEpoch",
        F("leader_id", INT32, since, default=-1),
        F("leader_epoch", INT32, since, default=-1),
    ), since, tag=tag)


def _node_endpoints(since: str) -> FieldSpec:
    """KIP-951: the endpoints of the leaders named in `current_leader` fields (tagged)."""
    return F("node_endpoints", ArrayOf("NodeEndpoint",
        F("node_id", INT32, since),
        F("host", STRING, since),
        F("port", INT32, since),
        F("rack", STRING, since, nullable=since, default=None),
    ), since, tag=0)


ProduceRequest = request(0, "Produce", "0-10", flexible="9+", fields=[
    F("transactional_id", STRING, "3+", nullable="3+", default=None),
    F("acks", INT16),
    F("timeout_ms", INT32),
    F("topic_data", ArrayOf("TopicProduceData",
        F("name", STRING),
        F("partition_data", ArrayOf("PartitionProduceData",
            F("index", INT32),
            F("records", RECORDS, nullable="0+"),
        )),
    )),
])

ProduceResponse = response(0, "Produce", "0-10", flexible="9+", fields=[
    F("responses", ArrayOf("TopicProduceResponse",
        F("name", STRING),
        F("partition_responses", ArrayOf("PartitionProduceResponse",
            F("index", INT32),
            F("error_code", INT16),
            F("base_offset", INT64),
            F("log_append_time_ms", INT64, "2+", default=-1),
            F("log_start_offset", INT64, "5+", default=-1),
            F("record_errors", ArrayOf("BatchIndexAndErrorMessage",
                F("batch_index", INT32, "8+"),
                F("batch_index_error_message", STRING, "8+", nullable="8+", default=None),
            ), "8+"),
            F("error_message", STRING, "8+", nullable="8+", default=None),
            _current_leader("10+", tag=0),
        )),
    )),
    F("throttle_time_ms", INT32, "1+", default=0),
    _node_endpoints("10+"),
])

# Fetch v12 is flexible: a follower's last fetched epoch (KIP-595 divergence), answered with
# the diverging epoch, the current leader and a snapshot id (tagged); v13 names topics by id;
# v15 moves the replica id into the tagged replica state (KIP-903); v16 adds the endpoints of
# the leaders named in NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH answers (KIP-951).
FetchRequest = request(1, "Fetch", "4-16", flexible="12+", fields=[
    F("cluster_id", STRING, "12+", nullable="12+", default=None, tag=0),
    F("replica_id", INT32, "0-14", default=-1),
    F("replica_state", StructOf("ReplicaState",
        F("replica_id", INT32, "15+", default=-1),
        F("replica_epoch", INT64, "15+", default=-1),
    ), "15+", tag=1),
    F("max_wait_ms", INT32),
    F("min_bytes", INT32),
    F("max_bytes", INT32, "3+", default=2147483647),
    F("isolation_level", INT8, "4+", default=0),
    F("session_id", INT32, "7+", default=0),
    F("session_epoch", INT32, "7+", default=-1),
    F("topics", ArrayOf("FetchTopic",
        F("topic", STRING, "0-12"),
        F("topic_id", UUID, "13+"),
        F("partitions", ArrayOf("FetchPartition",
            F("partition", INT32),
            F("current_leader_epoch", INT32, "9+", default=-1),
            F("fetch_offset", INT64),
            F("last_fetched_epoch", INT32, "12+", default=-1),
            F("log_start_offset", INT64, "5+", default=-1),
            F("partition_max_bytes", INT32),
        )),
    )),
    F("forgotten_topics_data", ArrayOf("ForgottenTopic",
        F("topic", STRING, "7-12"),
        F("topic_id", UUID, "13+"),
        F("partitions", ArrayOf(INT32), "7+"),
    ), "7+"),
    F("rack_id", STRING, "11+", default=""),
])

FetchResponse = response(1, "Fetch", "4-16", flexible="12+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("error_code", INT16, "7+"),
    F("session_id", INT32, "7+", default=0),
    F("responses", ArrayOf("FetchableTopicResponse",
        F("topic", STRING, "0-12"),
        F("topic_id", UUID, "13+"),
        F("partitions", ArrayOf("PartitionData",
            F("partition_index", INT32),
            F("error_code", INT16),
            F("high_watermark", INT64),
            F("last_stable_offset", INT64, "4+", default=-1),
            F("log_start_offset", INT64, "5+", default=-1),
            F("diverging_epoch", StructOf("EpochEndOffset",
                F("epoch", INT32, "12+", default=-1),
                F("end_offset", INT64, "12+", default=-1),
            ), "12+", tag=0),
            _current_leader("12+", tag=1),
            F("snapshot_id", StructOf("SnapshotId",
                F("end_offset", INT64, "12+", default=-1),
                F("epoch", INT32, "12+", default=-1),
            ), "12+", tag=2),
            F("aborted_transactions", ArrayOf("AbortedTransaction",
                F("producer_id", INT64, "4+"),
                F("first_offset", INT64, "4+"),
            ), "4+", nullable="4+"),
            F("preferred_read_replica", INT32, "11+", default=-1),
            F("records", RECORDS, nullable="0+"),
        )),
    )),
    _node_endpoints("16+"),
])

ListOffsetsRequest = request(2, "ListOffsets", "1-3", flexible="6+", fields=[
    F("replica_id", INT32),
    F("isolation_level", INT8, "2+"),
    F("topics", ArrayOf("ListOffsetsTopic",
        F("name", STRING),
        F("partitions", ArrayOf("ListOffsetsPartition",
            F("partition_index", INT32),
            F("timestamp", INT64),
        )),
    )),
])

ListOffsetsResponse = response(2, "ListOffsets", "1-3", flexible="6+", fields=[
    F("throttle_time_ms", INT32, "2+"),
    F("topics", ArrayOf("ListOffsetsTopicResponse",
        F("name", STRING),
        F("partitions", ArrayOf("ListOffsetsPartitionResponse",
            F("partition_index", INT32),
            F("error_code", INT16),
            F("timestamp", INT64, "1+", default=-1),
            F("offset", INT64, "1+", default=-1),
        )),
    )),
])

# v8 asks for authorized operations (KIP-430), v9 is flexible, v10 carries topic ids, v11
# drops the cluster's operations (DescribeCluster has them), v12 looks topics up by id.
MetadataRequest = request(3, "Metadata", "1-12", flexible="9+", fields=[
    F("topics", ArrayOf("MetadataRequestTopic",
        F("topic_id", UUID, "10+"),
        F("name", STRING, nullable="10+"),
    ), nullable="1+"),
    F("allow_auto_topic_creation", BOOL, "4+", default=True),
    F("include_cluster_authorized_operations", BOOL, "8-10", default=False),
    F("include_topic_authorized_operations", BOOL, "8+", default=False),
])

MetadataResponse = response(3, "Metadata", "1-12", flexible="9+", fields=[
    F("throttle_time_ms", INT32, "3+"),
    F("brokers", ArrayOf("MetadataResponseBroker",
        F("node_id", INT32),
        F("host", STRING),
        F("port", INT32),
        F("rack", STRING, "1+", nullable="1+", default=None),
    )),
    F("cluster_id", STRING, "2+", nullable="2+", default=None),
    F("controller_id", INT32, "1+", default=-1),
    F("topics", ArrayOf("MetadataResponseTopic",
        F("error_code", INT16),
        F("name", STRING, nullable="12+"),  # null: a topic id that names no topic (or none it may see)
        F("topic_id", UUID, "10+"),
        F("is_internal", BOOL, "1+", default=False),
        F("partitions", ArrayOf("MetadataResponsePartition",
            F("error_code", INT16),
            F("partition_index", INT32),
            F("leader_id", INT32),
            F("leader_epoch", INT32, "7+", default=-1),  # KIP-320: clients ignore older leaders
            F("replica_nodes", ArrayOf(INT32)),
            F("isr_nodes", ArrayOf(INT32)),
            F("offline_replicas", ArrayOf(INT32), "5+"),
        )),
        F("topic_authorized_operations", INT32, "8+", default=-2147483648),  # not asked: Integer.MIN_VALUE
    )),
    F("cluster_authorized_operations", INT32, "8-10", default=-2147483648),
])

OffsetForLeaderEpochRequest = request(23, "OffsetForLeaderEpoch", "0-3", flexible="4+", fields=[
    F("replica_id", INT32, "3+", default=-2),
    F("topics", ArrayOf("OffsetForLeaderTopic",
        F("topic", STRING),
        F("partitions", ArrayOf("OffsetForLeaderPartition",
            F("partition", INT32),
            F("current_leader_epoch", INT32, "2+", default=-1),
            F("leader_epoch", INT32),
        )),
    )),
])

OffsetForLeaderEpochResponse = response(23, "OffsetForLeaderEpoch", "0-3", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "2+"),
    F("topics", ArrayOf("OffsetForLeaderTopicResult",
        F("topic", STRING),
        F("partitions", ArrayOf("EpochEndOffset",
            F("error_code", INT16),
            F("partition", INT32),
            F("leader_epoch", INT32, "1+", default=-1),
            F("end_offset", INT64, default=-1),
        )),
    )),
])
