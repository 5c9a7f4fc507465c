"""docs/authorization.md's rows for ElectLeaders and the partition reassignment APIs: refused
without the cluster ACL, let through with exactly it (as tests/broker/test_authorization.py)."""
from __future__ import annotations

import pytest

from tests.broker.harness import RawClient, running_cluster
from tests.broker.test_authorization import AUTHZ, GROUPS, TOPIC, _grant, _setup
from wire.acl_codes import CLUSTER_NAME, AclOperation as Op
from wire.acl_codes import ResourceType as Res
from wire.error_codes import ErrorCode as E
from wire.protocol import (
    AlterPartitionReassignmentsRequest as Alter, ElectLeadersRequest as Elect,
    ListPartitionReassignmentsRequest as List,
)

ROWS = [
    ("ElectLeaders", Op.ALTER, Elect(election_type=0, timeout_ms=5000, topic_partitions=[
        Elect.TopicPartitions(topic=TOPIC, partitions=[0])]), 2,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED
     and r.replica_election_results[0].partition_result[0].error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("AlterPartitionReassignments", Op.ALTER, Alter(timeout_ms=5000, topics=[Alter.ReassignableTopic(
        name=TOPIC, partitions=[Alter.ReassignablePartition(partition_index=0, replicas=None)])]), 0,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
    ("ListPartitionReassignments", Op.DESCRIBE, List(timeout_ms=5000, topics=None), 0,
     lambda r: r.error_code == E.CLUSTER_AUTHORIZATION_FAILED),
]


@pytest.mark.parametrize("row", ROWS, ids=[r[0] for r in ROWS])
async def test_refused_without_the_cluster_acl_and_allowed_with_it(row):
    name, op, request, version, refused = row
    async with running_cluster(static=GROUPS, broker_overrides=AUTHZ) as c:
        await _setup(c)
        client = await RawClient.connect(c.brokers[0].port)
        assert refused(await client.call(request, version)), f"{name} was not refused without ACLs"
        await _grant(c, Res.CLUSTER, CLUSTER_NAME, op)
        await c.settle()
        assert not refused(await client.call(request, version)), f"{name} was refused with {op.name}"
