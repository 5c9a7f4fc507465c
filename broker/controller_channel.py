"""The broker's seam to the active controller for admin requests.

Also the replication path's AlterPartition (ISR changes from partition leaders).

Admin requests (CreateTopics, DeleteTopics, CreatePartitions, AlterConfigs,
IncrementalAlterConfigs, CreateAcls, DeleteAcls, AlterUserScramCredentials, ElectLeaders,
AlterPartitionReassignments, UnregisterBroker, AlterClientQuotas; ListPartitionReassignments reads the controller's view) that reach a broker are forwarded to the active
controller, as in KRaft. Handlers talk to this protocol with plain request and
result objects (the metadata layer's own types, never Kafka wire classes); the
real implementation forwards them over the controller RPC, tests apply the
pure controller logic in-process (tests/broker/harness.py).

Every call returns a `ControllerReply`: the per-item results and the metadata
log offset at which the change committed (-1 if nothing was written), so the
handler can wait until this broker's metadata has caught up before answering —
a client that creates a topic and then asks for metadata sees it.
"""
from __future__ import annotations

from typing import Mapping, Protocol, Sequence

from metadata.acls import AclBinding, AclFilter
from metadata.controller.acls import AclResult, DeleteAclsResult
from metadata.controller.alter_partition import AlterPartitionItem, AlterPartitionResult
from metadata.controller.dynamic_configs import AlterOp, ConfigError
from metadata.controller.reassignment import OngoingReassignment, ReassignmentResult
from metadata.controller.client_quotas import QuotaAlteration, QuotaOp
from metadata.controller.mutation_quota import MutationRequester
from metadata.controller.scram import ScramDeletion, ScramUpsertion
from metadata.controller.topics import CreatableTopic, CreateTopicResult, DeleteTopicResult, NewPartitions
# The real channel (metadata.controller.client.ControllerClient) lives below the broker
# layer, so the reply and error types are defined there and shared, not duplicated:
# handlers must catch exactly the error the real client raises.
from metadata.controller.client import ControllerReply, ControllerUnavailableError
from metadata.image import ConfigResource
from wire.error_codes import ErrorCode

__all__ = [
    "ControllerChannel", "ControllerReply", "ControllerUnavailableError",
    "CreatableTopic", "CreateTopicResult", "DeleteTopicResult", "NewPartitions",
    "AclBinding", "AclFilter", "AclResult", "DeleteAclsResult", "AlterOp", "ConfigError", "ConfigResource",
    "AlterPartitionItem", "AlterPartitionResult", "ScramDeletion", "ScramUpsertion", "QuotaAlteration", "QuotaOp",
    "MutationRequester",
]


class ControllerChannel(Protocol):
    # `requester`: whose controller_mutation_rate the mutations count against (the reply's throttle_ms)
    async def create_topics(self, topics: Sequence[CreatableTopic], *, validate_only: bool = False,
                            timeout_s: float = 30.0, requester: MutationRequester | None = None,
                            ) -> ControllerReply[list[CreateTopicResult]]: ...

    async def delete_topics(self, names: Sequence[str], *, timeout_s: float = 30.0,
                            requester: MutationRequester | None = None) -> ControllerReply[list[DeleteTopicResult]]: ...

    async def create_partitions(self, requests: Sequence[NewPartitions], *, validate_only: bool = False,
                                timeout_s: float = 30.0, requester: MutationRequester | None = None,
                                ) -> ControllerReply[dict[str, tuple[ErrorCode, str | None]]]: ...

    async def alter_configs(self, resources: Mapping[ConfigResource, Mapping[str, str | None]], *,
                            validate_only: bool = False, timeout_s: float = 30.0,
                            ) -> ControllerReply[dict[ConfigResource, ConfigError]]: ...

    async def incremental_alter_configs(
        self, resources: Mapping[ConfigResource, Sequence[tuple[str, AlterOp, str | None]]], *,
        validate_only: bool = False, timeout_s: float = 30.0,
    ) -> ControllerReply[dict[ConfigResource, ConfigError]]: ...

    async def create_acls(self, bindings: Sequence[AclBinding], *,
                          timeout_s: float = 30.0) -> ControllerReply[list[AclResult]]: ...

    async def delete_acls(self, filters: Sequence[AclFilter], *,
                          timeout_s: float = 30.0) -> ControllerReply[list[DeleteAclsResult]]: ...

    async def alter_user_scram_credentials(
        self, deletions: Sequence[ScramDeletion], upsertions: Sequence[ScramUpsertion], *,
        timeout_s: float = 30.0,
    ) -> ControllerReply[dict[str, tuple[ErrorCode, str | None]]]: ...

    async def elect_leaders(self, election_type: int, partitions: Sequence[tuple[str, int]] | None = None, *,
                            timeout_s: float = 30.0) -> ControllerReply[dict[tuple[str, int], ErrorCode]]:
        """ElectLeaders (0 PREFERRED, 1 UNCLEAN) for the partitions, or every partition if None."""
        ...

    async def alter_partition_reassignments(
        self, wanted: Sequence[tuple[str, int, Sequence[int] | None]], *, timeout_s: float = 30.0,
    ) -> ControllerReply[dict[tuple[str, int], ReassignmentResult]]:
        """Start, replace or (replicas None) cancel partition reassignments."""
        ...

    async def list_partition_reassignments(
        self, wanted: Sequence[tuple[str, Sequence[int]]] | None = None, *, timeout_s: float = 30.0,
    ) -> ControllerReply[list[OngoingReassignment]]: ...

    async def unregister_broker(self, broker_id: int, *, timeout_s: float = 30.0,
                                ) -> ControllerReply[tuple[ErrorCode, str | None]]:
        """Decommission a broker (UnregisterBroker): (error, message)."""
        ...

    def controller_addresses(self) -> Mapping[int, tuple[str, int]]:
        """Each controller voter's (host, port) on the controller listener."""
        ...

    async def change_voters(self, request, *, timeout_s: float = 30.0) -> tuple[ErrorCode, str]:
        """A KIP-853 voter change (raft.codec.AddVoterRequest / RemoveVoterRequest) decided by the
        metadata quorum's leader: (error, message) once committed or refused."""
        ...

    async def describe_quorum(self, *, timeout_s: float = 10.0):
        """The metadata quorum's state from its Raft leader (raft.messages.DescribeQuorumResponse)."""
        ...

    async def alter_client_quotas(self, changes: Sequence[QuotaAlteration], *, validate_only: bool = False,
                                  timeout_s: float = 30.0) -> ControllerReply[list[tuple[ErrorCode, str | None]]]:
        """One (error, message) per change, in order."""
        ...

    async def alter_partition(self, broker_id: int, broker_epoch: int, items: Sequence[AlterPartitionItem], *,
                              timeout_s: float = 30.0,
                              ) -> ControllerReply[tuple[ErrorCode, list[AlterPartitionResult]]]:
        """ISR changes from a partition leader (broker.alter_partition_manager): the
        top-level error (STALE_BROKER_EPOCH, ...) and one result per item."""
        ...

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int, *,
                                    timeout_s: float = 30.0) -> tuple[ErrorCode, int, int]:
        """A block of producer ids for InitProducerId: (error, first id, block size)."""
        ...
