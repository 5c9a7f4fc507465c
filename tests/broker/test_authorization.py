"""Every API's authorization check (docs/authorization.md's table): a broker with the authorizer
on, a connection whose principal is set directly (User:alice), each request refused without the
ACL the table names and let through once exactly that ACL is added."""
from __future__ import annotations

import uuid

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
    OffsetCommitRequest, OffsetFetchRequest, DeleteRecordsRequest, DescribeLogDirsRequest, DescribeQuorumRequest,
    UnregisterBrokerRequest, AddOffsetsToTxnRequest, AddRaftVoterRequest, RemoveRaftVoterRequest, AddPartitionsToTxnRequest,
    DescribeProducersRequest, DescribeTransactionsRequest, EndTxnRequest, TxnOffsetCommitRequest,
    WriteTxnMarkersRequest,
)
from wire.security.connection_security import ConnectionSecurity
from wire.security.principal import parse_principal

ALICE = "User:alice"
TOPIC, GROUP, TX = "t", "g", "tx"
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


def _txn_produce():
    request = B.produce(TOPIC, 0, B.batch(producer_id=1, producer_epoch=0, base_sequence=0, transactional=True))
    request.transactional_id = TX
    return request


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
    # transactions: each refused for the one ACL named (a second check may still refuse it after)
    ("InitProducerId transactional", (Res.TRANSACTIONAL_ID, TX, Op.WRITE),
     InitProducerIdRequest(transactional_id=TX, transaction_timeout_ms=60000), 1,
     lambda r: r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("FindCoordinator transaction", (Res.TRANSACTIONAL_ID, TX, Op.DESCRIBE),
     FindCoordinatorRequest(key=TX, key_type=1), 1, lambda r: r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("AddPartitionsToTxn", (Res.TRANSACTIONAL_ID, TX, Op.WRITE), AddPartitionsToTxnRequest(
        transactional_id=TX, producer_id=1, producer_epoch=0,
        topics=[AddPartitionsToTxnRequest.V3AndBelowTopic(name=TOPIC, partitions=[0])]), 1,
     lambda r: _first(r, "results", "results").error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("AddPartitionsToTxn topic", (Res.TOPIC, TOPIC, Op.WRITE), AddPartitionsToTxnRequest(
        transactional_id="open", producer_id=1, producer_epoch=0,
        topics=[AddPartitionsToTxnRequest.V3AndBelowTopic(name=TOPIC, partitions=[0])]), 1,
     lambda r: _first(r, "results", "results").error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("AddOffsetsToTxn", (Res.TRANSACTIONAL_ID, TX, Op.WRITE), AddOffsetsToTxnRequest(
        transactional_id=TX, producer_id=1, producer_epoch=0, group_id=GROUP), 1,
     lambda r: r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("AddOffsetsToTxn group", (Res.GROUP, GROUP, Op.READ), AddOffsetsToTxnRequest(
        transactional_id="open", producer_id=1, producer_epoch=0, group_id=GROUP), 1,
     lambda r: r.error_code == E.GROUP_AUTHORIZATION_FAILED),
    ("EndTxn", (Res.TRANSACTIONAL_ID, TX, Op.WRITE), EndTxnRequest(
        transactional_id=TX, producer_id=1, producer_epoch=0, committed=True), 1,
     lambda r: r.error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("TxnOffsetCommit", (Res.TRANSACTIONAL_ID, TX, Op.WRITE), TxnOffsetCommitRequest(
        transactional_id=TX, group_id=GROUP, producer_id=1, producer_epoch=0, topics=[
            TxnOffsetCommitRequest.TxnOffsetCommitRequestTopic(name=TOPIC, partitions=[
                TxnOffsetCommitRequest.TxnOffsetCommitRequestPartition(
                    partition_index=0, committed_offset=0, committed_metadata="")])]), 2,
     lambda r: _first(r, "topics", "partitions").error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("Produce transactional", (Res.TRANSACTIONAL_ID, TX, Op.WRITE), _txn_produce(), 8,
     lambda r: B.one_partition(r).error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("WriteTxnMarkers", (Res.CLUSTER, CLUSTER_NAME, Op.CLUSTER_ACTION), WriteTxnMarkersRequest(markers=[
        WriteTxnMarkersRequest.WritableTxnMarker(
            producer_id=1, producer_epoch=0, transaction_result=False, coordinator_epoch=0,
            topics=[WriteTxnMarkersRequest.WritableTxnMarkerTopic(name=TOPIC, partition_indexes=[0])])]), 0,
     lambda r: _first(r, "markers", "topics", "partitions").error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("DescribeTransactions", (Res.TRANSACTIONAL_ID, TX, Op.DESCRIBE), DescribeTransactionsRequest(
        transactional_ids=[TX]), 0,
     lambda r: r.transaction_states[0].error_code == E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ("DescribeProducers", (Res.TOPIC, TOPIC, Op.READ), DescribeProducersRequest(topics=[
        DescribeProducersRequest.TopicRequest(name=TOPIC, partition_indexes=[0])]), 0,
     lambda r: _first(r, "topics", "partitions").error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("CreateAcls", (Res.CLUSTER, CLUSTER_NAME, Op.ALTER), CreateAclsRequest(creations=[
        CreateAclsRequest.AclCreation(resource_type=Res.TOPIC, resource_name="x", resource_pattern_type=3,
                                      principal="User:bob", host="*", operation=Op.READ, permission_type=3)]), 3,
     lambda r: r.results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("DescribeAcls", (Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE), DescribeAclsRequest(**_acl_filter()), 3,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("DeleteAcls", (Res.CLUSTER, CLUSTER_NAME, Op.ALTER), DeleteAclsRequest(
        filters=[DeleteAclsRequest.DeleteAclsFilter(**{**_acl_filter(), "principal_filter": "User:nobody"})]), 3,
     lambda r: r.filter_results[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("DeleteRecords", (Res.TOPIC, TOPIC, Op.DELETE), DeleteRecordsRequest(timeout_ms=5000, topics=[
        DeleteRecordsRequest.DeleteRecordsTopic(name=TOPIC, partitions=[
            DeleteRecordsRequest.DeleteRecordsPartition(partition_index=0, offset=0)])]), 2,
     lambda r: _first(r, "topics", "partitions").error_code == E.TOPIC_AUTHORIZATION_FAILED),
    ("DescribeLogDirs", (Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE), DescribeLogDirsRequest(topics=None), 4,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED and r.results == []),
    ("DescribeQuorum", (Res.CLUSTER, CLUSTER_NAME, Op.DESCRIBE), DescribeQuorumRequest(topics=[
        DescribeQuorumRequest.TopicData(topic_name="__cluster_metadata", partitions=[
            DescribeQuorumRequest.PartitionData(partition_index=0)])]), 2,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("UnregisterBroker", (Res.CLUSTER, CLUSTER_NAME, Op.ALTER), UnregisterBrokerRequest(broker_id=99), 0,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("AddRaftVoter", (Res.CLUSTER, CLUSTER_NAME, Op.ALTER), AddRaftVoterRequest(
        cluster_id=None, timeout_ms=1000, voter_id=4, voter_directory_id=uuid.UUID(int=7),
        listeners=[AddRaftVoterRequest.Listener(name="CONTROLLER", host="127.0.0.1", port=9999)]), 0,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("RemoveRaftVoter", (Res.CLUSTER, CLUSTER_NAME, Op.ALTER), RemoveRaftVoterRequest(
        cluster_id=None, voter_id=1, voter_directory_id=uuid.UUID(int=7)), 0,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
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
    # A transactional id alice may write: the transaction rows' second checks (topic, group).
    await _grant(c, Res.TRANSACTIONAL_ID, "open", Op.WRITE)
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


async def test_metadata_v8_to_v12_answers_authorized_operations_topic_ids_and_lookups_by_id():
    from wire.protocol import MetadataRequest as M
    from wire.protocol.schema import ZERO_UUID

    def ask(*names, ids=(), cluster_ops=False):
        topics = [M.MetadataRequestTopic(name=n) for n in names] + [M.MetadataRequestTopic(topic_id=i, name=None)
                                                                    for i in ids]
        return M(topics=topics, allow_auto_topic_creation=False, include_cluster_authorized_operations=cluster_ops,
                 include_topic_authorized_operations=True)

    async with running_cluster(static=GROUPS, broker_overrides=AUTHZ) as c:
        await _setup(c)
        await _grant(c, Res.TOPIC, TOPIC, Op.READ)
        await _grant(c, Res.TOPIC, TOPIC, Op.ALTER_CONFIGS)
        await c.settle()
        image = c.brokers[0].metadata.image
        t_id, doomed_id = image.topics_by_name[TOPIC].topic_id, image.topics_by_name["doomed"].topic_id
        client = await RawClient.connect(c.brokers[0].port)
        for version in (8, 9, 10, 11, 12):
            resp = await client.call(ask(TOPIC, "doomed", cluster_ops=True), version)
            mine, hidden = resp.topics
            # READ implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS (Kafka's implications).
            assert mine.error_code == 0 and mine.topic_authorized_operations == (
                (1 << Op.READ) | (1 << Op.DESCRIBE) | (1 << Op.ALTER_CONFIGS) | (1 << Op.DESCRIBE_CONFIGS)), version
            assert hidden.error_code == E.TOPIC_AUTHORIZATION_FAILED and hidden.topic_authorized_operations == -2**31
            assert mine.topic_id == (t_id if version >= 10 else ZERO_UUID)
            assert hidden.topic_id == ZERO_UUID  # no id for a topic it may not describe
            # The cluster's operations: 0 without DESCRIBE on the cluster; not in v11+.
            assert resp.cluster_authorized_operations == (0 if version <= 10 else -2**31)
        not_asked = await client.call(B.metadata(TOPIC, auto_create=False), 8)
        assert not_asked.topics[0].topic_authorized_operations == -2**31

        # v12 looks up by id; an id it may not describe is as unknown as an id of nothing.
        nowhere = __import__("uuid").UUID(int=12345)
        resp = await client.call(ask(ids=[t_id, doomed_id, nowhere]), 12)
        assert [(t.error_code, t.name, t.topic_id) for t in resp.topics] == [
            (0, TOPIC, t_id), (E.UNKNOWN_TOPIC_ID, None, doomed_id), (E.UNKNOWN_TOPIC_ID, None, nowhere)]
        assert resp.topics[0].partitions[0].partition_index == 0
        for version in (10, 11):  # ids before v12: INVALID_REQUEST, as Kafka
            resp = await client.call(ask(ids=[t_id]), version)
            assert resp.topics[0].error_code == E.INVALID_REQUEST

        await _grant(c, Res.CLUSTER, CLUSTER_NAME, Op.ALTER)
        await c.settle()
        resp = await client.call(ask(TOPIC, cluster_ops=True), 10)
        assert resp.cluster_authorized_operations == (1 << Op.ALTER) | (1 << Op.DESCRIBE)
