"""OffsetCommit / OffsetFetch / OffsetDelete / DeleteGroups / Describe / List / expiry / reload."""
from __future__ import annotations

from broker.groups import GroupConfig, GroupCoordinator, GroupState
from broker.groups.records import decode_key, GroupRecordKey
from tests.broker.groups.harness import Harness
from wire.error_codes import ErrorCode as E
from wire.protocol import ConsumerProtocolSubscription, encode_subscription

G = "orders"


def subscription(*topics: str) -> bytes:
    return encode_subscription(ConsumerProtocolSubscription(topics=list(topics), user_data=None))


def errors(h: Harness, token) -> list[E]:
    return [p.error for p in h.answer(token).partitions]


def test_simple_consumer_commit_creates_group_and_fetch_sees_it():
    h = Harness()
    token = h.commit("simple", [("t", 0, 42, 3, "meta"), ("t", 1, 7, -1, None)])
    assert errors(h, token) == [E.NONE, E.NONE]
    got = h.fetch("simple", [("t", [0, 1, 2])]).offsets
    assert [(o.partition, o.offset, o.leader_epoch, o.metadata) for o in got] == [
        (0, 42, 3, "meta"), (1, 7, -1, ""), (2, -1, -1, "")]
    assert h.coord.groups["simple"].state == GroupState.EMPTY
    assert [(o.topic, o.partition) for o in h.fetch("simple").offsets] == [("t", 0), ("t", 1)]
    assert h.fetch("nobody", [("t", [0])]).offsets[0].offset == -1


def test_commit_is_visible_only_once_durable():
    h = Harness()
    h.auto_append = False
    token = h.commit("simple", [("t", 0, 1, -1, "")])
    assert h.answer(token) is None and h.fetch("simple", [("t", [0])]).offsets[0].offset == -1
    h.release_appends()
    assert errors(h, token) == [E.NONE] and h.fetch("simple", [("t", [0])]).offsets[0].offset == 1


def test_failed_commit_append_maps_error_and_is_not_visible():
    h = Harness()
    h.auto_append = False
    token = h.commit("simple", [("t", 0, 1, -1, "")])
    h.release_appends(E.NOT_ENOUGH_REPLICAS)
    assert errors(h, token) == [E.COORDINATOR_NOT_AVAILABLE]
    assert h.fetch("simple", [("t", [0])]).offsets[0].offset == -1


def test_member_commits_are_checked_against_the_generation():
    h = Harness()
    (a,), gen = h.stable_group(G)
    assert errors(h, h.commit(G, [("t", 0, 5, -1, "")], gen, a)) == [E.NONE]
    assert errors(h, h.commit(G, [("t", 0, 6, -1, "")], gen + 1, a)) == [E.ILLEGAL_GENERATION]
    assert errors(h, h.commit(G, [("t", 0, 6, -1, "")], gen, "stranger")) == [E.UNKNOWN_MEMBER_ID]
    assert errors(h, h.commit(G, [("t", 0, 6, -1, "")])) == [E.UNKNOWN_MEMBER_ID]  # simple commit, busy group
    assert errors(h, h.commit("ghost", [("t", 0, 6, -1, "")], 3, a)) == [E.ILLEGAL_GENERATION]
    assert h.fetch(G, [("t", [0])]).offsets[0].offset == 5
    # During PreparingRebalance the old generation may still commit; during CompletingRebalance not.
    b, b_join = h.join_with_id(G)
    assert errors(h, h.commit(G, [("t", 0, 7, -1, "")], gen, a)) == [E.NONE]
    h.join(G, a)
    assert h.coord.groups[G].state == GroupState.COMPLETING_REBALANCE
    assert errors(h, h.commit(G, [("t", 0, 8, -1, "")], gen + 1, a)) == [E.REBALANCE_IN_PROGRESS]


def test_oversized_metadata_rejected_per_partition():
    h = Harness(GroupConfig(num_partitions=4, offset_metadata_max_bytes=4))
    token = h.commit("simple", [("t", 0, 1, -1, "12345"), ("t", 1, 1, -1, "1234")])
    assert errors(h, token) == [E.OFFSET_METADATA_TOO_LARGE, E.NONE]


def test_offset_delete_refuses_subscribed_topics():
    h = Harness()
    (a,), gen = h.stable_group(G, protocols=[("range", subscription("orders-topic"))])
    h.commit(G, [("orders-topic", 0, 5, -1, ""), ("old-topic", 0, 9, -1, "")], gen, a)
    token = h.token()
    h.run(h.coord.delete_offsets(token, G, [("orders-topic", [0]), ("old-topic", [0])], now=h.now))
    result = h.answer(token)
    assert result.error == E.NONE
    assert [p.error for p in result.partitions] == [E.GROUP_SUBSCRIBED_TO_TOPIC, E.NONE]
    assert [(o.topic, o.offset) for o in h.fetch(G).offsets] == [("orders-topic", 5)]
    token = h.token()
    h.run(h.coord.delete_offsets(token, "ghost", [("t", [0])], now=h.now))
    assert h.answer(token).error == E.GROUP_ID_NOT_FOUND


def test_delete_groups():
    h = Harness()
    (a,), gen = h.stable_group(G)
    h.commit("simple", [("t", 0, 1, -1, "")])
    token = h.token()
    h.run(h.coord.delete_groups(token, [G, "simple", "ghost"], now=h.now))
    assert h.answer(token).results == ((G, E.NON_EMPTY_GROUP), ("simple", E.NONE), ("ghost", E.GROUP_ID_NOT_FOUND))
    assert "simple" not in h.coord.groups
    assert h.coord.describe(["simple"])[0].state == "Dead"
    # Tombstones for the offset and the group went to the log.
    tail = h.log[h.coord.partition_for("simple")][-2:]
    assert [v for _, v in tail] == [None, None] and isinstance(decode_key(tail[-1][0]), GroupRecordKey)


def test_describe_and_list():
    h = Harness()
    (a, b), gen = h.stable_group(G, 2, protocols=[("range", subscription("x"))])
    h.commit("simple", [("t", 0, 1, -1, "")])
    d = h.coord.describe([G])[0]
    assert (d.error, d.state, d.protocol_type, d.protocol) == (E.NONE, "Stable", "consumer", "range")
    assert [m.member_id for m in d.members] == [a, b] and d.members[0].assignment == f"assign-{a}".encode()
    assert d.members[0].client_host == "/127.0.0.1"
    listed = h.coord.list_groups()
    assert listed.error == E.NONE
    assert [(g.group_id, g.state) for g in listed.groups] == [(G, "Stable"), ("simple", "Empty")]
    assert [g.group_id for g in h.coord.list_groups(["empty"]).groups] == ["simple"]
    h.join_with_id(G)
    d = h.coord.describe([G])[0]
    assert d.state == "PreparingRebalance" and d.protocol == "" and d.members[0].assignment == b""


def test_offsets_of_simple_consumers_expire_after_retention():
    cfg = GroupConfig(num_partitions=4, offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    h = Harness(cfg)
    h.commit("simple", [("t", 0, 1, -1, "")])
    h.advance(30_000)
    h.commit("simple", [("t", 1, 1, -1, "")])
    h.advance(30_000)
    assert [o.partition for o in h.fetch("simple").offsets] == [1]
    h.advance(30_000)
    assert "simple" not in h.coord.groups  # nothing left: the group is gone too


def test_empty_consumer_group_offsets_expire_from_when_it_emptied():
    cfg = GroupConfig(num_partitions=4, offsets_retention_ms=60_000, offsets_retention_check_interval_ms=10_000)
    h = Harness(cfg)
    (a,), gen = h.stable_group(G, session=45_000)
    h.commit(G, [("t", 0, 5, -1, "")], gen, a)
    for _ in range(10):  # a stable member keeps its offsets well past retention
        h.advance(10_000)
        h.heartbeat(G, a, gen)
        h.commit(G, [("t", 0, 5, -1, "")], gen, a)
    assert h.fetch(G).offsets[0].offset == 5
    h.leave(G, a)
    h.advance(50_000)
    assert h.fetch(G).offsets[0].offset == 5
    h.advance(20_000)
    assert h.fetch(G).offsets == () and G not in h.coord.groups
    key, value = h.log[h.coord.partition_for(G)][-1]
    assert value is None and decode_key(key) == GroupRecordKey(G)


def _reloaded(h: Harness) -> GroupCoordinator:
    fresh = GroupCoordinator(h.coord.config, new_uuid=lambda: "x")
    for p in range(h.coord.config.num_partitions):
        fresh.begin_loading(p)
        fresh.load_partition(p, h.log[p], h.now)
    return fresh


def test_reload_from_the_log_gives_the_same_state():
    h = Harness()
    (a, b), gen = h.stable_group(G, 2, instance=None)
    h.commit(G, [("t", 0, 5, 2, "m"), ("t", 1, 6, -1, "")], gen, a)
    h.commit("simple", [("u", 3, 9, -1, "")])
    h.commit("gone", [("u", 0, 1, -1, "")])
    h.run(h.coord.delete_groups(h.token(), ["gone"], now=h.now))
    fresh = _reloaded(h)
    assert sorted(fresh.groups) == sorted(h.coord.groups) == [G, "simple"]
    for gid, group in h.coord.groups.items():
        again = fresh.groups[gid]
        assert again.state == group.state and again.offsets == group.offsets
        stored, live = again.to_record_value(), group.to_record_value()
        # The record was written just before the group turned Stable: only the state timestamp differs.
        stored.current_state_timestamp = live.current_state_timestamp
        assert stored == live
    # Members of the reloaded Stable group keep heartbeating and committing with their generation.
    assert fresh.heartbeat(G, generation_id=gen, member_id=b, now=h.now).error == E.NONE
    assert fresh.fetch_offsets(G, None, now=h.now) == h.fetch(G)


def test_empty_group_reloads_as_empty_with_its_generation():
    h = Harness()
    (a,), gen = h.stable_group(G)
    h.leave(G, a)
    fresh = _reloaded(h)
    group = fresh.groups[G]
    assert group.state == GroupState.EMPTY and group.generation == gen + 1 and group.protocol_type == "consumer"


def test_commit_with_the_largest_retention_never_expires_instead_of_overflowing():
    h = Harness()
    token = h.token()
    h.run(h.coord.commit_offsets(token, "simple", [("t", 0, 5, -1, "")], generation_id=-1, member_id="",
                                 retention_ms=(1 << 63) - 1, now=h.now))
    assert errors(h, token) == [E.NONE]
    assert h.coord.groups["simple"].offsets[("t", 0)].expire_timestamp == (1 << 63) - 1


def test_offset_delete_naming_a_partition_twice_deletes_it_once():
    h = Harness()
    h.commit("simple", [("t", 0, 5, -1, "")])
    token = h.token()
    h.run(h.coord.delete_offsets(token, "simple", [("t", [0, 0])], now=h.now))
    assert h.answer(token).error == E.NONE
    assert ("t", 0) not in h.coord.groups["simple"].offsets


def test_txn_offset_commits_naming_a_member_are_fenced_as_offset_commits_are():
    """KIP-447: TxnOffsetCommit v3+ carries the consumer's generation and member id; a zombie
    of a consumer rebalanced away (or a static member's old incarnation) cannot commit."""
    h = Harness()
    (a,), gen = h.stable_group(G)
    h.coord.groups[G].static_members["i-1"] = a  # a's group.instance.id (KIP-345)

    def txn_commit(generation=-1, member_id="", instance=None):
        token = h.token()
        h.run(h.coord.txn_commit_offsets(token, G, 9, 0, [("t", 0, 5, -1, "")], generation_id=generation,
                                         member_id=member_id, group_instance_id=instance, now=h.now))
        return errors(h, token)

    assert txn_commit(gen, a, "i-1") == [E.NONE]
    assert txn_commit(gen - 1, a, "i-1") == [E.ILLEGAL_GENERATION]
    assert txn_commit(gen, "stranger") == [E.UNKNOWN_MEMBER_ID]
    assert txn_commit(gen, "old-incarnation", "i-1") == [E.FENCED_INSTANCE_ID]
    assert txn_commit() == [E.NONE]  # v0-2 name no member: taken, as Kafka does, whatever the group's state
    assert txn_commit(gen + 1) == [E.ILLEGAL_GENERATION]  # a generation with no member named
    # A new group (a producer committing for a group nobody joined) is generation 0.
    token = h.token()
    h.run(h.coord.txn_commit_offsets(token, "fresh", 9, 0, [("t", 0, 1, -1, "")], generation_id=1,
                                     member_id="", now=h.now))
    assert errors(h, token) == [E.ILLEGAL_GENERATION]
