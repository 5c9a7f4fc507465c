"""Every API's authorization check (docs/authorization.md's table): a broker with the authorizer
on, a connection whose principal is set directly (User:alice), each request refused without the
ACL the table names and let through once exactly that ACL is added."""
from __future__ import annotations

import pytest
import trio

from broker.controller_channel import CreatableTopic
from metadata.authorizer import AuthorizerSettings
from tests.broker import builders as B
from tests.broker.harness import RawClient, running_cluster
from wire.acl_codes import CLUSTER_NAME, AclBinding, AclFilter, AclOperation as Op, AclPermission, PatternType
from wire.acl_codes import ResourceType as Res
from wire.error_codes import ErrorCode as E
from wire.protocol import (
    AlterClientQuotasRequest, AlterConfigsRequest, CreateAclsRequest, DescribeClientQuotasRequest, HeartbeatRequest, LeaveGroupRequest, OffsetDeleteRequest,
    SyncGroupRequest, CreatePartitionsRequest, DeleteAclsRequest, DeleteGroupsRequest, DescribeAclsRequest,
    DescribeClusterRequest, DescribeConfigsRequest, DescribeGroupsRequest, FindCoordinatorRequest,
    IncrementalAlterConfigsRequest, InitProducerIdRequest, JoinGroupRequest, ListGroupsRequest,
    OffsetCommitRequest, OffsetFetchRequest,
)
from wire.security.connection_security import ConnectionSecurity
from wire.security.principal import parse_principal

ALICE = "User:alice"
TOPIC, GROUP = "t", "g"
TOPIC_CONFIG = 2
AUTHZ = {"authorizer": AuthorizerSettings(enabled=True, super_users=frozenset({"User:admin"}))}
GROUPS = {"offsets.topic.num.partitions": "1", "offsets.topic.replication.factor": "1",
          "group.initial.rebalance.delay.ms": "0"}


def _first(resp, *path):
    for name in path:
        resp = getattr(resp, name)
        if isinstance(resp, list):
            resp = resp[0]
    return resp


def _commit():
    R = OffsetCommitRequest
    return R(group_id=GROUP, generation_id=-1, member_id="", topics=[R.OffsetCommitRequestTopic(
        name=TOPIC, partitions=[R.OffsetCommitRequestPartition(partition_index=0, committed_offset=0,
                                                               committed_metadata="")])])


def _acl_filter():
    return dict(resource_type_filter=Res.ANY, resource_name_filter=None, pattern_type_filter=PatternType.ANY,
                principal_filter=None, host_filter=None, operation=Op.ANY, permission_type=AclPermission.ANY)


# (row, the ACL that allows it, request, version, "was it refused?" from the response)
ROWS = [
    ("Metadata named topic", (Res.TOPIC, TOPIC, Op.DESCRIBE), B.metadata(TOPIC, auto_create=False), 7,
     lambda r: r.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("Metadata all topics", (Res.TOPIC, TOPIC, Op.DESCRIBE), B.metadata(all_topics=True), 7,
     lambda r: TOPIC not in [t.name for t in r.topics]),
    ("Metadata auto-create", (Res.TOPIC, "new", Op.CREATE), B.metadata("new"), 7,
     lambda r: r.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("Produce", (Res.TOPIC, TOPIC, Op.WRITE), B.produce(TOPIC, 0, B.batch()), 8,
     lambda r: B.one_partition(r).error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("Fetch", (Res.TOPIC, TOPIC, Op.READ), B.fetch([(TOPIC, 0, 0)]), 11,
     lambda r: B.one_partition(r).error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("Fetch as follower", (Res.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION), B.fetch([(TOPIC, 0, 0)], replica_id=7), 11,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("ListOffsets", (Res.TOPIC, TOPIC, Op.DESCRIBE), B.list_offsets(TOPIC, 0, -1), 3,
     lambda r: _first(r, "topics", "partitions").error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("OffsetForLeaderEpoch", (Res.TOPIC, TOPIC, Op.DESCRIBE), B.offset_for_epoch(TOPIC, 0, 0), 3,
     lambda r: _first(r, "topics", "partitions").error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("CreateTopics", (Res.CLUSTER, CLUSTER_NAME, Op.CREATE), B.create_topic("made"), 4,
     lambda r: r.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("DeleteTopics", (Res.TOPIC, "doomed", Op.DELETE), B.delete_topics("doomed"), 3,
     lambda r: r.responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("CreatePartitions", (Res.TOPIC, TOPIC, Op.ALTER), CreatePartitionsRequest(
        topics=[CreatePartitionsRequest.CreatePartitionsTopic(name=TOPIC, count=2, assignments=None)],
        timeout_ms=5000, validate_only=True), 1,
     lambda r: r.results[0].error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("DescribeConfigs", (Res.TOPIC, TOPIC, Op.DESCRIBE_CONFIGS), DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=TOPIC_CONFIG, resource_name=TOPIC,
                                                       configuration_keys=None)]), 2,
     lambda r: r.results[0].error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("DescribeConfigs broker", (Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS), DescribeConfigsRequest(resources=[
        DescribeConfigsRequest.DescribeConfigsResource(resource_type=4, resource_name="1",
                                                       configuration_keys=None)]), 2,
     lambda r: r.results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("IncrementalAlterConfigs", (Res.TOPIC, TOPIC, Op.ALTER_CONFIGS), IncrementalAlterConfigsRequest(
        validate_only=True, resources=[IncrementalAlterConfigsRequest.AlterConfigsResource(
            resource_type=TOPIC_CONFIG, resource_name=TOPIC, configs=[
                IncrementalAlterConfigsRequest.AlterableConfig(name="retention.ms", config_operation=0,
                                                               value="1000")])]), 1,
     lambda r: r.responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("AlterConfigs", (Res.TOPIC, TOPIC, Op.ALTER_CONFIGS), AlterConfigsRequest(
        validate_only=True, resources=[AlterConfigsRequest.AlterConfigsResource(
            resource_type=TOPIC_CONFIG, resource_name=TOPIC, configs=[
                AlterConfigsRequest.AlterableConfig(name="retention.ms", value="1000")])]), 1,
     lambda r: r.responses[0].error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("DescribeCluster", (Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE),
     DescribeClusterRequest(include_cluster_authorized_operations=True), 1,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("FindCoordinator", (Res.GROUP, GROUP, Op.DESCRIBE), FindCoordinatorRequest(key=GROUP, key_type=0), 1,
     lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("JoinGroup", (Res.GROUP, GROUP, Op.READ), JoinGroupRequest(
        group_id=GROUP, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="", protocol_type="consumer",
        protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")]), 5,
     lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("SyncGroup", (Res.GROUP, GROUP, Op.READ), SyncGroupRequest(group_id=GROUP, generation_id=1, member_id="m",
                                                                assignments=[]), 3,
     lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("Heartbeat", (Res.GROUP, GROUP, Op.READ), HeartbeatRequest(group_id=GROUP, generation_id=1, member_id="m"), 3,
     lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("LeaveGroup", (Res.GROUP, GROUP, Op.READ), LeaveGroupRequest(group_id=GROUP, members=[
        LeaveGroupRequest.MemberIdentity(member_id="m")]), 3,
     lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("DescribeGroups", (Res.GROUP, GROUP, Op.DESCRIBE),
     DescribeGroupsRequest(groups=[GROUP], include_authorized_operations=True), 4,
     lambda r: r.groups[0].error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("ListGroups", (Res.GROUP, GROUP, Op.DESCRIBE), ListGroupsRequest(), 1,
     lambda r: GROUP not in [g.group_id for g in r.groups]),
    ("DeleteGroups", (Res.GROUP, "other", Op.DELETE), DeleteGroupsRequest(group_names=["other"]), 1,
     lambda r: r.results[0].error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("OffsetCommit", (Res.GROUP, GROUP, Op.READ), _commit(), 7,
     lambda r: _first(r, "topics", "partitions").error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("OffsetDelete", (Res.GROUP, GROUP, Op.DELETE), OffsetDeleteRequest(group_id=GROUP, topics=[
        OffsetDeleteRequest.OffsetDeleteRequestTopic(name=TOPIC, partitions=[
            OffsetDeleteRequest.OffsetDeleteRequestPartition(partition_index=0)])]), 0,
     lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("OffsetFetch", (Res.GROUP, GROUP, Op.DESCRIBE), OffsetFetchRequest(group_id=GROUP, topics=None), 5,
     lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("InitProducerId", (Res.CLUSTER, CLUSTER_NAME, Op.IDEMPOTENT_WRITE),
     InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("CreateAcls", (Res.CLUSTER, CLUSTER_NAME, Op.ALTER), CreateAclsRequest(creations=[
        CreateAclsRequest.AclCreation(resource_type=Res.TOPIC, resource_name="x", resource_pattern_type=3,
                                      principal="User:bob", host="*", operation=Op.READ, permission_type=3)]), 3,
     lambda r: r.results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("DescribeAcls", (Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE), DescribeAclsRequest(**_acl_filter()), 3,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("DeleteAcls", (Res.CLUSTER, CLUSTER_NAME, Op.ALTER), DeleteAclsRequest(
        filters=[DeleteAclsRequest.DeleteAclsFilter(**{**_acl_filter(), "principal_filter": "User:nobody"})]), 3,
     lambda r: r.filter_results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("DescribeClientQuotas", (Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE_CONFIGS),
     DescribeClientQuotasRequest(components=[], strict=False), 1,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("AlterClientQuotas", (Res.CLUSTER, CLUSTER_NAME, Op.ALTER_CONFIGS), AlterClientQuotasRequest(entries=[
        AlterClientQuotasRequest.EntryData(entity=[AlterClientQuotasRequest.EntityData(entity_type="user",
                                                                                      entity_name="bob")],
                                           ops=[AlterClientQuotasRequest.OpData(key="producer_byte_rate",
                                                                               value=1e6, remove=False)])],
        validate_only=False), 1,
     lambda r: r.entries[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED),
]


def _connect_as(c, principal: str) -> None:
    """New connections to the first broker speak for `principal` (as if authenticated)."""
    server = c.brokers[0].server
    serve = type(server).handle_connection

    async def as_principal(stream, security=None, sasl=None):
        await serve(server, stream, ConnectionSecurity.accepted("PLAINTEXT", "PLAINTEXT",
                                                               principal=parse_principal(principal)))
    server.handle_connection = as_principal


def _grant(c, rtype, name, op):
    return c.controller.create_acls([AclBinding(rtype, name, PatternType.LITERAL, ALICE, "*", op,
                                                AclPermission.ALLOW)])


async def _setup(c):
    await c.controller.create_topics([CreatableTopic(t, 1, 1) for t in (TOPIC, "doomed")])
    await c.settle()
    _connect_as(c, "User:admin")
    admin = await RawClient.connect(c.brokers[0].port)
    for _ in range(200):  # the first FindCoordinator creates __consumer_offsets; then group g gets an offset
        if (await admin.call(FindCoordinatorRequest(key=GROUP, key_type=0), 1)).error_code == 0:
            if _first(await admin.call(_commit(), 7), "topics", "partitions").error_code == 0:
                break
        await trio.sleep(0.02)
    else:
        raise AssertionError("group g was never created")
    _connect_as(c, ALICE)
    # Auto-creation is asked of a topic the caller may describe (else it is refused unnamed).
    await _grant(c, Res.TOPIC, "new", Op.DESCRIBE)
    await c.settle()


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
async def test_refused_without_the_acl_and_allowed_with_it(row):
    name, (rtype, rname, op), request, version, refused = row
    async with running_cluster(static=GROUPS, broker_overrides=AUTHZ) as c:
        await _setup(c)
        client = await RawClient.connect(c.brokers[0].port)
        assert refused(await client.call(request, version)), f"{name} was not refused without ACLs"
        await _grant(c, rtype, rname, op)
        await c.settle()
        assert not refused(await client.call(request, version)), f"{name} was refused with {op.name} on {rname}"


async def test_deny_wins_and_unauthorized_topics_are_never_named():
    async with running_cluster(static=GROUPS, broker_overrides=AUTHZ) as c:
        await _setup(c)
        client = await RawClient.connect(c.brokers[0].port)
        await _grant(c, Res.TOPIC, "*", Op.ALL)
        await c.controller.create_acls([AclBinding(Res.TOPIC, "doo", PatternType.PREFIXED, ALICE, "*", Op.DESCRIBE,
                                                   AclPermission.DENY)])
        await c.settle()
        listed = await client.call(B.metadata(all_topics=True), 7)
        assert [t.name for t in listed.topics] == ["__consumer_offsets", TOPIC]
        named = await client.call(B.metadata("doomed"), 7)
        assert named.topics[0].error_code == E.TOPIC_AUTHORIZATION_FAILED and named.topics[0].partitions == []
        await c.controller.delete_acls([AclFilter(permission=AclPermission.DENY)])
        await c.settle()
        listed = await client.call(B.metadata(all_topics=True), 7)
        assert sorted(t.name for t in listed.topics) == ["__consumer_offsets", "doomed", TOPIC]


async def test_without_an_authorizer_everything_is_allowed_and_acl_apis_say_security_disabled():
    async with running_cluster(static=GROUPS) as c:
        await _setup(c)
        client = await RawClient.connect(c.brokers[0].port)
        assert B.one_partition(await client.call(B.produce(TOPIC, 0, B.batch()), 8)).error_code == 0
        resp = await client.call(DescribeAclsRequest(**_acl_filter()), 3)
        assert resp.error_code == E.SECURITY_DISABLED


async def test_describe_cluster_reports_the_callers_operations():
    async with running_cluster(static=GROUPS, broker_overrides=AUTHZ) as c:
        await _setup(c)
        client = await RawClient.connect(c.brokers[0].port)
        await _grant(c, Res.CLUSTER, CLUSTER_NAME, Op.ALTER)
        await c.settle()
        resp = await client.call(DescribeClusterRequest(include_cluster_authorized_operations=True), 1)
        assert resp.cluster_authorized_operations == (1 << Op.ALTER) | (1 << Op.DESCRIBE)


async def test_clients_never_write_internal_topics():
    async with running_cluster(static=GROUPS, broker_overrides=AUTHZ) as c:
        await _setup(c)
        _connect_as(c, "User:admin")  # even a super user
        client = await RawClient.connect(c.brokers[0].port)
        resp = await client.call(B.produce("__consumer_offsets", 0, B.batch()), 8)
        assert B.one_partition(resp).error_code == E.INVALID_TOPIC_EXCEPTION
