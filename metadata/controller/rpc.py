"""The controller's internal RPCs (over the controller listener, as `wire.rpc` frames).

Brokers send BrokerRegistration, BrokerHeartbeat (which also carries controlled shutdown:
`want_shutdown`, as in KRaft), AlterPartition and AllocateProducerIds; admin requests that
reach a broker are forwarded as CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, ElectLeaders, DescribeConfigs, CreateAcls, DeleteAcls,
AlterUserScramCredentials, AlterPartitionReassignments, ListPartitionReassignments,
UnregisterBroker and AlterClientQuotas. Every response carries `error`
(a top-level Kafka error code: NOT_CONTROLLER when this node is not the active controller,
with `leader_id` as a hint), and writes carry `offset`: the metadata log offset the change
committed at (-1 when nothing was written), so a broker can wait for its own metadata to
reach it before answering its client.

Admin requests (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, ElectLeaders, AlterUserScramCredentials) are version 2: they carry `forwarded_by`, the
(broker id, broker epoch) of the broker that forwards them (metadata.controller.gate
admits them only from a live registration), and `timeout_ms`, the client's timeout (an
operation whose turn comes later is not carried out). Every other message is version 1;
a later version may only append fields with defaults.

Why one module of ~500 lines: it is the wire contract of every controller RPC, mostly
dataclass declarations, read and changed as one schema.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from wire.rpc import rpc_message

__all__ = [
    "EndpointInfo", "BrokerRegistrationRequest", "BrokerRegistrationResponse",
    "BrokerHeartbeatRequest", "BrokerHeartbeatResponse", "AlterPartitionItemInfo",
    "AlterPartitionResultInfo", "AlterPartitionRequest", "AlterPartitionResponse",
    "CreatableTopicInfo", "CreateTopicResultInfo", "CreateTopicsRequest", "CreateTopicsResponse",
    "DeleteTopicsRequest", "DeleteTopicResultInfo", "DeleteTopicsResponse",
    "NewPartitionsInfo", "PartitionsResultInfo", "CreatePartitionsRequest",
    "CreatePartitionsResponse", "ConfigEntryInfo", "ConfigResourceInfo", "ConfigOpInfo",
    "ConfigResourceOps", "ConfigResultInfo", "AlterConfigsRequest",
    "IncrementalAlterConfigsRequest", "AlterConfigsResponse", "DescribeConfigsRequest",
    "DescribedConfigInfo", "DescribeConfigsResponse", "AllocateProducerIdsRequest",
    "AllocateProducerIdsResponse", "ElectLeadersRequest", "ElectionResultInfo",
    "ElectLeadersResponse", "DescribeClusterRequest", "BrokerInfo", "PartitionInfo",
    "DescribeClusterResponse", "AclInfo", "AclFilterInfo", "AclResultInfo", "CreateAclsRequest",
    "CreateAclsResponse", "DeleteAclsResultInfo", "DeleteAclsRequest", "DeleteAclsResponse",
    "ScramDeletionInfo", "ScramUpsertionInfo", "ScramResultInfo",
    "AlterUserScramCredentialsRequest", "AlterUserScramCredentialsResponse", "CONTROLLER_REQUESTS",
    "ADMIN_REQUESTS", "ReassignmentInfo", "ReassignmentResultInfo",
    "AlterPartitionReassignmentsRequest", "AlterPartitionReassignmentsResponse",
    "OngoingReassignmentInfo", "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse", "UnregisterBrokerRequest", "UnregisterBrokerResponse",
    "QuotaOpInfo", "QuotaAlterationInfo", "QuotaResultInfo", "AlterClientQuotasRequest",
    "AlterClientQuotasResponse",
]


# ----------------------------------------------------------------------------- brokers


@dataclass(slots=True, frozen=True)
class EndpointInfo:
    name: str
    host: str
    port: int
    security_protocol: int = 0


@rpc_message("controller.BrokerRegistration", version=1)
@dataclass(slots=True, frozen=True)
class BrokerRegistrationRequest:
    cluster_id: str
    broker_id: int
    incarnation_id: uuid.UUID
    endpoints: list[EndpointInfo] = field(default_factory=list)
    rack: str | None = None
    log_dirs: list[uuid.UUID] = field(default_factory=list)
    previous_broker_epoch: int = -1
    # The incarnation this one replaces, proven dead by the data dir locks (data_dir_lock).
    previous_incarnation_id: uuid.UUID | None = None


@rpc_message("controller.BrokerRegistrationResponse", version=1)
@dataclass(slots=True, frozen=True)
class BrokerRegistrationResponse:
    error: int
    leader_id: int | None = None
    broker_epoch: int = -1
    message: str | None = None


@rpc_message("controller.BrokerHeartbeat", version=1)
@dataclass(slots=True, frozen=True)
class BrokerHeartbeatRequest:
    cluster_id: str
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shutdown: bool = False


@rpc_message("controller.BrokerHeartbeatResponse", version=1)
@dataclass(slots=True, frozen=True)
class BrokerHeartbeatResponse:
    error: int
    leader_id: int | None = None
    is_caught_up: bool = False
    is_fenced: bool = True
    should_shutdown: bool = False


@dataclass(slots=True, frozen=True)
class AlterPartitionItemInfo:
    topic_id: uuid.UUID
    partition_id: int
    leader_epoch: int
    partition_epoch: int
    new_isr: list[int]
    new_isr_broker_epochs: list[int] | None = None
    leader_recovery_state: int = 0


@dataclass(slots=True, frozen=True)
class AlterPartitionResultInfo:
    topic_id: uuid.UUID
    partition_id: int
    error: int
    leader: int = -1
    leader_epoch: int = -1
    isr: list[int] = field(default_factory=list)
    partition_epoch: int = -1
    leader_recovery_state: int = 0


@rpc_message("controller.AlterPartition", version=1)
@dataclass(slots=True, frozen=True)
class AlterPartitionRequest:
    cluster_id: str
    broker_id: int
    broker_epoch: int
    items: list[AlterPartitionItemInfo] = field(default_factory=list)


@rpc_message("controller.AlterPartitionResponse", version=1)
@dataclass(slots=True, frozen=True)
class AlterPartitionResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[AlterPartitionResultInfo] = field(default_factory=list)


@rpc_message("controller.AllocateProducerIds", version=1)
@dataclass(slots=True, frozen=True)
class AllocateProducerIdsRequest:
    cluster_id: str
    broker_id: int
    broker_epoch: int


@rpc_message("controller.AllocateProducerIdsResponse", version=1)
@dataclass(slots=True, frozen=True)
class AllocateProducerIdsResponse:
    error: int
    leader_id: int | None = None
    first_producer_id: int = -1
    size: int = 0


# ------------------------------------------------------------------------------ topics


@dataclass(slots=True, frozen=True)
class CreatableTopicInfo:
    name: str
    num_partitions: int = -1
    replication_factor: int = -1
    assignments: dict[int, list[int]] | None = None
    configs: dict[str, str | None] = field(default_factory=dict)  # a null value: INVALID_CONFIG, as Kafka


@dataclass(slots=True, frozen=True)
class CreateTopicResultInfo:
    name: str
    error: int
    message: str | None = None
    topic_id: uuid.UUID | None = None
    num_partitions: int = -1
    replication_factor: int = -1


@rpc_message("controller.CreateTopics", version=3)
@dataclass(slots=True, frozen=True)
class CreateTopicsRequest:
    cluster_id: str
    topics: list[CreatableTopicInfo]
    validate_only: bool = False
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1
    # who asked (the client's user and client-id) and whether its version is strict about
    # controller_mutation_rate (metadata.controller.mutation_quota)
    user: str | None = None
    client_id: str = ""
    strict_quota: bool = False


@rpc_message("controller.CreateTopicsResponse", version=2)
@dataclass(slots=True, frozen=True)
class CreateTopicsResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[CreateTopicResultInfo] = field(default_factory=list)
    message: str | None = None
    throttle_time_ms: int = 0  # controller_mutation_rate


@rpc_message("controller.DeleteTopics", version=3)
@dataclass(slots=True, frozen=True)
class DeleteTopicsRequest:
    cluster_id: str
    names: list[str] = field(default_factory=list)
    topic_ids: list[uuid.UUID] = field(default_factory=list)
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1
    # who asked, as in CreateTopicsRequest
    user: str | None = None
    client_id: str = ""
    strict_quota: bool = False


@dataclass(slots=True, frozen=True)
class DeleteTopicResultInfo:
    name: str | None
    topic_id: uuid.UUID | None
    error: int
    message: str | None = None


@rpc_message("controller.DeleteTopicsResponse", version=2)
@dataclass(slots=True, frozen=True)
class DeleteTopicsResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[DeleteTopicResultInfo] = field(default_factory=list)
    throttle_time_ms: int = 0  # controller_mutation_rate


@dataclass(slots=True, frozen=True)
class NewPartitionsInfo:
    name: str
    count: int
    assignments: list[list[int]] | None = None


@dataclass(slots=True, frozen=True)
class PartitionsResultInfo:
    name: str
    error: int
    message: str | None = None


@rpc_message("controller.CreatePartitions", version=3)
@dataclass(slots=True, frozen=True)
class CreatePartitionsRequest:
    cluster_id: str
    topics: list[NewPartitionsInfo]
    validate_only: bool = False
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1
    # who asked, as in CreateTopicsRequest
    user: str | None = None
    client_id: str = ""
    strict_quota: bool = False


@rpc_message("controller.CreatePartitionsResponse", version=2)
@dataclass(slots=True, frozen=True)
class CreatePartitionsResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[PartitionsResultInfo] = field(default_factory=list)
    throttle_time_ms: int = 0  # controller_mutation_rate


# ----------------------------------------------------------------------------- configs


@dataclass(slots=True, frozen=True)
class ConfigEntryInfo:
    name: str
    value: str | None


@dataclass(slots=True, frozen=True)
class ConfigResourceInfo:
    resource_type: int  # 2 TOPIC, 4 BROKER
    resource_name: str
    entries: list[ConfigEntryInfo] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class ConfigOpInfo:
    name: str
    op: int  # AlterOp: 0 SET, 1 DELETE, 2 APPEND, 3 SUBTRACT
    value: str | None


@dataclass(slots=True, frozen=True)
class ConfigResourceOps:
    resource_type: int
    resource_name: str
    ops: list[ConfigOpInfo] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class ConfigResultInfo:
    resource_type: int
    resource_name: str
    error: int
    message: str | None = None


@rpc_message("controller.AlterConfigs", version=2)
@dataclass(slots=True, frozen=True)
class AlterConfigsRequest:
    cluster_id: str
    resources: list[ConfigResourceInfo]
    validate_only: bool = False
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1


@rpc_message("controller.IncrementalAlterConfigs", version=2)
@dataclass(slots=True, frozen=True)
class IncrementalAlterConfigsRequest:
    cluster_id: str
    resources: list[ConfigResourceOps]
    validate_only: bool = False
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1


@rpc_message("controller.AlterConfigsResponse", version=1)
@dataclass(slots=True, frozen=True)
class AlterConfigsResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[ConfigResultInfo] = field(default_factory=list)


@rpc_message("controller.DescribeConfigs", version=1)
@dataclass(slots=True, frozen=True)
class DescribeConfigsRequest:
    cluster_id: str
    resource_type: int
    resource_name: str
    keys: list[str] | None = None
    include_synonyms: bool = False


@dataclass(slots=True, frozen=True)
class DescribedConfigInfo:
    name: str
    value: str | None
    read_only: bool
    source: int
    sensitive: bool
    type: int


@rpc_message("controller.DescribeConfigsResponse", version=1)
@dataclass(slots=True, frozen=True)
class DescribeConfigsResponse:
    error: int
    leader_id: int | None = None
    message: str | None = None
    configs: list[DescribedConfigInfo] = field(default_factory=list)


# --------------------------------------------------------------------------- elections


@rpc_message("controller.ElectLeaders", version=2)
@dataclass(slots=True, frozen=True)
class ElectLeadersRequest:
    cluster_id: str
    election_type: int  # 0 PREFERRED, 1 UNCLEAN
    partitions: list[tuple[str, int]] | None = None  # None = every partition
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1


@dataclass(slots=True, frozen=True)
class ElectionResultInfo:
    topic: str
    partition: int
    error: int


@rpc_message("controller.ElectLeadersResponse", version=1)
@dataclass(slots=True, frozen=True)
class ElectLeadersResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[ElectionResultInfo] = field(default_factory=list)


@rpc_message("controller.UnregisterBroker", version=2)
@dataclass(slots=True, frozen=True)
class UnregisterBrokerRequest:
    """Decommission a broker: refused while it still holds replicas (the message names them)."""

    cluster_id: str
    # Not `broker_id`: that field names the broker a connection speaks for (raft.transport).
    unregistered_id: int
    forwarded_by: tuple[int, int] | None = None
    timeout_ms: int = -1


@rpc_message("controller.UnregisterBrokerResponse", version=1)
@dataclass(slots=True, frozen=True)
class UnregisterBrokerResponse:
    error: int
    leader_id: int | None = None
    message: str | None = None
    offset: int = -1


# ---------------------------------------------------------------------------- describe


@rpc_message("controller.DescribeCluster", version=1)
@dataclass(slots=True, frozen=True)
class DescribeClusterRequest:
    """The active controller's committed view of brokers and partitions (tools, tests)."""

    cluster_id: str


@dataclass(slots=True, frozen=True)
class BrokerInfo:
    broker_id: int
    broker_epoch: int
    fenced: bool
    in_controlled_shutdown: bool
    metadata_offset: int = -1  # last reported in a heartbeat to this controller


@dataclass(slots=True, frozen=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    partition_epoch: int
    replicas: list[int]
    isr: list[int]


@rpc_message("controller.DescribeClusterResponse", version=1)
@dataclass(slots=True, frozen=True)
class DescribeClusterResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1  # the image's last offset
    brokers: list[BrokerInfo] = field(default_factory=list)
    partitions: list[PartitionInfo] = field(default_factory=list)


# -------------------------------------------------------------------------------- acls


@dataclass(slots=True, frozen=True)
class AclInfo:
    resource_type: int
    resource_name: str
    pattern_type: int
    principal: str
    host: str
    operation: int
    permission: int


@dataclass(slots=True, frozen=True)
class AclFilterInfo:
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int


@dataclass(slots=True, frozen=True)
class AclResultInfo:
    error: int
    message: str | None = None


# ------------------------------------------------------------------------------- SCRAM


@dataclass(slots=True, frozen=True)
class ScramDeletionInfo:
    name: str
    mechanism: int  # 1 SCRAM-SHA-256, 2 SCRAM-SHA-512


@dataclass(slots=True, frozen=True)
class ScramUpsertionInfo:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


@dataclass(slots=True, frozen=True)
class ScramResultInfo:
    user: str
    error: int
    message: str | None = None


@rpc_message("controller.CreateAcls", version=2)
@dataclass(slots=True, frozen=True)
class CreateAclsRequest:
    cluster_id: str
    creations: list[AclInfo] = field(default_factory=list)
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1


@rpc_message("controller.CreateAclsResponse", version=1)
@dataclass(slots=True, frozen=True)
class CreateAclsResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[AclResultInfo] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class DeleteAclsResultInfo:
    error: int
    message: str | None = None
    deleted: list[AclInfo] = field(default_factory=list)


@rpc_message("controller.DeleteAcls", version=2)
@dataclass(slots=True, frozen=True)
class DeleteAclsRequest:
    cluster_id: str
    filters: list[AclFilterInfo] = field(default_factory=list)
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1


@rpc_message("controller.DeleteAclsResponse", version=1)
@dataclass(slots=True, frozen=True)
class DeleteAclsResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[DeleteAclsResultInfo] = field(default_factory=list)


@rpc_message("controller.AlterUserScramCredentials", version=2)
@dataclass(slots=True, frozen=True)
class AlterUserScramCredentialsRequest:
    cluster_id: str
    deletions: list[ScramDeletionInfo] = field(default_factory=list)
    upsertions: list[ScramUpsertionInfo] = field(default_factory=list)
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1


@rpc_message("controller.AlterUserScramCredentialsResponse", version=1)
@dataclass(slots=True, frozen=True)
class AlterUserScramCredentialsResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[ScramResultInfo] = field(default_factory=list)


# ------------------------------------------------------------------------ reassignment


@dataclass(slots=True, frozen=True)
class ReassignmentInfo:
    topic: str
    partition: int
    replicas: list[int] | None  # None cancels the partition's reassignment


@dataclass(slots=True, frozen=True)
class ReassignmentResultInfo:
    topic: str
    partition: int
    error: int
    message: str | None = None


@rpc_message("controller.AlterPartitionReassignments", version=2)
@dataclass(slots=True, frozen=True)
class AlterPartitionReassignmentsRequest:
    cluster_id: str
    reassignments: list[ReassignmentInfo] = field(default_factory=list)
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1


@rpc_message("controller.AlterPartitionReassignmentsResponse", version=1)
@dataclass(slots=True, frozen=True)
class AlterPartitionReassignmentsResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[ReassignmentResultInfo] = field(default_factory=list)
    message: str | None = None


@dataclass(slots=True, frozen=True)
class OngoingReassignmentInfo:
    topic: str
    partition: int
    replicas: list[int]
    adding: list[int]
    removing: list[int]


@rpc_message("controller.ListPartitionReassignments", version=1)
@dataclass(slots=True, frozen=True)
class ListPartitionReassignmentsRequest:
    cluster_id: str
    topics: list[tuple[str, list[int]]] | None = None  # None = every partition


@rpc_message("controller.ListPartitionReassignmentsResponse", version=1)
@dataclass(slots=True, frozen=True)
class ListPartitionReassignmentsResponse:
    error: int
    leader_id: int | None = None
    reassignments: list[OngoingReassignmentInfo] = field(default_factory=list)


# ------------------------------------------------------------------------ client quotas


@dataclass(slots=True, frozen=True)
class QuotaOpInfo:
    key: str
    value: float
    remove: bool = False


@dataclass(slots=True, frozen=True)
class QuotaAlterationInfo:
    entity: list[tuple[str, str | None]]  # (entity type, name or None for the default)
    ops: list[QuotaOpInfo] = field(default_factory=list)


@dataclass(slots=True, frozen=True)
class QuotaResultInfo:
    error: int
    message: str | None = None


@rpc_message("controller.AlterClientQuotas", version=2)
@dataclass(slots=True, frozen=True)
class AlterClientQuotasRequest:
    cluster_id: str
    alterations: list[QuotaAlterationInfo] = field(default_factory=list)
    validate_only: bool = False
    forwarded_by: tuple[int, int] | None = None  # (broker id, broker epoch)
    timeout_ms: int = -1


@rpc_message("controller.AlterClientQuotasResponse", version=1)
@dataclass(slots=True, frozen=True)
class AlterClientQuotasResponse:
    error: int
    leader_id: int | None = None
    offset: int = -1
    results: list[QuotaResultInfo] = field(default_factory=list)  # one per alteration, in order


# Request type → its response type (the service answers NOT_CONTROLLER with these).
CONTROLLER_REQUESTS: dict[type, type] = {
    BrokerRegistrationRequest: BrokerRegistrationResponse,
    BrokerHeartbeatRequest: BrokerHeartbeatResponse,
    AlterPartitionRequest: AlterPartitionResponse,
    AllocateProducerIdsRequest: AllocateProducerIdsResponse,
    CreateTopicsRequest: CreateTopicsResponse,
    DeleteTopicsRequest: DeleteTopicsResponse,
    CreatePartitionsRequest: CreatePartitionsResponse,
    AlterConfigsRequest: AlterConfigsResponse,
    IncrementalAlterConfigsRequest: AlterConfigsResponse,
    DescribeConfigsRequest: DescribeConfigsResponse,
    ElectLeadersRequest: ElectLeadersResponse,
    DescribeClusterRequest: DescribeClusterResponse,
    CreateAclsRequest: CreateAclsResponse,
    DeleteAclsRequest: DeleteAclsResponse,
    AlterUserScramCredentialsRequest: AlterUserScramCredentialsResponse,
    AlterPartitionReassignmentsRequest: AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest: ListPartitionReassignmentsResponse,
    UnregisterBrokerRequest: UnregisterBrokerResponse,
    AlterClientQuotasRequest: AlterClientQuotasResponse,
}

# Requests that change the cluster on a client's behalf: only ever forwarded by a broker.
ADMIN_REQUESTS = (
    CreateTopicsRequest, DeleteTopicsRequest, CreatePartitionsRequest, AlterConfigsRequest,
    IncrementalAlterConfigsRequest, ElectLeadersRequest, AlterUserScramCredentialsRequest,
    CreateAclsRequest, DeleteAclsRequest, AlterPartitionReassignmentsRequest, UnregisterBrokerRequest,
    AlterClientQuotasRequest,
)
