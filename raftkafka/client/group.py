"""Classic consumer-group membership, client side (eager rebalance protocol).

    FindCoordinator → JoinGroup (MEMBER_ID_REQUIRED: retry with the given id, KIP-394)
    → the leader assigns (range / roundrobin) → SyncGroup → Heartbeat until a
    rebalance is announced → join again;  LeaveGroup on close.

Offsets are committed to and fetched from the coordinator. Any coordinator
error (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, connection loss) makes us
look the coordinator up again; generation errors (ILLEGAL_GENERATION,
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS) mark the membership for re-joining.
"""
from __future__ import annotations


from raftkafka.client.assignors import ASSIGNORS
from raftkafka.client.cluster import Cluster
from raftkafka.client.errors import KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from storage.env import Env
from wire.error_codes import ErrorCode
from wire.protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    FindCoordinatorRequest,
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

__all__ = ["GroupMembership", "CommitFailedError"]

TopicPartition = tuple[str, int]
_COORDINATOR_ERRORS = (ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE,
                       ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
_REJOIN_ERRORS = (ErrorCode.ILLEGAL_GENERATION, ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.REBALANCE_IN_PROGRESS)


class CommitFailedError(KafkaError):
    """The group rebalanced before the commit landed: the partitions may belong to someone else now."""


class GroupMembership:
    def __init__(self, env: Env, cluster: Cluster, group_id: str, *, session_timeout: float = 45.0,
                 rebalance_timeout: float = 300.0, heartbeat_interval: float = 3.0,
                 assignors=("range", "roundrobin"), retry_backoff: float = 0.1,
                 group_instance_id: str | None = None):
        for name in assignors:
            if name not in ASSIGNORS:
                raise ValueError(f"unknown assignor {name!r}; choose from {sorted(ASSIGNORS)}")
        self.env = env
        self.cluster = cluster
        self.group_id = group_id
        self.session_timeout = session_timeout
        self.rebalance_timeout = rebalance_timeout
        self.heartbeat_interval = heartbeat_interval
        self.assignors = list(assignors)
        self.retry_backoff = retry_backoff
        self.group_instance_id = group_instance_id
        self.member_id = ""
        self.generation = -1
        self.leader_id = ""
        self.coordinator: int | None = None
        self.needs_join = True
        # Counts joins begun: an answer to a heartbeat or commit sent before the latest join
        # speaks of a membership we no longer have and must not ask for yet another join
        # (Kafka's generationUnchanged()). Acting on it once flagged a rejoin that the join
        # in progress then cleared, leaving the consumer's poll spinning on a stale flag.
        self.joins_begun = 0
        self.on_rejoin_wanted = None  # called when needs_join is set (the consumer's poll wakes up)

    # ------------------------------------------------------------------ coordinator

    async def _coordinator_request(self, body):
        """Send to the coordinator, finding it first; retries coordinator moves and connection loss."""
        deadline = self.env.now() + self.cluster.request_timeout
        while True:
            try:
                if self.coordinator is None:
                    await self._find_coordinator()
                response = await (await self.cluster.connection(self.coordinator)).request(body)
                code = _top_error(response)
                if code not in _COORDINATOR_ERRORS:
                    return response
            except KafkaConnectionError:
                pass
            except KafkaError as exc:
                if exc.code not in _COORDINATOR_ERRORS:
                    raise
            self.coordinator = None
            if self.env.now() >= deadline:
                raise KafkaTimeoutError(f"group {self.group_id}: no coordinator answered")
            await self.env.sleep(self.retry_backoff)

    async def _find_coordinator(self) -> None:
        response = await self.cluster.request_any(FindCoordinatorRequest(key=self.group_id, key_type=0))
        if response.error_code:
            raise error_for(response.error_code, response.error_message, f"FindCoordinator {self.group_id}")
        if response.node_id not in self.cluster.brokers:
            await self.cluster.refresh()
        self.coordinator = response.node_id

    # ------------------------------------------------------------------ join / sync

    async def join(self, topics: list[str]) -> list[TopicPartition]:
        """Join (or re-join) the group; returns this member's assigned partitions."""
        while True:
            subscription = encode_subscription(ConsumerProtocolSubscription(topics=sorted(topics)))
            request = JoinGroupRequest(
                group_id=self.group_id, session_timeout_ms=int(self.session_timeout * 1000),
                rebalance_timeout_ms=int(self.rebalance_timeout * 1000), member_id=self.member_id,
                group_instance_id=self.group_instance_id, protocol_type="consumer",
                protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name=n, metadata=subscription)
                           for n in self.assignors])
            self.joins_begun += 1
            response = await self._coordinator_request(request)
            code = response.error_code
            if code == ErrorCode.MEMBER_ID_REQUIRED:
                self.member_id = response.member_id
                continue
            if code in (ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.ILLEGAL_GENERATION):
                self.member_id, self.generation = "", -1
                continue
            if code == ErrorCode.REBALANCE_IN_PROGRESS:
                continue
            if code:
                raise error_for(code, context=f"JoinGroup {self.group_id}")
            self.member_id, self.generation, self.leader_id = response.member_id, response.generation_id, response.leader
            assignments = []
            if response.leader == self.member_id:
                assignments = await self._assign(response.protocol_name, response.members)
            sync = await self._coordinator_request(SyncGroupRequest(
                group_id=self.group_id, generation_id=self.generation, member_id=self.member_id,
                group_instance_id=self.group_instance_id, assignments=assignments))
            if sync.error_code in _REJOIN_ERRORS:
                if sync.error_code != ErrorCode.REBALANCE_IN_PROGRESS:
                    self.member_id, self.generation = "", -1
                continue
            if sync.error_code:
                raise error_for(sync.error_code, context=f"SyncGroup {self.group_id}")
            self.needs_join = False
            if not sync.assignment:
                return []
            _, assignment = decode_assignment(sync.assignment)
            return sorted((t.topic, p) for t in assignment.assigned_partitions for p in t.partitions)

    async def _assign(self, protocol: str, members) -> list:
        subscriptions = {}
        for member in members:
            _, sub = decode_subscription(member.metadata)
            subscriptions[member.member_id] = list(sub.topics)
        topics = sorted({t for ts in subscriptions.values() for t in ts})
        await self.cluster.refresh(topics)
        counts = {t: len(self.cluster.topics[t].partitions) for t in topics
                  if t in self.cluster.topics and not self.cluster.topics[t].error}
        plan = ASSIGNORS[protocol](subscriptions, counts)
        return [SyncGroupRequest.SyncGroupRequestAssignment(
            member_id=member, assignment=encode_assignment(ConsumerProtocolAssignment(assigned_partitions=[
                ConsumerProtocolAssignment.TopicPartition(topic=t, partitions=ps)
                for t, ps in sorted(plan[member].items())])))
            for member in sorted(plan)]

    # ------------------------------------------------------------------ heartbeats

    async def heartbeat_loop(self) -> None:
        """Runs for the consumer's lifetime; flags a re-join when the coordinator asks for one."""
        while True:
            await self.env.sleep(self.heartbeat_interval)
            if self.needs_join or self.generation < 0:
                continue
            joins_begun = self.joins_begun
            try:
                response = await self._coordinator_request(HeartbeatRequest(
                    group_id=self.group_id, generation_id=self.generation, member_id=self.member_id))
            except KafkaError:
                continue
            if response.error_code in _REJOIN_ERRORS:
                self._want_rejoin(response.error_code, joins_begun)

    def _want_rejoin(self, code: int, joins_begun: int) -> None:
        """The coordinator refused our membership as it was when `joins_begun` joins had begun."""
        if joins_begun != self.joins_begun or self.needs_join:
            return  # a join began since (or is due): that answer is about an old membership
        if code != ErrorCode.REBALANCE_IN_PROGRESS:
            self.member_id, self.generation = "", -1
        self.needs_join = True
        if self.on_rejoin_wanted is not None:
            self.on_rejoin_wanted()

    async def leave(self) -> None:
        if not self.member_id or self.generation < 0:
            return
        try:
            # v0-2 name the member in member_id, v3+ in the members batch: the codec keeps the one its version has.
            await self._coordinator_request(LeaveGroupRequest(
                group_id=self.group_id, member_id=self.member_id,
                members=[LeaveGroupRequest.MemberIdentity(member_id=self.member_id)]))
        except KafkaError:
            pass  # the session timeout will remove us
        self.member_id, self.generation, self.needs_join = "", -1, True

    # ------------------------------------------------------------------ offsets

    async def commit(self, offsets: dict[TopicPartition, int], *, as_member: bool) -> None:
        """Commit `offsets` (the next offset to read, per partition)."""
        topics: dict[str, list] = {}
        for (topic, partition), offset in sorted(offsets.items()):
            topics.setdefault(topic, []).append(OffsetCommitRequest.OffsetCommitRequestPartition(
                partition_index=partition, committed_offset=offset, committed_metadata=""))
        request = OffsetCommitRequest(
            group_id=self.group_id, generation_id=self.generation if as_member else -1,
            member_id=self.member_id if as_member else "",
            topics=[OffsetCommitRequest.OffsetCommitRequestTopic(name=t, partitions=ps)
                    for t, ps in sorted(topics.items())])
        deadline = self.env.now() + self.cluster.request_timeout
        joins_begun = self.joins_begun
        response = await self._coordinator_request(request)
        while any(p.error_code in _COORDINATOR_ERRORS for t in response.topics for p in t.partitions):
            self.coordinator = None  # it moved while we were committing
            if self.env.now() >= deadline:
                raise KafkaTimeoutError(f"group {self.group_id}: commit found no coordinator")
            await self.env.sleep(self.retry_backoff)
            response = await self._coordinator_request(request)
        for t in response.topics:
            for p in t.partitions:
                if p.error_code in _REJOIN_ERRORS:
                    if as_member:
                        self._want_rejoin(p.error_code, joins_begun)
                    raise CommitFailedError(f"commit to {self.group_id} failed: the group rebalanced",
                                            p.error_code)
                if p.error_code:
                    raise error_for(p.error_code, context=f"OffsetCommit {t.name}-{p.partition_index}")

    async def committed_all(self) -> dict[TopicPartition, int | None]:
        """Every offset the group has committed (OffsetFetch with null topics, v2+)."""
        return await self.committed(None)

    async def committed(self, partitions: list[TopicPartition] | None) -> dict[TopicPartition, int | None]:
        request_topics = None
        if partitions is not None:
            topics: dict[str, list[int]] = {}
            for topic, partition in sorted(partitions):
                topics.setdefault(topic, []).append(partition)
            request_topics = [OffsetFetchRequest.OffsetFetchRequestTopic(name=t, partition_indexes=ps)
                              for t, ps in sorted(topics.items())]
        response = await self._coordinator_request(OffsetFetchRequest(group_id=self.group_id, topics=request_topics))
        if response.error_code:
            raise error_for(response.error_code, context=f"OffsetFetch {self.group_id}")
        out: dict[TopicPartition, int | None] = {tp: None for tp in partitions or ()}
        for t in response.topics:
            for p in t.partitions:
                if p.error_code:
                    raise error_for(p.error_code, context=f"OffsetFetch {t.name}-{p.partition_index}")
                out[(t.name, p.partition_index)] = p.committed_offset if p.committed_offset >= 0 else None
        return out


def _top_error(response) -> int:
    return getattr(response, "error_code", 0) or 0
