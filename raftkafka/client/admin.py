"""The admin client: topics, partitions, configs, groups, offsets, ACLs, client quotas, cluster description.

    async with Admin(env, "host:9092") as admin:
        await admin.create_topic("events", partitions=6, replication_factor=3)
        await admin.describe_topics(["events"])

Batch calls (`create_topics`, `delete_topics`, ...) return `{name: None or the
KafkaError for that name}`; the single-item helpers raise instead. Topic
changes go to the controller named in the metadata (any broker forwards them
in KRaft mode, so any broker works when that one is unknown) and retry
NOT_CONTROLLER after refreshing the metadata. As the Java AdminClient (KIP-599), the names
refused with THROTTLING_QUOTA_EXCEEDED (the controller_mutation_rate quota) are sent again
after the response's throttle time until the call's `timeout_ms` has passed, unless
`retry_on_quota_violation=False`; those still refused then keep that error.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import trio

from raftkafka.client.security import PLAINTEXT_CLIENT, ClientSecurity
from raftkafka.client.cluster import BrokerInfo, Cluster, PartitionInfo, TopicInfo
from raftkafka.client.errors import KafkaError, KafkaTimeoutError, error_for
from raftkafka.client.group import GroupMembership
from raftkafka.client.offsets import list_offsets
from storage.env import Env
from wire.acl_codes import AclBinding, AclFilter
from wire.error_codes import ErrorCode
from wire.protocol import (
    AlterClientQuotasRequest, AlterPartitionReassignmentsRequest, AlterUserScramCredentialsRequest,
    DescribeClientQuotasRequest, DescribeUserScramCredentialsRequest, ElectLeadersRequest,
    ListPartitionReassignmentsRequest,
    ApiKey,
    CreateAclsRequest,
    CreatePartitionsRequest,
    CreateTopicsRequest,
    DeleteAclsRequest,
    DeleteGroupsRequest,
    DeleteTopicsRequest,
    DescribeAclsRequest,
    DescribeClusterRequest,
    DescribeConfigsRequest,
    DescribeGroupsRequest,
    DescribeTopicPartitionsRequest,
    IncrementalAlterConfigsRequest,
    ListGroupsRequest,
    OffsetDeleteRequest,
    decode_assignment,
)

__all__ = ["Admin", "NewTopic", "ConfigEntry", "GroupDescription", "MemberDescription", "ClusterDescription",
           "RESOURCE_TOPIC", "RESOURCE_BROKER"]

RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4
_SET, _DELETE = 0, 1


@dataclass(frozen=True)
class NewTopic:
    name: str
    num_partitions: int = 1
    replication_factor: int = -1  # -1: the broker's default.replication.factor
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ConfigEntry:
    name: str
    value: str | None
    read_only: bool
    source: int
    sensitive: bool


@dataclass(frozen=True)
class MemberDescription:
    member_id: str
    client_id: str
    client_host: str
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    error: KafkaError | None = None


@dataclass(frozen=True)
class ClusterDescription:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[BrokerInfo, ...]


class Admin:
    def __init__(self, env: Env, bootstrap_servers, *, client_id: str = "raftkafka-admin",
                 request_timeout_ms: float = 30_000, retry_backoff_ms: float = 100,
                 security: ClientSecurity = PLAINTEXT_CLIENT):
        self.env = env
        self._bootstrap = bootstrap_servers
        self._options = dict(client_id=client_id, request_timeout=request_timeout_ms / 1000,
                             retry_backoff=retry_backoff_ms / 1000, security=security)
        self.cluster: Cluster | None = None
        self._nursery_manager = None

    async def __aenter__(self) -> "Admin":
        self._nursery_manager = trio.open_nursery()
        nursery = await self._nursery_manager.__aenter__()
        self.cluster = Cluster(self.env, nursery, self._bootstrap, **self._options)
        self._nursery = nursery
        return self

    async def __aexit__(self, *exc_info) -> bool:
        self._nursery.cancel_scope.cancel()
        with trio.CancelScope(shield=True):
            await self.cluster.aclose()
        await self._nursery_manager.__aexit__(None, None, None)
        return False

    # ------------------------------------------------------------------ routing

    async def _to_controller(self, build, results_of) -> tuple[dict[str, KafkaError | None], float]:
        """Send to the controller, retrying names that got NOT_CONTROLLER or a retriable error;
        the results by name and the response's throttle time in seconds."""
        deadline = self.env.now() + self.cluster.request_timeout
        if self.cluster.last_refresh == float("-inf"):
            await self.cluster.refresh()
        while True:
            node = self.cluster.controller_id
            try:
                if node in self.cluster.brokers:
                    response = await self.cluster.send(node, build())
                else:
                    response = await self.cluster.request_any(build())
                results = {name: (error_for(code, message, name) if code else None)
                           for name, code, message in results_of(response)}
                if not any(e is not None and e.code == ErrorCode.NOT_CONTROLLER for e in results.values()):
                    return results, (getattr(response, "throttle_time_ms", 0) or 0) / 1000
            except KafkaError as exc:
                if not exc.retriable:
                    raise
            if self.env.now() >= deadline:
                raise KafkaTimeoutError("no controller answered in time")
            await self.env.sleep(self.cluster.retry_backoff)
            await self.cluster.refresh()

    async def _mutate(self, names: list[str], build, results_of, timeout_ms: int,
                      retry_on_quota_violation: bool) -> dict[str, KafkaError | None]:
        """A topic mutation (`build(names)` is its request for those names), sending the names
        refused with THROTTLING_QUOTA_EXCEEDED again once the throttle time has passed, while
        that is before `timeout_ms` from now (as the Java AdminClient's calls do)."""
        deadline = self.env.now() + timeout_ms / 1000
        results: dict[str, KafkaError | None] = {}
        pending = list(names)
        while True:
            answered, throttle_s = await self._to_controller(lambda: build(pending), results_of)
            results.update(answered)
            pending = [name for name, error in answered.items()
                       if error is not None and error.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED]
            if not pending or not retry_on_quota_violation or self.env.now() + throttle_s >= deadline:
                return results
            # the connection also holds back its next request for the throttle time (KIP-219)
            await self.env.sleep(throttle_s)

    # ------------------------------------------------------------------ topics

    async def create_topics(self, topics: list[NewTopic], *, timeout_ms: int = 60_000,
                            validate_only: bool = False,
                            retry_on_quota_violation: bool = True) -> dict[str, KafkaError | None]:
        by_name = {t.name: t for t in topics}

        def build(names):
            return CreateTopicsRequest(timeout_ms=timeout_ms, validate_only=validate_only, topics=[
                CreateTopicsRequest.CreatableTopic(
                    name=t.name, num_partitions=t.num_partitions, replication_factor=t.replication_factor,
                    assignments=[], configs=[CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                                             for k, v in sorted(t.configs.items())])
                for t in (by_name[n] for n in names)])
        return await self._mutate(list(by_name), build,
                                  lambda r: [(t.name, t.error_code, t.error_message) for t in r.topics],
                                  timeout_ms, retry_on_quota_violation)

    async def create_topic(self, name: str, partitions: int = 1, replication_factor: int = -1,
                           configs: dict[str, str] | None = None) -> None:
        error = (await self.create_topics([NewTopic(name, partitions, replication_factor, configs or {})]))[name]
        if error is not None:
            raise error

    async def delete_topics(self, names: list[str], *, timeout_ms: int = 60_000,
                            retry_on_quota_violation: bool = True) -> dict[str, KafkaError | None]:
        return await self._mutate(
            list(dict.fromkeys(names)), lambda pending: DeleteTopicsRequest(topic_names=pending, timeout_ms=timeout_ms),
            lambda r: [(t.name, t.error_code, None) for t in r.responses], timeout_ms, retry_on_quota_violation)

    async def create_partitions(self, new_totals: dict[str, int], *, timeout_ms: int = 60_000,
                                validate_only: bool = False,
                                retry_on_quota_violation: bool = True) -> dict[str, KafkaError | None]:
        return await self._mutate(
            sorted(new_totals), lambda pending: CreatePartitionsRequest(
                timeout_ms=timeout_ms, validate_only=validate_only, topics=[
                    CreatePartitionsRequest.CreatePartitionsTopic(name=n, count=new_totals[n], assignments=None)
                    for n in pending]),
            lambda r: [(t.name, t.error_code, t.error_message) for t in r.results], timeout_ms,
            retry_on_quota_violation)

    async def list_topics(self, *, include_internal: bool = False) -> dict[str, TopicInfo]:
        self.cluster.want_all_topics = True
        try:
            await self.cluster.refresh()
        finally:
            self.cluster.want_all_topics = False
        return {n: t for n, t in sorted(self.cluster.topics.items())
                if not t.error and (include_internal or not t.is_internal)}

    async def describe_topics(self, names: list[str]) -> dict[str, TopicInfo]:
        """Raises UNKNOWN_TOPIC_OR_PARTITION (or another error) for a name that cannot be described."""
        await self.cluster.refresh(names)
        out = {}
        for name in names:
            info = self.cluster.topics.get(name)
            if info is None or info.error:
                raise error_for(info.error if info else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, context=name)
            out[name] = info
        return out

    async def describe_topic_partitions(self, names: list[str]) -> dict[str, TopicInfo]:
        """As `describe_topics`, with each partition's eligible leader replicas (KIP-966): asked with
        DescribeTopicPartitions a page at a time when the broker serves it, else from the metadata
        (and then `elr`/`last_known_elr` stay None), as Kafka's admin client does."""
        connection = await self.cluster.any_connection()
        if not names or not connection.supports(ApiKey.DESCRIBE_TOPIC_PARTITIONS):
            return await self.describe_topics(names)
        R = DescribeTopicPartitionsRequest
        topics = [R.TopicRequest(name=n) for n in sorted(set(names))]
        out: dict[str, TopicInfo] = {}
        cursor = None
        while True:
            r = await connection.request(R(topics=topics, cursor=cursor))
            for t in r.topics:
                if t.error_code:
                    raise error_for(t.error_code, context=t.name)
                info = out.setdefault(t.name, TopicInfo(t.name, is_internal=t.is_internal, topic_id=t.topic_id))
                for p in t.partitions:
                    info.partitions[p.partition_index] = PartitionInfo(
                        p.partition_index, p.leader_id, tuple(p.replica_nodes), tuple(p.isr_nodes), p.error_code,
                        p.leader_epoch, _ids_or_none(p.eligible_leader_replicas), _ids_or_none(p.last_known_elr))
            following = r.next_cursor
            if following is None:
                return out
            if cursor is not None and (following.topic_name, following.partition_index) <= (
                    cursor.topic_name, cursor.partition_index):
                raise KafkaError(f"DescribeTopicPartitions: the next page at {following.topic_name}/"
                                 f"{following.partition_index} does not move past the last")
            cursor = R.Cursor(topic_name=following.topic_name, partition_index=following.partition_index)

    # ------------------------------------------------------------------ cluster and configs

    async def describe_cluster(self) -> ClusterDescription:
        connection = await self.cluster.any_connection()
        if connection.supports(ApiKey.DESCRIBE_CLUSTER):
            r = await connection.request(DescribeClusterRequest(include_cluster_authorized_operations=False))
            if r.error_code:
                raise error_for(r.error_code, r.error_message, "DescribeCluster")
            brokers = tuple(BrokerInfo(b.broker_id, b.host, b.port, b.rack) for b in r.brokers)
            return ClusterDescription(r.cluster_id, r.controller_id, brokers)
        await self.cluster.refresh()  # older brokers: the metadata says the same
        return ClusterDescription(self.cluster.cluster_id, self.cluster.controller_id,
                                  tuple(b for _, b in sorted(self.cluster.brokers.items())))

    async def describe_configs(self, resources: list[tuple[int, str]], keys: list[str] | None = None
                               ) -> dict[tuple[int, str], dict[str, ConfigEntry]]:
        r = await self.cluster.request_any(DescribeConfigsRequest(include_synonyms=False, resources=[
            DescribeConfigsRequest.DescribeConfigsResource(resource_type=t, resource_name=n, configuration_keys=keys)
            for t, n in resources]))
        out = {}
        for result in r.results:
            if result.error_code:
                raise error_for(result.error_code, result.error_message, result.resource_name)
            out[(result.resource_type, result.resource_name)] = {
                c.name: ConfigEntry(c.name, c.value, c.read_only, c.config_source, c.is_sensitive)
                for c in result.configs}
        return out

    async def alter_configs(self, resource: tuple[int, str], changes: dict[str, str | None], *,
                            validate_only: bool = False) -> None:
        """Incremental: set each name to its value, or delete it (back to default) when None."""
        resource_type, name = resource
        r = await self.cluster.request_any(IncrementalAlterConfigsRequest(validate_only=validate_only, resources=[
            IncrementalAlterConfigsRequest.AlterConfigsResource(
                resource_type=resource_type, resource_name=name, configs=[
                    IncrementalAlterConfigsRequest.AlterableConfig(
                        name=k, config_operation=_DELETE if v is None else _SET, value=v)
                    for k, v in sorted(changes.items())])]))
        for result in r.responses:
            if result.error_code:
                raise error_for(result.error_code, result.error_message, result.resource_name)

    # ------------------------------------------------------------------ cluster operations

    async def alter_partition_reassignments(self, targets: dict[tuple[str, int], list[int] | None], *,
                                            timeout_ms: int = 60_000) -> dict[tuple[str, int], KafkaError | None]:
        """Start (target replicas) or cancel (None) partition reassignments (KIP-455)."""
        R = AlterPartitionReassignmentsRequest
        by_topic: dict[str, list] = {}
        for (topic, partition), replicas in sorted(targets.items()):
            by_topic.setdefault(topic, []).append(R.ReassignablePartition(
                partition_index=partition, replicas=None if replicas is None else list(replicas)))
        r = await self.cluster.request_any(R(timeout_ms=timeout_ms, topics=[
            R.ReassignableTopic(name=t, partitions=ps) for t, ps in by_topic.items()]))
        if r.error_code:
            raise error_for(r.error_code, r.error_message, "AlterPartitionReassignments")
        return {(t.name, p.partition_index): error_for(p.error_code, p.error_message, f"{t.name}-{p.partition_index}")
                if p.error_code else None for t in r.responses for p in t.partitions}

    async def list_partition_reassignments(self, partitions: list[tuple[str, int]] | None = None, *,
                                           timeout_ms: int = 60_000
                                           ) -> dict[tuple[str, int], tuple[list[int], list[int], list[int]]]:
        """(topic, partition) -> (replicas, adding, removing) for every reassignment in progress."""
        R = ListPartitionReassignmentsRequest
        topics = None if partitions is None else [
            R.ListPartitionReassignmentsTopics(name=t, partition_indexes=ps) for t, ps in _by_topic(partitions)]
        r = await self.cluster.request_any(R(timeout_ms=timeout_ms, topics=topics))
        if r.error_code:
            raise error_for(r.error_code, r.error_message, "ListPartitionReassignments")
        return {(t.name, p.partition_index): (list(p.replicas), list(p.adding_replicas), list(p.removing_replicas))
                for t in r.topics for p in t.partitions}

    async def elect_leaders(self, election_type: int, partitions: list[tuple[str, int]] | None = None, *,
                            timeout_ms: int = 60_000) -> dict[tuple[str, int], KafkaError | None]:
        """ElectLeaders (0 PREFERRED, 1 UNCLEAN) for the partitions, or every partition (None)."""
        R = ElectLeadersRequest
        topic_partitions = None if partitions is None else [
            R.TopicPartitions(topic=t, partitions=ps) for t, ps in _by_topic(partitions)]
        r = await self.cluster.request_any(R(election_type=election_type, topic_partitions=topic_partitions,
                                             timeout_ms=timeout_ms))
        if r.error_code:
            raise error_for(r.error_code, None, "ElectLeaders")
        return {(t.topic, p.partition_id): error_for(p.error_code, p.error_message) if p.error_code else None
                for t in r.replica_election_results for p in t.partition_result}

    # ------------------------------------------------------------------ SCRAM users (KIP-554)

    async def describe_user_scram_credentials(self, users: list[str] | None = None
                                              ) -> dict[str, list[tuple[int, int]]]:
        """user -> [(mechanism id, iterations)]; every user with a credential when `users` is None."""
        R = DescribeUserScramCredentialsRequest
        r = await self.cluster.request_any(R(users=None if users is None else [R.UserName(name=u) for u in users]))
        if r.error_code:
            raise error_for(r.error_code, r.error_message, "DescribeUserScramCredentials")
        out = {}
        for result in r.results:
            if result.error_code:
                raise error_for(result.error_code, result.error_message, result.user)
            out[result.user] = [(c.mechanism, c.iterations) for c in result.credential_infos]
        return out

    async def alter_user_scram_credentials(self, upsertions=(), deletions=()) -> dict[str, KafkaError | None]:
        """`upsertions`: (user, mechanism id, iterations, salt, salted password); `deletions`:
        (user, mechanism id). The password itself never leaves the caller."""
        R = AlterUserScramCredentialsRequest
        r = await self.cluster.request_any(R(
            deletions=[R.ScramCredentialDeletion(name=u, mechanism=m) for u, m in deletions],
            upsertions=[R.ScramCredentialUpsertion(name=u, mechanism=m, iterations=i, salt=s, salted_password=p)
                        for u, m, i, s, p in upsertions]))
        return {x.user: error_for(x.error_code, x.error_message, x.user) if x.error_code else None for x in r.results}

    # ------------------------------------------------------------------ client quotas (KIP-546)

    async def describe_client_quotas(self, components=(), *, strict: bool = False
                                     ) -> list[tuple[tuple[tuple[str, str | None], ...], dict[str, float]]]:
        """[(entity, {key: value})]: `components` are (entity type, match type 0 exact / 1 default /
        2 any named, match or None); an entity is ((type, name or None for <default>), ...)."""
        R = DescribeClientQuotasRequest
        r = await self.cluster.request_any(R(components=[R.ComponentData(entity_type=t, match_type=m, match=n)
                                                         for t, m, n in components], strict=strict))
        if r.error_code:
            raise error_for(r.error_code, r.error_message, "DescribeClientQuotas")
        return [(tuple((e.entity_type, e.entity_name) for e in entry.entity),
                 {v.key: v.value for v in entry.values}) for entry in r.entries or ()]

    async def alter_client_quotas(self, alterations, *, validate_only: bool = False) -> list[KafkaError | None]:
        """`alterations`: [(entity, {key: value, or None to remove})]; one result per alteration."""
        R = AlterClientQuotasRequest
        r = await self.cluster.request_any(R(entries=[R.EntryData(
            entity=[R.EntityData(entity_type=t, entity_name=n) for t, n in entity],
            ops=[R.OpData(key=k, value=0.0 if v is None else float(v), remove=v is None) for k, v in ops.items()])
            for entity, ops in alterations], validate_only=validate_only))
        return [error_for(x.error_code, x.error_message, "AlterClientQuotas") if x.error_code else None
                for x in r.entries]

    # ------------------------------------------------------------------ groups and offsets

    async def list_groups(self) -> list[tuple[str, str]]:
        """(group id, protocol type) from every broker (each lists the groups it coordinates)."""
        await self.cluster.refresh()
        groups = set()
        for node in sorted(self.cluster.brokers):
            r = await self.cluster.send(node, ListGroupsRequest())
            if r.error_code:
                raise error_for(r.error_code, context=f"ListGroups on broker {node}")
            groups |= {(g.group_id, g.protocol_type) for g in r.groups}
        return sorted(groups)

    async def describe_groups(self, group_ids: list[str]) -> dict[str, GroupDescription]:
        out = {}
        for group_id in group_ids:
            membership = GroupMembership(self.env, self.cluster, group_id)
            r = await membership._coordinator_request(DescribeGroupsRequest(
                groups=[group_id], include_authorized_operations=False))
            for g in r.groups:
                members = []
                for m in g.members:
                    assigned: tuple = ()
                    if g.protocol_type == "consumer" and m.member_assignment:
                        try:
                            _, a = decode_assignment(m.member_assignment)
                            assigned = tuple(sorted((t.topic, p) for t in a.assigned_partitions for p in t.partitions))
                        except ValueError:
                            pass  # another client's unreadable assignment: show none
                    members.append(MemberDescription(m.member_id, m.client_id, m.client_host, assigned))
                error = error_for(g.error_code, context=g.group_id) if g.error_code else None
                out[g.group_id] = GroupDescription(g.group_id, g.group_state, g.protocol_type, g.protocol_data,
                                                   tuple(members), error)
        return out

    async def delete_groups(self, group_ids: list[str]) -> dict[str, KafkaError | None]:
        out = {}
        for group_id in group_ids:
            membership = GroupMembership(self.env, self.cluster, group_id)
            r = await membership._coordinator_request(DeleteGroupsRequest(group_names=[group_id]))
            for result in r.results:
                out[result.group_id] = error_for(result.error_code, context=result.group_id) \
                    if result.error_code else None
        return out

    async def delete_consumer_group_offsets(self, group_id: str, partitions) -> dict[tuple[str, int], KafkaError | None]:
        """OffsetDelete: forget the group's committed offsets of `partitions` (Kafka refuses a
        partition of a topic the group's members are still subscribed to); error per partition."""
        topics: dict[str, list[int]] = {}
        for topic, partition in sorted(tuple(tp) for tp in partitions):
            topics.setdefault(topic, []).append(partition)
        R = OffsetDeleteRequest
        membership = GroupMembership(self.env, self.cluster, group_id)
        response = await membership._coordinator_request(R(group_id=group_id, topics=[
            R.OffsetDeleteRequestTopic(name=t, partitions=[R.OffsetDeleteRequestPartition(partition_index=p)
                                                           for p in ps]) for t, ps in sorted(topics.items())]))
        if response.error_code:
            raise error_for(response.error_code, context=f"OffsetDelete {group_id}")
        return {(t.name, p.partition_index): error_for(p.error_code, context=f"{t.name}-{p.partition_index}")
                if p.error_code else None for t in response.topics for p in t.partitions}

    async def find_coordinator(self, group_id: str) -> BrokerInfo:
        """The broker coordinating `group_id` (FindCoordinator)."""
        membership = GroupMembership(self.env, self.cluster, group_id)
        await membership._find_coordinator()
        broker = self.cluster.brokers.get(membership.coordinator)
        if broker is None:
            await self.cluster.refresh()
            broker = self.cluster.brokers.get(membership.coordinator) or BrokerInfo(membership.coordinator, "", -1)
        return broker

    async def list_consumer_group_offsets(self, group_id: str, partitions=None) -> dict[tuple[str, int], int | None]:
        """Committed offsets of a group: for `partitions`, or every partition it committed."""
        membership = GroupMembership(self.env, self.cluster, group_id)
        if partitions is not None:
            return await membership.committed([tuple(tp) for tp in partitions])
        return await membership.committed_all()

    async def list_offsets(self, specs: dict) -> dict[tuple[str, int], tuple[int, int]]:
        """{tp: "earliest" | "latest" | timestamp ms} → {tp: (offset, timestamp)}."""
        named = {"earliest": -2, "latest": -1}
        return await list_offsets(self.cluster, {tuple(tp): named.get(s, s) for tp, s in specs.items()})

    # ------------------------------------------------------------------ ACLs

    async def create_acls(self, bindings: list[AclBinding]) -> list[KafkaError | None]:
        """One result per binding, in order: None or its error."""
        r = await self.cluster.request_any(CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
            resource_type=b.resource_type, resource_name=b.resource_name, resource_pattern_type=b.pattern_type,
            principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission)
            for b in bindings]))
        return [error_for(x.error_code, x.error_message, "CreateAcls") if x.error_code else None for x in r.results]

    async def describe_acls(self, flt: AclFilter = AclFilter()) -> list[AclBinding]:
        r = await self.cluster.request_any(DescribeAclsRequest(**_filter_fields(flt)))
        if r.error_code:
            raise error_for(r.error_code, r.error_message, "DescribeAcls")
        return [AclBinding(res.resource_type, res.resource_name, res.pattern_type, a.principal, a.host, a.operation,
                           a.permission_type) for res in r.resources for a in res.acls]

    async def delete_acls(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """The bindings each filter deleted; raises the first filter's error."""
        r = await self.cluster.request_any(DeleteAclsRequest(filters=[
            DeleteAclsRequest.DeleteAclsFilter(**_filter_fields(f)) for f in filters]))
        out = []
        for result in r.filter_results:
            if result.error_code:
                raise error_for(result.error_code, result.error_message, "DeleteAcls")
            out.append([AclBinding(m.resource_type, m.resource_name, m.pattern_type, m.principal, m.host,
                                   m.operation, m.permission_type) for m in result.matching_acls])
        return out


def _by_topic(partitions) -> list[tuple[str, list[int]]]:
    """(topic, partition) pairs grouped by topic, in first-seen order."""
    out: dict[str, list[int]] = {}
    for topic, partition in partitions:
        out.setdefault(topic, []).append(partition)
    return list(out.items())


def _filter_fields(f: AclFilter) -> dict:
    return dict(resource_type_filter=f.resource_type, resource_name_filter=f.resource_name,
                pattern_type_filter=f.pattern_type, principal_filter=f.principal, host_filter=f.host,
                operation=f.operation, permission_type=f.permission)


def _ids_or_none(ids) -> tuple[int, ...] | None:
    return None if ids is None else tuple(ids)
