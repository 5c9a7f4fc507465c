"""Talking to the active controller from a broker (or a tool): find it, follow it, retry.

`ControllerConnection.call(request)` sends a metadata.controller.rpc request to the node it
believes is the active controller. NOT_CONTROLLER answers (with the leader hint they carry),
refused connections and timeouts move it on to the hinted node or the next voter, with a
short backoff, until the deadline; then ControllerUnavailableError.

`ControllerClient` is the broker's controller channel for forwarded admin requests: it is
structurally the `broker.controller_channel.ControllerChannel` protocol (the metadata layer
cannot import broker/, so `ControllerReply` and `ControllerUnavailableError` are defined
here with the same shape).
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable, Generic, Mapping, Sequence, TypeVar

import trio

from metadata.acls import AclBinding, AclFilter, acl_fields
from metadata.controller import rpc
from metadata.controller.acls import AclResult, DeleteAclsResult
from metadata.controller.alter_partition import AlterPartitionItem, AlterPartitionResult
from metadata.controller.dynamic_configs import AlterOp, ConfigError
from metadata.controller.reassignment import OngoingReassignment, ReassignmentResult
from metadata.controller.mutation_quota import MutationRequester
from metadata.controller.topics import (
    CreatableTopic, CreateTopicResult, DeleteTopicResult, NewPartitions,
)
from metadata.image import ConfigResource
from raft.codec import ErrorResponse
from raft.messages import DescribeQuorumRequest, DescribeQuorumResponse
from raft.node_client import ConnectionLost, RpcClient
from raft.rpc_authentication import open_rpc_stream
from storage.env import Env
from wire.error_codes import ErrorCode

__all__ = ["ControllerConnection", "ControllerClient", "ControllerReply",
           "ControllerUnavailableError"]

log = logging.getLogger("raftkafka.metadata.client")

T = TypeVar("T")
RETRY_BACKOFF = 0.05
CALL_TIMEOUT = 5.0


@dataclass(frozen=True)
class ControllerReply(Generic[T]):
    results: T
    offset: int = -1  # metadata offset the change committed at; -1 = nothing written
    throttle_ms: int = 0  # controller_mutation_rate throttle for the client (mutation requests)


class ControllerUnavailableError(Exception):
    """No active controller answered in time (a retriable condition for the caller)."""


class ControllerConnection:
    def __init__(self, env: Env, voters: Mapping[int, tuple[str, int]], *, cluster_id: str = "", tls=None,
                 login=None):
        if not voters:
            raise ValueError("no controller addresses")
        self.env = env
        self.voters = voters  # the node updates it in place as the voter set changes (KIP-853)
        self.cluster_id = cluster_id
        self.tls = tls  # storage.tls.TlsContext for the controller listener, if it is TLS
        self.login = login  # SaslCredentials when the controller listener is SASL
        self.leader: int | None = None
        self._client: RpcClient | None = None
        self._client_node: int | None = None
        self._nursery: trio.Nursery | None = None
        self._next_guess = 0
        self.generation = 0  # counts connections made: which one an answer came on
        # Called when the current connection breaks: the broker lifecycle heartbeats again at
        # once, so the controller hears it within its close grace (connection_grace).
        self.on_lost: Callable[[], None] | None = None

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Hosts the reader task of the current connection; run it in a nursery."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    async def call(self, request, *, timeout: float = 30.0):
        """The active controller's answer to `request` (never a NOT_CONTROLLER answer)."""
        deadline = self.env.now() + timeout
        while True:
            node = self._target()
            reply = None
            try:
                client = await self._connect(node)
                per_call = max(0.01, min(CALL_TIMEOUT, deadline - self.env.now()))
                reply = await client.call(request, timeout=per_call)
            except (OSError, ConnectionLost, trio.TooSlowError) as e:
                log.debug("controller %d unreachable: %s", node, e)
                self._drop(node)
                self.leader = None
            if reply is not None:
                error = getattr(reply, "error", None)
                if error != ErrorCode.NOT_CONTROLLER:
                    self.leader = node
                    return reply
                hint = getattr(reply, "leader_id", None)
                self.leader = hint if hint in self.voters and hint != node else None
            if self.env.now() >= deadline:
                raise ControllerUnavailableError(
                    f"no active controller answered {type(request).__name__} within {timeout}s")
            if self.leader is None:
                await self.env.sleep(RETRY_BACKOFF)

    def still_connected(self, generation: int) -> bool:
        """Whether connection number `generation` is the current one and still open."""
        return (generation == self.generation and self._client is not None
                and not self._client.lost)

    def _target(self) -> int:
        if self.leader is not None and self.leader in self.voters:  # the set may have changed
            return self.leader
        ids = list(self.voters)
        node = ids[self._next_guess % len(ids)]
        self._next_guess += 1
        return node

    async def _connect(self, node: int) -> RpcClient:
        if self._client is not None and self._client_node == node and not self._client.lost:
            return self._client
        self._drop(self._client_node)
        host, port = self.voters[node]
        with self.env.fail_after(CALL_TIMEOUT):
            stream = await open_rpc_stream(self.env, host, port, tls=self.tls, login=self.login)
        if self._client is not None:  # a concurrent caller connected meanwhile
            if self._client_node == node and not self._client.lost:  # share its connection
                self._nursery.start_soon(trio.aclose_forcefully, stream)
                return self._client
            self._drop(self._client_node)  # replaced: closed, never left open behind our back
        client = RpcClient(self.env, stream, on_lost=self._lost)
        self._client, self._client_node = client, node
        self.generation += 1
        self._nursery.start_soon(client.run)
        return client

    def _lost(self) -> None:
        if self.on_lost is not None:
            self.on_lost()

    def _drop(self, node: int | None) -> None:
        if self._client is not None and self._client_node == node:
            self._nursery.start_soon(trio.aclose_forcefully, self._client.stream)
            self._client = self._client_node = None


class ControllerClient:
    """The broker's controller channel (broker.controller_channel.ControllerChannel).

    Admin requests carry `forwarder()`, this broker's (id, epoch) registration, which the
    controller requires of them (metadata.controller.gate), and the client's timeout. A
    request the controller refuses as a whole (top-level error) fails each of its items."""

    def __init__(self, connection: ControllerConnection, *,
                 forwarder: Callable[[], tuple[int, int]] | None = None):
        self.conn = connection
        self.forwarder = forwarder

    @staticmethod
    def _requester(who: MutationRequester | None) -> dict:
        return {} if who is None else {"user": who.user, "client_id": who.client_id, "strict_quota": who.strict}

    def _admin(self, timeout_s: float) -> dict:
        """The fields every admin request carries."""
        return {"forwarded_by": None if self.forwarder is None else self.forwarder(),
                "timeout_ms": int(timeout_s * 1000)}

    @property
    def cluster_id(self) -> str:
        return self.conn.cluster_id

    async def create_topics(self, topics: Sequence[CreatableTopic], *, validate_only: bool = False,
                            timeout_s: float = 30.0, requester: MutationRequester | None = None,
                            ) -> ControllerReply[list[CreateTopicResult]]:
        infos = [rpc.CreatableTopicInfo(
            t.name, t.num_partitions, t.replication_factor,
            {p: list(r) for p, r in t.assignments.items()} if t.assignments else None,
            dict(t.configs)) for t in topics]
        reply = await self.conn.call(rpc.CreateTopicsRequest(self.cluster_id, infos, validate_only,
                                                             **self._admin(timeout_s), **self._requester(requester)),
                                     timeout=timeout_s)
        if failed := _request_error(reply):
            return ControllerReply([CreateTopicResult(t.name, *failed) for t in topics], reply.offset)
        return ControllerReply([CreateTopicResult(r.name, ErrorCode(r.error), r.message, r.topic_id,
                                                  r.num_partitions, r.replication_factor)
                                for r in reply.results], reply.offset, reply.throttle_time_ms)

    async def delete_topics(self, names: Sequence[str], *, timeout_s: float = 30.0,
                            requester: MutationRequester | None = None) -> ControllerReply[list[DeleteTopicResult]]:
        reply = await self.conn.call(rpc.DeleteTopicsRequest(self.cluster_id, list(names), **self._admin(timeout_s),
                                                             **self._requester(requester)), timeout=timeout_s)
        if failed := _request_error(reply):
            return ControllerReply([DeleteTopicResult(n, None, *failed) for n in names], reply.offset)
        return ControllerReply([DeleteTopicResult(r.name, r.topic_id, ErrorCode(r.error), r.message)
                                for r in reply.results], reply.offset, reply.throttle_time_ms)

    async def create_acls(self, bindings: Sequence[AclBinding], *,
                          timeout_s: float = 30.0) -> ControllerReply[list[AclResult]]:
        reply = await self.conn.call(
            rpc.CreateAclsRequest(self.cluster_id, [rpc.AclInfo(*b) for b in bindings], **self._admin(timeout_s)),
            timeout=timeout_s)
        return ControllerReply([AclResult(ErrorCode(r.error), r.message) for r in reply.results], reply.offset)

    async def delete_acls(self, filters: Sequence[AclFilter], *,
                          timeout_s: float = 30.0) -> ControllerReply[list[DeleteAclsResult]]:
        reply = await self.conn.call(
            rpc.DeleteAclsRequest(self.cluster_id, [rpc.AclFilterInfo(*f) for f in filters], **self._admin(timeout_s)),
            timeout=timeout_s)
        return ControllerReply([DeleteAclsResult(ErrorCode(r.error), r.message,
                                                 [AclBinding(*acl_fields(a)) for a in r.deleted])
                                for r in reply.results], reply.offset)

    async def create_partitions(self, requests: Sequence[NewPartitions], *,
                                validate_only: bool = False, timeout_s: float = 30.0,
                                requester: MutationRequester | None = None,
                                ) -> ControllerReply[dict[str, tuple[ErrorCode, str | None]]]:
        infos = [rpc.NewPartitionsInfo(r.name, r.count, None if r.assignments is None
                                       else [list(a) for a in r.assignments]) for r in requests]
        reply = await self.conn.call(
            rpc.CreatePartitionsRequest(self.cluster_id, infos, validate_only, **self._admin(timeout_s),
                                        **self._requester(requester)),
            timeout=timeout_s)
        if failed := _request_error(reply):
            return ControllerReply({r.name: failed for r in requests}, reply.offset)
        return ControllerReply({r.name: (ErrorCode(r.error), r.message) for r in reply.results},
                               reply.offset, reply.throttle_time_ms)

    async def alter_configs(self, resources: Mapping[ConfigResource, Mapping[str, str | None]], *,
                            validate_only: bool = False, timeout_s: float = 30.0,
                            ) -> ControllerReply[dict[ConfigResource, ConfigError]]:
        infos = [rpc.ConfigResourceInfo(rt, rn, [rpc.ConfigEntryInfo(k, v)
                                                 for k, v in sorted(entries.items())])
                 for (rt, rn), entries in sorted(resources.items())]
        reply = await self.conn.call(rpc.AlterConfigsRequest(self.cluster_id, infos, validate_only,
                                                             **self._admin(timeout_s)), timeout=timeout_s)
        return self._config_reply(reply, resources)

    async def incremental_alter_configs(
        self, resources: Mapping[ConfigResource, Sequence[tuple[str, AlterOp, str | None]]], *,
        validate_only: bool = False, timeout_s: float = 30.0,
    ) -> ControllerReply[dict[ConfigResource, ConfigError]]:
        infos = [rpc.ConfigResourceOps(rt, rn, [rpc.ConfigOpInfo(n, int(op), v) for n, op, v in ops])
                 for (rt, rn), ops in sorted(resources.items())]
        reply = await self.conn.call(
            rpc.IncrementalAlterConfigsRequest(self.cluster_id, infos, validate_only, **self._admin(timeout_s)),
            timeout=timeout_s)
        return self._config_reply(reply, resources)

    async def alter_user_scram_credentials(self, deletions, upsertions, *, timeout_s: float = 30.0,
                                           ) -> ControllerReply[dict[str, tuple[ErrorCode, str | None]]]:
        reply = await self.conn.call(rpc.AlterUserScramCredentialsRequest(
            self.cluster_id, [rpc.ScramDeletionInfo(d.name, d.mechanism) for d in deletions],
            [rpc.ScramUpsertionInfo(u.name, u.mechanism, u.iterations, u.salt, u.salted_password)
             for u in upsertions], **self._admin(timeout_s)), timeout=timeout_s)
        return ControllerReply({r.user: (ErrorCode(r.error), r.message) for r in reply.results}, reply.offset)

    async def alter_client_quotas(self, changes, *, validate_only: bool = False, timeout_s: float = 30.0,
                                  ) -> ControllerReply[list[tuple[ErrorCode, str | None]]]:
        """One (error, message) per metadata.controller.client_quotas.QuotaAlteration, in order."""
        reply = await self.conn.call(rpc.AlterClientQuotasRequest(
            self.cluster_id, [rpc.QuotaAlterationInfo(list(c.entity), [rpc.QuotaOpInfo(o.key, o.value, o.remove)
                                                                      for o in c.ops]) for c in changes],
            validate_only, **self._admin(timeout_s)), timeout=timeout_s)
        if failed := _request_error(reply):
            return ControllerReply([failed for _ in changes], reply.offset)
        return ControllerReply([(ErrorCode(r.error), r.message) for r in reply.results], reply.offset)

    @staticmethod
    def _config_reply(reply, resources) -> ControllerReply[dict[ConfigResource, ConfigError]]:
        if failed := _request_error(reply):
            return ControllerReply({resource: ConfigError(*failed) for resource in resources}, reply.offset)
        return ControllerReply({(r.resource_type, r.resource_name):
                                ConfigError(ErrorCode(r.error), r.message) for r in reply.results},
                               reply.offset)

    async def elect_leaders(self, election_type: int,
                            partitions: Sequence[tuple[str, int]] | None = None, *,
                            timeout_s: float = 30.0) -> ControllerReply[dict[tuple[str, int], ErrorCode]]:
        reply = await self.conn.call(rpc.ElectLeadersRequest(
            self.cluster_id, election_type, None if partitions is None else list(partitions),
            **self._admin(timeout_s)), timeout=timeout_s)
        if (failed := _request_error(reply)) and partitions is not None:
            return ControllerReply({tp: failed[0] for tp in partitions}, reply.offset)
        return ControllerReply({(r.topic, r.partition): ErrorCode(r.error) for r in reply.results},
                               reply.offset)

    async def alter_partition_reassignments(
        self, wanted: Sequence[tuple[str, int, Sequence[int] | None]], *, timeout_s: float = 30.0,
    ) -> ControllerReply[dict[tuple[str, int], ReassignmentResult]]:
        """Start, change or cancel (replicas None) partition reassignments."""
        reply = await self.conn.call(rpc.AlterPartitionReassignmentsRequest(
            self.cluster_id, [rpc.ReassignmentInfo(t, p, None if r is None else list(r)) for t, p, r in wanted],
            **self._admin(timeout_s)), timeout=timeout_s)
        if failed := _request_error(reply):
            return ControllerReply({(t, p): ReassignmentResult(*failed) for t, p, _ in wanted}, reply.offset)
        return ControllerReply({(r.topic, r.partition): ReassignmentResult(ErrorCode(r.error), r.message)
                                for r in reply.results}, reply.offset)

    async def list_partition_reassignments(
        self, wanted: Sequence[tuple[str, Sequence[int]]] | None = None, *, timeout_s: float = 30.0,
    ) -> ControllerReply[list[OngoingReassignment]]:
        reply = await self.conn.call(rpc.ListPartitionReassignmentsRequest(
            self.cluster_id, None if wanted is None else [(t, list(p)) for t, p in wanted]),
            timeout=timeout_s)
        if reply.error != ErrorCode.NONE:
            raise ControllerUnavailableError(f"ListPartitionReassignments: error {reply.error}")
        return ControllerReply([OngoingReassignment(o.topic, o.partition, tuple(o.replicas), tuple(o.adding),
                                                    tuple(o.removing)) for o in reply.reassignments])

    async def unregister_broker(self, broker_id: int, *, timeout_s: float = 30.0,
                                ) -> ControllerReply[tuple[ErrorCode, str | None]]:
        reply = await self.conn.call(rpc.UnregisterBrokerRequest(
            self.cluster_id, broker_id, **self._admin(timeout_s)), timeout=timeout_s)
        return ControllerReply((ErrorCode.of(reply.error), getattr(reply, "message", None)),
                               getattr(reply, "offset", -1))  # a transport's ErrorResponse has neither

    async def alter_partition(self, broker_id: int, broker_epoch: int,
                              items: Sequence[AlterPartitionItem], *, timeout_s: float = 30.0,
                              ) -> ControllerReply[tuple[ErrorCode, list[AlterPartitionResult]]]:
        """ISR changes from a partition leader: (top-level error, per-item results)."""
        infos = [rpc.AlterPartitionItemInfo(i.topic_id, i.partition_id, i.leader_epoch, i.partition_epoch,
                                            list(i.new_isr), None if i.new_isr_broker_epochs is None
                                            else list(i.new_isr_broker_epochs), i.leader_recovery_state)
                 for i in items]
        reply = await self.conn.call(rpc.AlterPartitionRequest(self.cluster_id, broker_id, broker_epoch, infos),
                                     timeout=timeout_s)
        results = [AlterPartitionResult(r.topic_id, r.partition_id, ErrorCode(r.error), r.leader, r.leader_epoch,
                                        tuple(r.isr), r.partition_epoch, r.leader_recovery_state)
                   for r in reply.results]
        return ControllerReply((ErrorCode(reply.error), results), reply.offset)

    async def allocate_producer_ids(self, broker_id: int, broker_epoch: int, *,
                                    timeout_s: float = 30.0) -> tuple[ErrorCode, int, int]:
        reply = await self.conn.call(
            rpc.AllocateProducerIdsRequest(self.cluster_id, broker_id, broker_epoch),
            timeout=timeout_s)
        return ErrorCode(reply.error), reply.first_producer_id, reply.size

    def controller_addresses(self) -> Mapping[int, tuple[str, int]]:
        """Each controller voter's (host, port) on the controller listener."""
        return self.conn.voters

    async def describe_quorum(self, *, timeout_s: float = 10.0) -> DescribeQuorumResponse:
        """The Raft leader's view of the metadata quorum (raft.messages.DescribeQuorumResponse);
        a follower's NOT_LEADER_OR_FOLLOWER moves on to the leader it names, until the timeout."""
        deadline = self.conn.env.now() + timeout_s
        while True:
            left = max(0.01, deadline - self.conn.env.now())
            reply = await self.conn.call(DescribeQuorumRequest(self.cluster_id), timeout=left)
            if reply.error == ErrorCode.NONE or self.conn.env.now() >= deadline:
                return reply
            self.conn.leader = reply.leader_id if reply.leader_id in self.conn.voters else None
            await self.conn.env.sleep(RETRY_BACKOFF)

    async def change_voters(self, request, *, timeout_s: float = 30.0) -> tuple[ErrorCode, str]:
        """A KIP-853 voter change (raft.codec.AddVoterRequest / RemoveVoterRequest), decided by the
        quorum's leader (a follower relays it there): (error, message) once committed or refused."""
        deadline = self.conn.env.now() + timeout_s
        while True:
            left = max(0.01, deadline - self.conn.env.now())
            reply = await self.conn.call(request, timeout=left)
            if isinstance(reply, ErrorResponse):
                return ErrorCode.of(reply.error), reply.message
            if reply.error != ErrorCode.NOT_LEADER_OR_FOLLOWER or self.conn.env.now() >= deadline:
                return ErrorCode.of(reply.error), reply.message
            self.conn.leader = reply.leader_id if reply.leader_id in self.conn.voters else None
            await self.conn.env.sleep(RETRY_BACKOFF)

    async def describe_cluster(self, *, timeout_s: float = 30.0):
        """The active controller's committed brokers and partitions (DescribeClusterResponse)."""
        return await self.conn.call(rpc.DescribeClusterRequest(self.cluster_id), timeout=timeout_s)


def _request_error(reply) -> tuple[ErrorCode, str | None] | None:
    """A top-level error the controller answered for the whole request (a refusal, or a
    fault it renounced over) when it gave no per-item results: (error, message) to give
    every item, else None."""
    if reply.error == ErrorCode.NONE or getattr(reply, "results", None):
        return None
    return ErrorCode(reply.error), getattr(reply, "message", None)
