"""Cluster operations: DeleteRecords, DescribeLogDirs, DescribeQuorum, UnregisterBroker,
AddRaftVoter, RemoveRaftVoter."""
from __future__ import annotations

from wire.protocol.message import request, response
from wire.protocol.schema import ArrayOf, F, BOOL, INT16, INT32, INT64, STRING, UINT16, UUID

__all__ = [
    "DeleteRecordsRequest", "DeleteRecordsResponse", "DescribeLogDirsRequest",
    "DescribeLogDirsResponse", "DescribeQuorumRequest", "DescribeQuorumResponse",
    "UnregisterBrokerRequest", "UnregisterBrokerResponse",
    "AddRaftVoterRequest", "AddRaftVoterResponse", "RemoveRaftVoterRequest", "RemoveRaftVoterResponse",
]

DeleteRecordsRequest = request(21, "DeleteRecords", "0-2", flexible="2+", fields=[
    F("topics", ArrayOf("DeleteRecordsTopic",
        F("name", STRING),
        F("partitions", ArrayOf("DeleteRecordsPartition",
            F("partition_index", INT32),
            F("offset", INT64),
        )),
    )),
    F("timeout_ms", INT32),
])

DeleteRecordsResponse = response(21, "DeleteRecords", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("topics", ArrayOf("DeleteRecordsTopicResult",
        F("name", STRING),
        F("partitions", ArrayOf("DeleteRecordsPartitionResult",
            F("partition_index", INT32),
            F("low_watermark", INT64),
            F("error_code", INT16),
        )),
    )),
])

DescribeLogDirsRequest = request(35, "DescribeLogDirs", "0-4", flexible="2+", fields=[
    F("topics", ArrayOf("DescribableLogDirTopic",
        F("topic", STRING),
        F("partitions", ArrayOf(INT32)),
    ), nullable="0+"),
])

DescribeLogDirsResponse = response(35, "DescribeLogDirs", "0-4", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16, "3+"),
    F("results", ArrayOf("DescribeLogDirsResult",
        F("error_code", INT16),
        F("log_dir", STRING),
        F("topics", ArrayOf("DescribeLogDirsTopic",
            F("name", STRING),
            F("partitions", ArrayOf("DescribeLogDirsPartition",
                F("partition_index", INT32),
                F("partition_size", INT64),
                F("offset_lag", INT64),
                F("is_future_key", BOOL),
            )),
        )),
        F("total_bytes", INT64, "4+", default=-1),
        F("usable_bytes", INT64, "4+", default=-1),
    )),
])

DescribeQuorumRequest = request(55, "DescribeQuorum", "0-2", flexible="0+", fields=[
    F("topics", ArrayOf("TopicData",
        F("topic_name", STRING),
        F("partitions", ArrayOf("PartitionData",
            F("partition_index", INT32),
        )),
    )),
])


def _replica_state(name: str):
    return ArrayOf(name,
        F("replica_id", INT32),
        F("replica_directory_id", UUID, "2+"),
        F("log_end_offset", INT64),
        F("last_fetch_timestamp", INT64, "1+", default=-1),
        F("last_caught_up_timestamp", INT64, "1+", default=-1),
    )


DescribeQuorumResponse = response(55, "DescribeQuorum", "0-2", flexible="0+", fields=[
    F("error_code", INT16),
    F("error_message", STRING, "2+", nullable="2+", default=None),
    F("topics", ArrayOf("TopicData",
        F("topic_name", STRING),
        F("partitions", ArrayOf("PartitionData",
            F("partition_index", INT32),
            F("error_code", INT16),
            F("error_message", STRING, "2+", nullable="2+", default=None),
            F("leader_id", INT32),
            F("leader_epoch", INT32),
            F("high_watermark", INT64),
            F("current_voters", _replica_state("Voter")),
            F("observers", _replica_state("Observer")),
        )),
    )),
    F("nodes", ArrayOf("Node",
        F("node_id", INT32, "2+"),
        F("listeners", ArrayOf("Listener",
            F("name", STRING, "2+"),
            F("host", STRING, "2+"),
            F("port", UINT16, "2+"),
        ), "2+"),
    ), "2+"),
])

UnregisterBrokerRequest = request(64, "UnregisterBroker", "0-0", flexible="0+", fields=[
    F("broker_id", INT32),
])

UnregisterBrokerResponse = response(64, "UnregisterBroker", "0-0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
])

AddRaftVoterRequest = request(80, "AddRaftVoter", "0-0", flexible="0+", fields=[
    F("cluster_id", STRING, nullable="0+", default=None),
    F("timeout_ms", INT32),
    F("voter_id", INT32),
    F("voter_directory_id", UUID),
    F("listeners", ArrayOf("Listener",
        F("name", STRING),
        F("host", STRING),
        F("port", UINT16),
    )),
])

AddRaftVoterResponse = response(80, "AddRaftVoter", "0-0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
])

RemoveRaftVoterRequest = request(81, "RemoveRaftVoter", "0-0", flexible="0+", fields=[
    F("cluster_id", STRING, nullable="0+", default=None),
    F("voter_id", INT32),
    F("voter_directory_id", UUID),
])

RemoveRaftVoterResponse = response(81, "RemoveRaftVoter", "0-0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
])
