"""Admin APIs: topics, partitions (also described a page at a time), configs, producer ids,
cluster description, SCRAM users, leader elections and partition reassignments."""
from __future__ import annotations

from wire.protocol.message import request, response
from wire.protocol.schema import ArrayOf, F, StructOf, BOOL, BYTES, INT16, INT32, INT64, INT8, STRING, UUID

__all__ = [
    "CreateTopicsRequest", "CreateTopicsResponse", "DeleteTopicsRequest",
    "DeleteTopicsResponse", "CreatePartitionsRequest", "CreatePartitionsResponse",
    "InitProducerIdRequest", "InitProducerIdResponse", "DescribeConfigsRequest",
    "DescribeConfigsResponse", "AlterConfigsRequest", "AlterConfigsResponse",
    "IncrementalAlterConfigsRequest", "IncrementalAlterConfigsResponse",
    "DescribeClusterRequest", "DescribeClusterResponse",
    "DescribeUserScramCredentialsRequest", "DescribeUserScramCredentialsResponse",
    "AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse",
    "ElectLeadersRequest", "ElectLeadersResponse", "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse", "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse", "DescribeTopicPartitionsRequest", "DescribeTopicPartitionsResponse",
]

# v6 (CreateTopics), v5 (DeleteTopics), v3 (CreatePartitions): strict controller_mutation_rate (KIP-599)
CreateTopicsRequest = request(19, "CreateTopics", "0-6", flexible="5+", fields=[
    F("topics", ArrayOf("CreatableTopic",
        F("name", STRING),
        F("num_partitions", INT32),
        F("replication_factor", INT16),
        F("assignments", ArrayOf("CreatableReplicaAssignment",
            F("partition_index", INT32),
            F("broker_ids", ArrayOf(INT32)),
        )),
        F("configs", ArrayOf("CreatableTopicConfig",
            F("name", STRING),
            F("value", STRING, nullable="0+"),
        )),
    )),
    F("timeout_ms", INT32, default=60000),
    F("validate_only", BOOL, "1+", default=False),
])

CreateTopicsResponse = response(19, "CreateTopics", "0-6", flexible="5+", fields=[
    F("throttle_time_ms", INT32, "2+"),
    F("topics", ArrayOf("CreatableTopicResult",
        F("name", STRING),
        F("error_code", INT16),
        F("error_message", STRING, "1+", nullable="0+"),
        F("topic_config_error_code", INT16, "5+", default=0, tag=0),
        F("num_partitions", INT32, "5+", default=-1),
        F("replication_factor", INT16, "5+", default=-1),
        F("configs", ArrayOf("CreatableTopicConfigs",
            F("name", STRING),
            F("value", STRING, nullable="5+"),
            F("read_only", BOOL),
            F("config_source", INT8, default=-1),
            F("is_sensitive", BOOL),
        ), "5+", nullable="5+", default=None),
    )),
])

DeleteTopicsRequest = request(20, "DeleteTopics", "0-5", flexible="4+", fields=[
    F("topic_names", ArrayOf(STRING)),
    F("timeout_ms", INT32),
])

DeleteTopicsResponse = response(20, "DeleteTopics", "0-5", flexible="4+", fields=[
    F("throttle_time_ms", INT32, "1+"),
    F("responses", ArrayOf("DeletableTopicResult",
        F("name", STRING),
        F("error_code", INT16),
        F("error_message", STRING, "5+", nullable="5+", default=None),
    )),
])

CreatePartitionsRequest = request(37, "CreatePartitions", "0-3", flexible="2+", fields=[
    F("topics", ArrayOf("CreatePartitionsTopic",
        F("name", STRING),
        F("count", INT32),
        F("assignments", ArrayOf("CreatePartitionsAssignment",
            F("broker_ids", ArrayOf(INT32)),
        ), nullable="0+"),
    )),
    F("timeout_ms", INT32),
    F("validate_only", BOOL),
])

CreatePartitionsResponse = response(37, "CreatePartitions", "0-3", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("results", ArrayOf("CreatePartitionsTopicResult",
        F("name", STRING),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+", default=None),
    )),
])

InitProducerIdRequest = request(22, "InitProducerId", "0-1", flexible="2+", fields=[
    F("transactional_id", STRING, nullable="0+"),
    F("transaction_timeout_ms", INT32),
])

InitProducerIdResponse = response(22, "InitProducerId", "0-1", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("producer_id", INT64, default=-1),
    F("producer_epoch", INT16),
])

DescribeConfigsRequest = request(32, "DescribeConfigs", "0-2", flexible="4+", fields=[
    F("resources", ArrayOf("DescribeConfigsResource",
        F("resource_type", INT8),
        F("resource_name", STRING),
        F("configuration_keys", ArrayOf(STRING), nullable="0+"),
    )),
    F("include_synonyms", BOOL, "1+", default=False),
])

DescribeConfigsResponse = response(32, "DescribeConfigs", "0-2", flexible="4+", fields=[
    F("throttle_time_ms", INT32),
    F("results", ArrayOf("DescribeConfigsResult",
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("resource_type", INT8),
        F("resource_name", STRING),
        F("configs", ArrayOf("DescribeConfigsResourceResult",
            F("name", STRING),
            F("value", STRING, nullable="0+"),
            F("read_only", BOOL),
            F("is_default", BOOL, "0-0"),
            F("config_source", INT8, "1+", default=-1),
            F("is_sensitive", BOOL),
            F("synonyms", ArrayOf("DescribeConfigsSynonym",
                F("name", STRING, "1+"),
                F("value", STRING, "1+", nullable="0+"),
                F("source", INT8, "1+"),
            ), "1+"),
        )),
    )),
])

AlterConfigsRequest = request(33, "AlterConfigs", "0-1", flexible="2+", fields=[
    F("resources", ArrayOf("AlterConfigsResource",
        F("resource_type", INT8),
        F("resource_name", STRING),
        F("configs", ArrayOf("AlterableConfig",
            F("name", STRING),
            F("value", STRING, nullable="0+"),
        )),
    )),
    F("validate_only", BOOL),
])

AlterConfigsResponse = response(33, "AlterConfigs", "0-1", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("responses", ArrayOf("AlterConfigsResourceResponse",
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("resource_type", INT8),
        F("resource_name", STRING),
    )),
])

IncrementalAlterConfigsRequest = request(44, "IncrementalAlterConfigs", "0-1", flexible="1+", fields=[
    F("resources", ArrayOf("AlterConfigsResource",
        F("resource_type", INT8),
        F("resource_name", STRING),
        F("configs", ArrayOf("AlterableConfig",
            F("name", STRING),
            F("config_operation", INT8),
            F("value", STRING, nullable="0+"),
        )),
    )),
    F("validate_only", BOOL),
])

IncrementalAlterConfigsResponse = response(44, "IncrementalAlterConfigs", "0-1", flexible="1+", fields=[
    F("throttle_time_ms", INT32),
    F("responses", ArrayOf("AlterConfigsResourceResponse",
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("resource_type", INT8),
        F("resource_name", STRING),
    )),
])

DescribeClusterRequest = request(60, "DescribeCluster", "0-1", flexible="0+", fields=[
    F("include_cluster_authorized_operations", BOOL),
    F("endpoint_type", INT8, "1+", default=1),
])

DescribeClusterResponse = response(60, "DescribeCluster", "0-1", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F("endpoint_type", INT8, "1+", default=1),
    F("cluster_id", STRING),
    F("controller_id", INT32, default=-1),
    F("brokers", ArrayOf("DescribeClusterBroker",
        F("broker_id", INT32),
        F("host", STRING),
        F("port", INT32),
        F("rack", STRING, nullable="0+", default=None),
    )),
    F("cluster_authorized_operations", INT32, default=-2147483648),
])

# KIP-554: SCRAM credentials; the client sends the salted password, never the password.
DescribeUserScramCredentialsRequest = request(50, "DescribeUserScramCredentials", "0", flexible="0+", fields=[
    F("users", ArrayOf("UserName", F("name", STRING)), nullable="0+"),
])

DescribeUserScramCredentialsResponse = response(50, "DescribeUserScramCredentials", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+"),
    F("results", ArrayOf("DescribeUserScramCredentialsResult",
        F("user", STRING),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
        F("credential_infos", ArrayOf("CredentialInfo",
            F("mechanism", INT8),
            F("iterations", INT32),
        )),
    )),
])

AlterUserScramCredentialsRequest = request(51, "AlterUserScramCredentials", "0", flexible="0+", fields=[
    F("deletions", ArrayOf("ScramCredentialDeletion",
        F("name", STRING),
        F("mechanism", INT8),
    )),
    F("upsertions", ArrayOf("ScramCredentialUpsertion",
        F("name", STRING),
        F("mechanism", INT8),
        F("iterations", INT32),
        F("salt", BYTES),
        F("salted_password", BYTES),
    )),
])

AlterUserScramCredentialsResponse = response(51, "AlterUserScramCredentials", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("results", ArrayOf("AlterUserScramCredentialsResult",
        F("user", STRING),
        F("error_code", INT16),
        F("error_message", STRING, nullable="0+"),
    )),
])

ElectLeadersRequest = request(43, "ElectLeaders", "0-2", flexible="2+", fields=[
    F("election_type", INT8, "1+", default=0),
    F("topic_partitions", ArrayOf("TopicPartitions",
        F("topic", STRING),
        F("partitions", ArrayOf(INT32)),
    ), nullable="0+"),
    F("timeout_ms", INT32, default=60000),
])

ElectLeadersResponse = response(43, "ElectLeaders", "0-2", flexible="2+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16, "1+", default=0),
    F("replica_election_results", ArrayOf("ReplicaElectionResult",
        F("topic", STRING),
        F("partition_result", ArrayOf("PartitionResult",
            F("partition_id", INT32),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        )),
    )),
])

AlterPartitionReassignmentsRequest = request(45, "AlterPartitionReassignments", "0", flexible="0+", fields=[
    F("timeout_ms", INT32, default=60000),
    F("topics", ArrayOf("ReassignableTopic",
        F("name", STRING),
        F("partitions", ArrayOf("ReassignablePartition",
            F("partition_index", INT32),
            F("replicas", ArrayOf(INT32), nullable="0+", default=None),
        )),
    )),
])

AlterPartitionReassignmentsResponse = response(45, "AlterPartitionReassignments", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F("responses", ArrayOf("ReassignableTopicResponse",
        F("name", STRING),
        F("partitions", ArrayOf("ReassignablePartitionResponse",
            F("partition_index", INT32),
            F("error_code", INT16),
            F("error_message", STRING, nullable="0+", default=None),
        )),
    )),
])

ListPartitionReassignmentsRequest = request(46, "ListPartitionReassignments", "0", flexible="0+", fields=[
    F("timeout_ms", INT32, default=60000),
    F("topics", ArrayOf("ListPartitionReassignmentsTopics",
        F("name", STRING),
        F("partition_indexes", ArrayOf(INT32)),
    ), nullable="0+", default=None),
])

ListPartitionReassignmentsResponse = response(46, "ListPartitionReassignments", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("error_code", INT16),
    F("error_message", STRING, nullable="0+", default=None),
    F("topics", ArrayOf("OngoingTopicReassignment",
        F("name", STRING),
        F("partitions", ArrayOf("OngoingPartitionReassignment",
            F("partition_index", INT32),
            F("replicas", ArrayOf(INT32)),
            F("adding_replicas", ArrayOf(INT32)),
            F("removing_replicas", ArrayOf(INT32)),
        )),
    )),
])


# KIP-966: partitions a page at a time (a cursor names where the next page starts) with
# each partition's eligible leader replicas; a null cursor is the first page.
def _cursor(name: str) -> StructOf:
    return StructOf(name, F("topic_name", STRING), F("partition_index", INT32))


DescribeTopicPartitionsRequest = request(75, "DescribeTopicPartitions", "0", flexible="0+", fields=[
    F("topics", ArrayOf("TopicRequest", F("name", STRING))),
    F("response_partition_limit", INT32, default=2000),
    F("cursor", _cursor("Cursor"), nullable="0+", default=None),
])

DescribeTopicPartitionsResponse = response(75, "DescribeTopicPartitions", "0", flexible="0+", fields=[
    F("throttle_time_ms", INT32),
    F("topics", ArrayOf("DescribeTopicPartitionsResponseTopic",
        F("error_code", INT16),
        F("name", STRING, nullable="0+"),
        F("topic_id", UUID),
        F("is_internal", BOOL, default=False),
        F("partitions", ArrayOf("DescribeTopicPartitionsResponsePartition",
            F("error_code", INT16),
            F("partition_index", INT32),
            F("leader_id", INT32),
            F("leader_epoch", INT32, default=-1),
            F("replica_nodes", ArrayOf(INT32)),
            F("isr_nodes", ArrayOf(INT32)),
            F("eligible_leader_replicas", ArrayOf(INT32), nullable="0+", default=None),
            F("last_known_elr", ArrayOf(INT32), nullable="0+", default=None),
            F("offline_replicas", ArrayOf(INT32)),
        )),
        F("topic_authorized_operations", INT32, default=-2147483648),
    )),
    F("next_cursor", _cursor("NextCursor"), nullable="0+", default=None),
])
