"""The classic group state machine, transcript style: join, sync, heartbeat, leave, timeouts."""
from __future__ import annotations

from broker.groups import GroupConfig, GroupState
from tests.broker.groups.harness import RANGE, Harness
from wire.error_codes import ErrorCode as E

G = "orders"


def state(h: Harness, group: str = G) -> GroupState:
    return h.coord.groups[group].state


def test_member_id_required_then_join_sync_stable():
    h = Harness()
    first = h.answer(h.join(G, client_id="app"))
    assert first.error == E.MEMBER_ID_REQUIRED and first.member_id == "app-u1"
    held = h.join(G, first.member_id)
    assert h.answer(held) is None and state(h) == GroupState.PREPARING_REBALANCE
    h.advance(2_999)
    assert h.answer(held) is None  # group.initial.rebalance.delay.ms batches the first members
    h.advance(1)
    joined = h.answer(held)
    assert (joined.error, joined.generation_id, joined.leader, joined.member_id) == (E.NONE, 1, "app-u1", "app-u1")
    assert joined.protocol_name == "range" and [m.member_id for m in joined.members] == ["app-u1"]
    assert joined.members[0].metadata == b"range-meta"
    assert state(h) == GroupState.COMPLETING_REBALANCE
    h.auto_append = False
    sync = h.sync(G, "app-u1", 1, {"app-u1": b"A"})
    assert h.answer(sync) is None and state(h) == GroupState.COMPLETING_REBALANCE  # until stored
    h.release_appends()
    assert h.answer(sync).assignment == b"A" and state(h) == GroupState.STABLE
    assert h.heartbeat(G, "app-u1", 1) == E.NONE


def test_old_join_versions_get_a_member_id_at_once():
    h = Harness()
    token = h.join(G, version_4_plus=False)
    assert h.answer(token) is None
    h.advance(3_000)
    assert h.answer(token).member_id == "client-u1"


def test_second_member_triggers_rebalance_and_only_leader_gets_members():
    h = Harness()
    (a,), gen = h.stable_group(G)
    b, b_join = h.join_with_id(G)
    assert state(h) == GroupState.PREPARING_REBALANCE and h.answer(b_join) is None
    assert h.heartbeat(G, a, gen) == E.REBALANCE_IN_PROGRESS
    a_join = h.join(G, a)
    ja, jb = h.answer(a_join), h.answer(b_join)
    assert ja.generation_id == jb.generation_id == gen + 1
    assert ja.leader == jb.leader == a
    assert [m.member_id for m in ja.members] == [a, b] and jb.members == ()
    follower_sync = h.sync(G, b, gen + 1)
    assert h.answer(follower_sync) is None  # held until the leader's assignment
    leader_sync = h.sync(G, a, gen + 1, {a: b"pa", b: b"pb"})
    assert h.answer(leader_sync).assignment == b"pa" and h.answer(follower_sync).assignment == b"pb"
    # A late follower sync in Stable gets its assignment at once.
    assert h.answer(h.sync(G, b, gen + 1)).assignment == b"pb"


def test_session_expiry_removes_member_and_rebalances():
    h = Harness()
    (a, b), gen = h.stable_group(G, 2)
    for _ in range(2):
        h.advance(4_000)
        assert h.heartbeat(G, a, gen) == E.NONE  # b stays silent
    h.advance(2_001)  # b's 10 s session is over
    assert h.heartbeat(G, a, gen) == E.REBALANCE_IN_PROGRESS
    assert b not in h.coord.groups[G].members and state(h) == GroupState.PREPARING_REBALANCE
    rejoin = h.join(G, a)
    assert h.answer(rejoin).generation_id == gen + 1 and [m.member_id for m in h.answer(rejoin).members] == [a]
    assert h.heartbeat(G, b, gen) == E.UNKNOWN_MEMBER_ID


def test_rebalance_timeout_drops_members_that_do_not_rejoin():
    h = Harness()
    (a, b), gen = h.stable_group(G, 2, rebalance=20_000)
    c, c_join = h.join_with_id(G, rebalance=20_000)
    a_join = h.join(G, a, rebalance=20_000)
    h.advance(5_000)
    assert h.heartbeat(G, b, gen) == E.REBALANCE_IN_PROGRESS  # b keeps heartbeating, never rejoins
    h.advance(15_000)
    assert h.answer(a_join).generation_id == gen + 1
    assert sorted(m.member_id for m in h.answer(a_join).members) == sorted([a, c])
    assert h.answer(c_join).error == E.NONE


def test_member_that_never_syncs_is_removed_after_rebalance_timeout():
    h = Harness()
    a, a_join = h.join_with_id(G, rebalance=20_000, session=45_000)
    b, b_join = h.join_with_id(G, rebalance=20_000, session=45_000)
    h.advance(6_001)
    gen = h.answer(a_join).generation_id
    h.answer(h.sync(G, a, gen, {a: b"x", b: b"y"}))
    h.advance(20_000)
    assert b not in h.coord.groups[G].members and state(h) == GroupState.PREPARING_REBALANCE


def test_pending_member_that_never_rejoins_expires():
    h = Harness()
    (a,), gen = h.stable_group(G)
    ghost = h.answer(h.join(G, session=10_000)).member_id
    assert ghost in h.coord.groups[G].pending_members
    h.advance(10_000)
    assert ghost not in h.coord.groups[G].pending_members
    assert h.answer(h.join(G, ghost)).error == E.UNKNOWN_MEMBER_ID


def test_leave_triggers_rebalance_and_last_leave_empties_group():
    h = Harness()
    (a, b), gen = h.stable_group(G, 2)
    assert h.leave(G, b).members[0].error == E.NONE
    assert state(h) == GroupState.PREPARING_REBALANCE
    join = h.join(G, a)
    assert h.answer(join).generation_id == gen + 1
    assert h.leave(G, "nobody").members[0].error == E.UNKNOWN_MEMBER_ID
    h.leave(G, a)
    # Everyone left: the rebalance completes with nobody, the group is Empty and stored so.
    assert state(h) == GroupState.EMPTY and h.coord.groups[G].generation == gen + 2


def test_static_member_rejoins_without_rebalance_and_old_id_is_fenced():
    h = Harness()
    token = h.join(G, instance="pod-1")  # static members skip MEMBER_ID_REQUIRED
    h.advance(3_000)
    first = h.answer(token)
    assert first.member_id == "pod-1-u1" and first.generation_id == 1
    h.answer(h.sync(G, first.member_id, 1, {first.member_id: b"P"}, instance="pod-1"))
    again = h.answer(h.join(G, instance="pod-1"))  # restarted: no member id, same instance id
    assert again.error == E.NONE and again.member_id == "pod-1-u2" and again.generation_id == 1
    assert again.leader == "pod-1-u1" and again.members == ()  # old leader id: no assignment to run
    assert state(h) == GroupState.STABLE
    assert h.heartbeat(G, "pod-1-u1", 1, instance="pod-1") == E.FENCED_INSTANCE_ID
    assert h.heartbeat(G, "pod-1-u1", 1) == E.UNKNOWN_MEMBER_ID
    assert h.answer(h.sync(G, "pod-1-u2", 1, instance="pod-1")).assignment == b"P"
    assert h.answer(h.join(G, "pod-1-u1", instance="pod-1")).error == E.FENCED_INSTANCE_ID


def test_static_member_survives_missing_a_rebalance():
    h = Harness()
    token = h.join(G, instance="pod-1", rebalance=20_000, session=45_000)
    h.advance(3_000)
    s = h.answer(token).member_id
    h.sync(G, s, 1, {s: b"P"})
    d, d_join = h.join_with_id(G, rebalance=20_000, session=45_000)
    h.advance(20_000)  # the static member never rejoined: it stays (only session expiry removes it)
    assert s in h.coord.groups[G].members and h.answer(d_join).generation_id == 2


def test_generation_and_member_fencing_errors():
    h = Harness()
    (a,), gen = h.stable_group(G)
    assert h.heartbeat(G, a, gen - 1) == E.ILLEGAL_GENERATION
    assert h.heartbeat(G, "stranger", gen) == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat("no-such-group", a, gen) == E.UNKNOWN_MEMBER_ID
    assert h.answer(h.sync(G, a, gen + 1)).error == E.ILLEGAL_GENERATION
    assert h.answer(h.sync(G, "stranger", gen)).error == E.UNKNOWN_MEMBER_ID
    h.join_with_id(G)
    assert h.answer(h.sync(G, a, gen)).error == E.REBALANCE_IN_PROGRESS
    assert h.answer(h.join("fresh", "made-up-id")).error == E.UNKNOWN_MEMBER_ID


def test_join_validation():
    h = Harness()
    assert h.answer(h.join(G, session=5_999)).error == E.INVALID_SESSION_TIMEOUT
    assert h.answer(h.join(G, session=1_800_001)).error == E.INVALID_SESSION_TIMEOUT
    assert h.answer(h.join(G, protocols=[])).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answer(h.join("")).error == E.INVALID_GROUP_ID
    h.stable_group(G)
    assert h.answer(h.join(G, protocols=[("roundrobin", b"")])).error == E.INCONSISTENT_GROUP_PROTOCOL
    assert h.answer(h.join(G, protocol_type="connect")).error == E.INCONSISTENT_GROUP_PROTOCOL
    small = Harness(GroupConfig(num_partitions=4, max_group_size=1))
    small.stable_group(G)
    assert small.answer(small.join(G)).error == E.GROUP_MAX_SIZE_REACHED


def test_protocol_chosen_by_vote():
    h = Harness()
    both = [("range", b"r"), ("roundrobin", b"rr")]
    rr_first = [("roundrobin", b"rr"), ("range", b"r")]
    tokens = [h.join_with_id(G, protocols=p)[1] for p in (both, rr_first, rr_first, [("roundrobin", b"x")])]
    h.advance(20_000)
    assert {h.answer(t).protocol_name for t in tokens} == {"roundrobin"}


def test_cooperative_rebalance_is_two_join_rounds():
    h = Harness()
    coop = [("cooperative-sticky", b"owned:none")]
    (a, b), gen = h.stable_group(G, 2, protocols=coop)
    # Round 1: b's subscription changes (it revokes partitions): a rebalance, both rejoin.
    b_join = h.join(G, b, protocols=[("cooperative-sticky", b"owned:p0")])
    a_join = h.join(G, a, protocols=coop)
    assert h.answer(b_join).generation_id == h.answer(a_join).generation_id == gen + 1
    h.sync(G, a, gen + 1, {a: b"p0,p1", b: b""})
    h.sync(G, b, gen + 1)
    assert state(h) == GroupState.STABLE
    # Round 2: the leader rejoins to hand out what was revoked; a follower with unchanged metadata waits.
    a_join2 = h.join(G, a, protocols=coop)
    assert state(h) == GroupState.PREPARING_REBALANCE and h.answer(a_join2) is None
    b_join2 = h.join(G, b, protocols=[("cooperative-sticky", b"owned:p0")])
    assert h.answer(a_join2).generation_id == h.answer(b_join2).generation_id == gen + 2


def test_follower_rejoin_in_stable_with_same_metadata_needs_no_rebalance():
    h = Harness()
    (a, b), gen = h.stable_group(G, 2)
    again = h.answer(h.join(G, b))
    assert again.generation_id == gen and state(h) == GroupState.STABLE and again.members == ()


def test_failed_assignment_store_fails_syncs_and_rebalances():
    h = Harness()
    a, a_join = h.join_with_id(G)
    h.advance(3_000)
    h.auto_append = False
    sync = h.sync(G, a, 1, {a: b"x"})
    h.release_appends(E.NOT_LEADER_OR_FOLLOWER)
    assert h.answer(sync).error == E.NOT_COORDINATOR
    assert state(h) == GroupState.PREPARING_REBALANCE


def test_requests_to_unowned_or_loading_partitions():
    h = Harness(load=False)
    assert h.answer(h.join(G)).error == E.NOT_COORDINATOR
    h.coord.begin_loading(h.coord.partition_for(G))
    assert h.answer(h.join(G)).error == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.heartbeat(G, "m", 1) == E.COORDINATOR_LOAD_IN_PROGRESS
    assert h.fetch(G).error == E.COORDINATOR_LOAD_IN_PROGRESS


def test_unload_answers_held_requests_with_not_coordinator():
    h = Harness()
    (a,), gen = h.stable_group(G)
    b, b_join = h.join_with_id(G)
    h.auto_append = False
    commit = h.commit(G, [("t", 0, 5, -1, "")], gen, a)
    out = h.run(h.coord.unload_partition(h.coord.partition_for(G), h.now))
    assert h.answer(b_join).error == E.NOT_COORDINATOR
    assert h.answer(commit).partitions[0].error == E.NOT_COORDINATOR
    assert G not in h.coord.groups and h.coord.pending_appends == []
    assert h.answer(h.join(G)).error == E.NOT_COORDINATOR
    assert len(out.completions) == 2


def test_next_deadline_tracks_timers():
    h = Harness()
    assert h.coord.next_deadline() == h.now.monotonic_ms + h.coord.config.offsets_retention_check_interval_ms
    h.join_with_id(G)
    assert h.coord.next_deadline() == h.now.monotonic_ms + 3_000


def test_leaving_while_a_join_is_held_answers_it():
    h = Harness()
    a, a_join = h.join_with_id(G)
    h.leave(G, a)
    assert h.answer(a_join).error == E.UNKNOWN_MEMBER_ID
    h.advance(3_000)
    assert state(h) == GroupState.EMPTY


def test_a_huge_client_id_still_gives_a_member_id_that_fits_an_int16_string():
    h = Harness()
    first = h.answer(h.join("g", client_id="c" * 32767))
    assert first.error == E.MEMBER_ID_REQUIRED
    assert first.member_id.startswith("c" * 1000 + "-") and len(first.member_id.encode()) < 0x7FFF
