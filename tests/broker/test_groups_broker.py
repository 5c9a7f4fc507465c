"""The group coordinator served by real brokers (in-process, raw protocol): FindCoordinator and
the offsets topic, membership and generation fencing, offsets committed into
`__consumer_offsets` and reloaded after a restart or a coordinator failover, admin ops,
InitProducerId."""
from __future__ import annotations

import trio

from broker.group_settings import OFFSETS_TOPIC
from broker.groups import partition_for_group
from broker.controller_channel import CreatableTopic
from tests.broker.harness import RawClient, running_cluster
from wire.error_codes import ErrorCode as E
from wire.protocol import (
    DeleteGroupsRequest, DescribeGroupsRequest, FindCoordinatorRequest, HeartbeatRequest, InitProducerIdRequest,
    JoinGroupRequest, LeaveGroupRequest, ListGroupsRequest, OffsetCommitRequest, OffsetDeleteRequest,
    OffsetFetchRequest, SyncGroupRequest,
)

PARTITIONS = 4
GROUPS = {
    "offsets.topic.num.partitions": str(PARTITIONS), "offsets.topic.replication.factor": "1",
    "group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "100",
    "replica.lag.time.max.ms": "2000", "replica.fetch.backoff.ms": "50", "replica.fetch.wait.max.ms": "100",
}


# -- request builders ---------------------------------------------------------------------
def find(group):
    return FindCoordinatorRequest(key=group, key_type=0)


def join(group, member_id="", session_ms=10_000, rebalance_ms=10_000, metadata=b"m"):
    return JoinGroupRequest(group_id=group, session_timeout_ms=session_ms, rebalance_timeout_ms=rebalance_ms,
                            member_id=member_id, group_instance_id=None, protocol_type="consumer",
                            protocols=[JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=metadata)])


def sync(group, generation, member_id, assignments=None):
    S = SyncGroupRequest
    return S(group_id=group, generation_id=generation, member_id=member_id, group_instance_id=None,
             assignments=[S.SyncGroupRequestAssignment(member_id=m, assignment=a)
                          for m, a in (assignments or {}).items()])


def heartbeat(group, generation, member_id):
    return HeartbeatRequest(group_id=group, generation_id=generation, member_id=member_id)


def commit(group, offsets, generation=-1, member_id=""):
    C = OffsetCommitRequest
    topics: dict[str, list] = {}
    for (topic, partition), offset in offsets.items():
        topics.setdefault(topic, []).append(C.OffsetCommitRequestPartition(
            partition_index=partition, committed_offset=offset, committed_metadata=f"m{offset}"))
    return C(group_id=group, generation_id=generation, member_id=member_id, retention_time_ms=-1,
             topics=[C.OffsetCommitRequestTopic(name=t, partitions=ps) for t, ps in topics.items()])


def fetch_offsets(group, topics=None):
    O = OffsetFetchRequest
    return O(group_id=group, topics=None if topics is None else [
        O.OffsetFetchRequestTopic(name=t, partition_indexes=list(ps)) for t, ps in topics.items()])


def committed(response):
    return {(t.name, p.partition_index): (p.committed_offset, p.metadata, p.error_code)
            for t in response.topics for p in t.partitions}


def commit_errors(response):
    return {(t.name, p.partition_index): p.error_code for t in response.topics for p in t.partitions}


async def make_topic(c, name="t", partitions=2, rf=1):
    reply = await c.controller.create_topics([CreatableTopic(name, partitions, rf)])
    assert reply.results[0].error == E.NONE, reply
    await c.settle()


async def coordinator_of(c, group, via=1, timeout=10.0):
    """Ask FindCoordinator until it names a node; returns a client connected to it and its id."""
    client = await RawClient.connect(c.broker(via).port)
    with trio.fail_after(timeout):
        while True:
            resp = await client.call(find(group), 1)
            if resp.error_code == E.NONE:
                break
            assert resp.error_code == E.COORDINATOR_NOT_AVAILABLE, resp
            await trio.sleep(0.02)
    await client.aclose()
    assert resp.port == c.broker(resp.node_id).port and resp.host == "127.0.0.1"
    return await RawClient.connect(resp.port), resp.node_id


async def call_until_loaded(client, request, version, timeout=10.0):
    """Retry while the coordinator is loading (COORDINATOR_LOAD_IN_PROGRESS) or not yet elected."""
    with trio.fail_after(timeout):
        while True:
            resp = await client.call(request, version)
            code = getattr(resp, "error_code", E.NONE)
            if code not in (E.COORDINATOR_LOAD_IN_PROGRESS, E.NOT_COORDINATOR):
                return resp
            await trio.sleep(0.02)


async def join_pair(coord, group):
    """Two members through the KIP-394 member-id round; returns (generation, leader id, [ids], leader resp)."""
    ids = []
    for _ in range(2):
        first = await coord.call(join(group), 5)
        assert first.error_code == E.MEMBER_ID_REQUIRED and first.member_id
        ids.append(first.member_id)
    results = {}
    second = await RawClient.connect(coord.stream.socket.getpeername()[1])

    async def one(client, member_id):
        results[member_id] = await client.call(join(group, member_id), 5)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(one, coord, ids[0])
        nursery.start_soon(one, second, ids[1])
    await second.aclose()
    generations = {r.generation_id for r in results.values()}
    assert all(r.error_code == E.NONE for r in results.values()) and len(generations) == 1
    leader = results[ids[0]].leader
    assert leader in ids and len(results[leader].members) == 2
    assert all(not results[m].members for m in ids if m != leader)  # only the leader sees the members
    return generations.pop(), leader, ids


# -- tests --------------------------------------------------------------------------------
async def test_find_coordinator_creates_the_offsets_topic_and_names_the_leader_of_the_groups_partition():
    async with running_cluster(3, static={**GROUPS, "offsets.topic.replication.factor": "3"}) as c:
        client = await RawClient.connect(c.broker(2).port)
        first = await client.call(find("orders"), 1)
        assert (first.error_code, first.node_id) == (E.COORDINATOR_NOT_AVAILABLE, -1)
        coord, node = await coordinator_of(c, "orders", via=2)
        topic = c.controller.image.topics_by_name[OFFSETS_TOPIC]
        assert len(topic.partitions) == PARTITIONS
        assert all(len(p.replicas) == 3 for p in topic.partitions.values())
        assert node == topic.partitions[partition_for_group("orders", PARTITIONS)].leader
        configs = c.controller.image.configs.get((2, OFFSETS_TOPIC), {})
        assert configs.get("cleanup.policy") == "compact"
        assert c.controller.calls.count("create_topics") == 1
        # A transaction coordinator is not offered (transactions are not implemented).
        txn = await client.call(FindCoordinatorRequest(key="tx", key_type=1), 1)
        assert txn.error_code == E.COORDINATOR_NOT_AVAILABLE
        # Another broker refuses the group: it does not lead its partition.
        other = next(b for b in c.brokers if b.node_id != node)
        wrong = await RawClient.connect(other.port)
        assert (await wrong.call(heartbeat("orders", 1, "x"), 1)).error_code == E.NOT_COORDINATOR


async def test_offsets_topic_is_not_created_with_fewer_brokers_than_its_replication_factor():
    async with running_cluster(1, static={**GROUPS, "offsets.topic.replication.factor": "3"}) as c:
        client = await RawClient.connect(c.broker(1).port)
        for _ in range(5):
            assert (await client.call(find("g"), 1)).error_code == E.COORDINATOR_NOT_AVAILABLE
            await trio.sleep(0.02)
        assert OFFSETS_TOPIC not in c.controller.image.topics_by_name


async def test_membership_generation_fencing_and_commits_through_the_log():
    async with running_cluster(1, static=GROUPS) as c:
        await make_topic(c, "t", 2)
        coord, _ = await coordinator_of(c, "g")
        generation, leader, ids = await join_pair(coord, "g")
        follower = next(m for m in ids if m != leader)
        other = await RawClient.connect(c.broker(1).port)
        async with trio.open_nursery() as nursery:  # the follower's SyncGroup is held for the leader's
            answers = {}

            async def follower_sync():
                answers["f"] = await other.call(sync("g", generation, follower), 3)
            nursery.start_soon(follower_sync)
            await trio.sleep(0.05)
            lead = await coord.call(sync("g", generation, leader, {leader: b"A", follower: b"B"}), 3)
        assert (lead.error_code, lead.assignment) == (E.NONE, b"A")
        assert (answers["f"].error_code, answers["f"].assignment) == (E.NONE, b"B")
        assert (await coord.call(heartbeat("g", generation, leader), 1)).error_code == E.NONE
        assert (await coord.call(heartbeat("g", generation + 1, leader), 1)).error_code == E.ILLEGAL_GENERATION
        assert (await coord.call(heartbeat("g", generation, "nobody"), 1)).error_code == E.UNKNOWN_MEMBER_ID

        ok = await coord.call(commit("g", {("t", 0): 5, ("t", 1): 7, ("gone", 0): 1}, generation, leader), 3)
        assert commit_errors(ok) == {("t", 0): E.NONE, ("t", 1): E.NONE, ("gone", 0): E.UNKNOWN_TOPIC_OR_PARTITION}
        stale = await coord.call(commit("g", {("t", 0): 99}, generation - 1, leader), 3)
        assert commit_errors(stale) == {("t", 0): E.ILLEGAL_GENERATION}
        got = committed(await coord.call(fetch_offsets("g", {"t": [0, 1], "u": [0]}), 3))
        assert got == {("t", 0): (5, "m5", 0), ("t", 1): (7, "m7", 0), ("u", 0): (-1, "", 0)}
        # The commit is a keyed record in the group's __consumer_offsets partition.
        plog = c.broker(1).replicas.get(OFFSETS_TOPIC, partition_for_group("g", PARTITIONS)).log
        assert plog.high_watermark == plog.log_end_offset >= 2  # group metadata + the commit

        # The leader leaves: the follower is told to rejoin at its next heartbeat.
        assert (await coord.call(LeaveGroupRequest(group_id="g", member_id=leader), 1)).error_code == E.NONE
        assert (await other.call(heartbeat("g", generation, follower), 1)).error_code == E.REBALANCE_IN_PROGRESS
        rejoin = await other.call(join("g", follower), 5)
        assert rejoin.error_code == E.NONE and rejoin.generation_id == generation + 1 and rejoin.leader == follower


async def test_a_member_that_stops_heartbeating_is_expelled_after_its_session_timeout():
    async with running_cluster(1, static=GROUPS) as c:
        coord, _ = await coordinator_of(c, "g")
        first = await coord.call(join("g", session_ms=300), 5)
        joined = await coord.call(join("g", first.member_id, session_ms=300), 5)
        assert joined.error_code == E.NONE
        s = await coord.call(sync("g", joined.generation_id, first.member_id, {first.member_id: b"x"}), 3)
        assert s.error_code == E.NONE
        states = []
        with trio.fail_after(10):
            while not states or states[-1] != "Empty":
                await trio.sleep(0.05)
                described = (await coord.call(DescribeGroupsRequest(groups=["g"]), 3)).groups[0]
                states.append(described.group_state)
        assert states[0] == "Stable"
        assert (await coord.call(heartbeat("g", joined.generation_id, first.member_id), 1)).error_code \
            == E.UNKNOWN_MEMBER_ID


async def test_committed_offsets_and_groups_are_reloaded_after_a_restart():
    async with running_cluster(1, static=GROUPS) as c:
        await make_topic(c, "t", 3)
        coord, _ = await coordinator_of(c, "simple")
        offsets = {("t", p): 10 * p + 1 for p in range(3)}
        assert set(commit_errors(await coord.call(commit("simple", offsets), 3)).values()) == {E.NONE}
        generation, leader, ids = await join_pair(coord, "members")
        assert (await coord.call(sync("members", generation, leader, {m: m.encode() for m in ids}), 3)).error_code == 0
        await c.stop(1)
        await c.restart(1)
        coord, _ = await coordinator_of(c, "simple")
        got = committed(await call_until_loaded(coord, fetch_offsets("simple", {"t": [0, 1, 2]}), 3))
        assert got == {k: (v, f"m{v}", 0) for k, v in offsets.items()}
        described = (await call_until_loaded(coord, DescribeGroupsRequest(groups=["members"]), 3)).groups[0]
        assert described.error_code == 0 and described.group_state == "Stable"
        assert sorted(m.member_id for m in described.members) == sorted(ids)
        assert {m.member_id: m.member_assignment for m in described.members} == {m: m.encode() for m in ids}


async def test_a_broker_past_its_session_lease_answers_no_offset_fetch_from_memory():
    # Cut off from the controller for most of a session, a coordinator may have been fenced
    # and its group moved to a broker that served newer commits: it must not answer from its
    # cache (seed 2118). The client looks for the coordinator again.
    async with running_cluster(1, static=GROUPS) as c:
        await make_topic(c, "t", 1)
        coord, node = await coordinator_of(c, "g")
        assert set(commit_errors(await coord.call(commit("g", {("t", 0): 7}), 3)).values()) == {E.NONE}
        broker = c.broker(node)
        broker._session_lease = lambda: False
        refused = await coord.call(fetch_offsets("g", {"t": [0]}), 3)
        assert refused.error_code == E.NOT_COORDINATOR and refused.topics == []
        v1 = await coord.call(fetch_offsets("g", {"t": [0]}), 1)  # no group-level error before v2
        assert committed(v1) == {("t", 0): (-1, "", E.NOT_COORDINATOR)}
        broker._session_lease = lambda: True
        assert committed(await coord.call(fetch_offsets("g", {"t": [0]}), 3)) == {("t", 0): (7, "m7", 0)}


async def test_coordinator_failover_keeps_committed_offsets():
    static = {**GROUPS, "offsets.topic.replication.factor": "3", "min.insync.replicas": "2"}
    async with running_cluster(3, static=static) as c:
        await make_topic(c, "t", 2, rf=3)
        coord, old = await coordinator_of(c, "g")
        offsets = {("t", 0): 42, ("t", 1): 43}
        with trio.fail_after(10):  # the ISR of the offsets partition must reach min.insync.replicas
            while True:
                resp = commit_errors(await coord.call(commit("g", offsets), 3))
                if set(resp.values()) == {E.NONE}:
                    break
                assert set(resp.values()) == {E.COORDINATOR_NOT_AVAILABLE}, resp
                await trio.sleep(0.05)
        await c.stop(old)
        c.controller.fence(old)
        await c.settle()
        survivor = next(b.node_id for b in c.brokers if b.node_id != old)
        coord, new = await coordinator_of(c, "g", via=survivor)
        assert new != old
        got = committed(await call_until_loaded(coord, fetch_offsets("g", None), 3))
        assert got == {k: (v, f"m{v}", 0) for k, v in offsets.items()}


async def test_list_describe_and_delete_groups_and_offset_delete():
    async with running_cluster(1, static=GROUPS) as c:
        await make_topic(c, "t", 2)
        coord, _ = await coordinator_of(c, "g")
        await coord.call(commit("g", {("t", 0): 3, ("t", 1): 4}), 3)
        listed = await coord.call(ListGroupsRequest(), 1)
        assert listed.error_code == 0 and [(g.group_id, g.protocol_type) for g in listed.groups] == [("g", "")]
        described = (await coord.call(DescribeGroupsRequest(groups=["g", "nope"]), 3)).groups
        assert [(g.group_id, g.group_state) for g in described] == [("g", "Empty"), ("nope", "Dead")]
        D = OffsetDeleteRequest
        deleted = await coord.call(D(group_id="g", topics=[D.OffsetDeleteRequestTopic(
            name="t", partitions=[D.OffsetDeleteRequestPartition(partition_index=0)])]), 0)
        assert deleted.error_code == 0 and deleted.topics[0].partitions[0].error_code == 0
        assert committed(await coord.call(fetch_offsets("g", {"t": [0, 1]}), 3)) == {
            ("t", 0): (-1, "", 0), ("t", 1): (4, "m4", 0)}
        result = await coord.call(DeleteGroupsRequest(group_names=["g", "nope"]), 1)
        assert [(r.group_id, r.error_code) for r in result.results] == [("g", 0), ("nope", E.GROUP_ID_NOT_FOUND)]
        assert (await coord.call(ListGroupsRequest(), 1)).groups == []
        assert committed(await coord.call(fetch_offsets("g", {"t": [1]}), 3)) == {("t", 1): (-1, "", 0)}


async def test_init_producer_id_hands_out_distinct_ids_from_controller_blocks():
    async with running_cluster(2, static=GROUPS) as c:
        seen = []
        for node in (1, 2, 1, 2):
            client = await RawClient.connect(c.broker(node).port)
            for _ in range(3):
                resp = await client.call(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1)
                assert resp.error_code == 0 and resp.producer_epoch == 0
                seen.append(resp.producer_id)
        assert len(set(seen)) == len(seen) == 12
        assert c.controller.calls.count("allocate_producer_ids") == 2  # one block per broker
        txn = await client.call(InitProducerIdRequest(transactional_id="tx", transaction_timeout_ms=60000), 1)
        assert txn.error_code == E.NOT_COORDINATOR  # no __transaction_state yet: nobody coordinates "tx"
