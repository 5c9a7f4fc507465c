"""Static membership (KIP-345) decisions of the group coordinator core, as Kafka's classic
coordinator makes them: every request of a static member carries its group.instance.id and
is FENCED_INSTANCE_ID once a newer incarnation holds that id; LeaveGroup v3 answers each
member of its batch and lets an admin remove a static member by instance id alone."""
from __future__ import annotations

from broker.groups import GroupState
from tests.broker.groups.harness import Harness
from wire.error_codes import ErrorCode as E

G = "static-group"


def static_group(h: Harness, instances=("pod-1", "pod-2"), session=10_000, rebalance=30_000):
    """Static members joined and synced; returns ({instance: member id}, generation)."""
    tokens = {i: h.join(G, instance=i, session=session, rebalance=rebalance) for i in instances}
    h.advance(h.coord.config.initial_rebalance_delay_ms * (len(instances) + 1) + 1)  # the delay grows per joiner
    joined = {i: h.answer(t) for i, t in tokens.items()}
    assert all(j is not None and j.error == E.NONE for j in joined.values()), joined
    ids = {i: j.member_id for i, j in joined.items()}
    generation = next(iter(joined.values())).generation_id
    leader = next(iter(joined.values())).leader
    for i, member_id in ids.items():
        plan = {m: f"assign-{inst}".encode() for inst, m in ids.items()} if member_id == leader else ()
        assert h.answer(h.sync(G, member_id, generation, plan, instance=i)).error == E.NONE
    assert h.coord.groups[G].state == GroupState.STABLE
    return ids, generation


def restart(h: Harness, instance: str, session=10_000, rebalance=30_000):
    """The instance comes back without its member id (a restarted process): the new JoinGroup answer."""
    return h.answer(h.join(G, instance=instance, session=session, rebalance=rebalance))


def commit(h: Harness, member_id, generation, instance, offsets=(("t", 0, 10, 4, "md"),)):
    token = h.token()
    h.run(h.coord.commit_offsets(token, G, offsets, generation_id=generation, member_id=member_id,
                                 group_instance_id=instance, now=h.now))
    return {(p.topic, p.partition): p.error for p in h.answer(token).partitions}


def leave_batch(h: Harness, members, group=G):
    token = h.token()
    h.run(h.coord.leave(token, group, members, now=h.now))
    return h.answer(token)


# -- fencing --------------------------------------------------------------------------------

def test_a_restarted_static_member_fences_its_old_member_id_everywhere():
    h = Harness()
    ids, gen = static_group(h)
    old = ids["pod-1"]
    again = restart(h, "pod-1")
    assert again.error == E.NONE and again.generation_id == gen and again.member_id != old
    new = again.member_id
    assert h.coord.groups[G].state == GroupState.STABLE  # no rebalance for pod-2
    # The old incarnation, still carrying the instance id, is fenced on every request.
    assert h.heartbeat(G, old, gen, instance="pod-1") == E.FENCED_INSTANCE_ID
    assert h.answer(h.sync(G, old, gen, instance="pod-1")).error == E.FENCED_INSTANCE_ID
    assert commit(h, old, gen, "pod-1") == {("t", 0): E.FENCED_INSTANCE_ID}
    assert leave_batch(h, [(old, "pod-1")]).members[0].error == E.FENCED_INSTANCE_ID
    assert h.answer(h.join(G, old, instance="pod-1")).error == E.FENCED_INSTANCE_ID
    # The new one works, and gets the assignment the old one had.
    assert h.heartbeat(G, new, gen, instance="pod-1") == E.NONE
    assert h.answer(h.sync(G, new, gen, instance="pod-1")).assignment == b"assign-pod-1"
    assert commit(h, new, gen, "pod-1") == {("t", 0): E.NONE}
    assert h.heartbeat(G, ids["pod-2"], gen, instance="pod-2") == E.NONE
    assert h.coord.groups[G].generation == gen


def test_an_instance_id_the_group_does_not_know_is_an_unknown_member():
    h = Harness()
    ids, gen = static_group(h)
    # A real member id paired with someone else's (or no registered) instance id.
    assert h.heartbeat(G, ids["pod-1"], gen, instance="pod-9") == E.UNKNOWN_MEMBER_ID
    assert h.heartbeat(G, ids["pod-1"], gen, instance="pod-2") == E.FENCED_INSTANCE_ID
    assert commit(h, ids["pod-1"], gen, "pod-9") == {("t", 0): E.UNKNOWN_MEMBER_ID}
    assert h.answer(h.sync(G, ids["pod-1"], gen, instance="pod-9")).error == E.UNKNOWN_MEMBER_ID
    # Fencing comes before the generation check, as in Kafka.
    assert h.heartbeat(G, "stale", gen + 5, instance="pod-1") == E.FENCED_INSTANCE_ID


def test_commit_carries_the_leader_epoch_to_offset_fetch():
    h = Harness()
    ids, gen = static_group(h, ("pod-1",))
    offsets = [("t", 0, 10, 4, "a"), ("t", 1, 20, -1, None)]
    assert set(commit(h, ids["pod-1"], gen, "pod-1", offsets).values()) == {E.NONE}
    got = {(o.topic, o.partition): (o.offset, o.leader_epoch, o.metadata) for o in h.fetch(G).offsets}
    assert got == {("t", 0): (10, 4, "a"), ("t", 1): (20, -1, "")}


def test_commit_during_completing_rebalance_checks_the_member_first():
    h = Harness()
    ids, gen = static_group(h)
    joins = {i: h.join(G, m, instance=i) for i, m in ids.items()}  # everyone rejoins: generation gen + 1
    assert all(h.answer(t).generation_id == gen + 1 for t in joins.values())
    assert h.coord.groups[G].state == GroupState.COMPLETING_REBALANCE
    assert commit(h, ids["pod-1"], gen, "pod-1") == {("t", 0): E.ILLEGAL_GENERATION}
    assert commit(h, ids["pod-1"], gen + 1, "pod-1") == {("t", 0): E.REBALANCE_IN_PROGRESS}
    assert commit(h, "", -1, None) == {("t", 0): E.UNKNOWN_MEMBER_ID}  # anonymous, group not empty


# -- LeaveGroup v3 ----------------------------------------------------------------------------

def test_leave_batch_answers_each_member_and_removes_static_members_by_instance_id():
    h = Harness()
    ids, gen = static_group(h, ("pod-1", "pod-2", "pod-3"))
    pending = h.answer(h.join(G)).member_id  # a dynamic member between MEMBER_ID_REQUIRED and its join
    assert pending in h.coord.groups[G].pending_members
    result = leave_batch(h, [
        ("", "pod-1"),              # admin removal by instance id
        ("", "pod-9"),              # no such instance
        ("stale-id", "pod-2"),      # pod-2 is held by another member id
        (ids["pod-3"], "pod-3"),    # the member itself
        (pending, None),            # a pending member
        ("stranger", None),
        ("", None),                 # names nobody
    ])
    assert result.error == E.NONE
    assert [(m.member_id, m.group_instance_id, m.error) for m in result.members] == [
        ("", "pod-1", E.NONE), ("", "pod-9", E.UNKNOWN_MEMBER_ID), ("stale-id", "pod-2", E.FENCED_INSTANCE_ID),
        (ids["pod-3"], "pod-3", E.NONE), (pending, None, E.NONE), ("stranger", None, E.UNKNOWN_MEMBER_ID),
        ("", None, E.UNKNOWN_MEMBER_ID)]
    group = h.coord.groups[G]
    assert sorted(group.static_members) == ["pod-2"] and list(group.members) == [ids["pod-2"]]
    assert not group.pending_members
    # The removal started a rebalance: pod-2 learns of it, rejoins alone and gets a new generation.
    assert group.state == GroupState.PREPARING_REBALANCE
    assert h.heartbeat(G, ids["pod-2"], gen, instance="pod-2") == E.REBALANCE_IN_PROGRESS
    rejoined = h.answer(h.join(G, ids["pod-2"], instance="pod-2"))
    assert rejoined.generation_id == gen + 1 and [m.member_id for m in rejoined.members] == [ids["pod-2"]]
    # A removed instance that comes back is a new static member (it joins the next rebalance).
    assert h.heartbeat(G, ids["pod-1"], gen + 1, instance="pod-1") == E.UNKNOWN_MEMBER_ID


def test_removing_a_static_member_answers_its_held_join():
    h = Harness()
    ids, gen = static_group(h)
    held = h.join(G, ids["pod-1"], instance="pod-1", protocols=[("range", b"changed")])  # starts a rebalance
    assert h.answer(held) is None and h.coord.groups[G].state == GroupState.PREPARING_REBALANCE
    assert leave_batch(h, [("", "pod-1")]).members[0].error == E.NONE
    assert h.answer(held).error == E.UNKNOWN_MEMBER_ID
    # pod-2 is the only one left to rejoin; then the rebalance completes without pod-1.
    done = h.answer(h.join(G, ids["pod-2"], instance="pod-2"))
    assert done.error == E.NONE and done.generation_id == gen + 1 and done.leader == ids["pod-2"]


def test_leave_of_an_unknown_group_answers_each_member():
    h = Harness()
    result = leave_batch(h, [("", "pod-1"), ("m", None)], group="nobody-here")
    assert result.error == E.NONE
    assert [m.error for m in result.members] == [E.UNKNOWN_MEMBER_ID, E.UNKNOWN_MEMBER_ID]


def test_leave_of_a_group_this_broker_does_not_coordinate_is_a_group_error():
    h = Harness(load=False)
    result = leave_batch(h, [("", "pod-1")])
    assert result.error == E.NOT_COORDINATOR and result.members == ()


def test_removing_every_member_empties_the_group_and_stores_it():
    h = Harness()
    ids, gen = static_group(h)
    result = leave_batch(h, [("", "pod-1"), ("", "pod-2")])
    assert [m.error for m in result.members] == [E.NONE, E.NONE]
    group = h.coord.groups[G]
    assert group.state == GroupState.EMPTY and not group.members and not group.static_members
    assert group.generation == gen + 1


# -- session timeout ------------------------------------------------------------------------

def test_a_static_member_past_its_session_timeout_is_removed_like_any_member():
    """Kafka removes an expired static member too (KIP-345: by session timeout or LeaveGroup)."""
    h = Harness()
    ids, gen = static_group(h, session=10_000)
    for _ in range(4):  # pod-2 heartbeats, pod-1 has gone silent
        h.advance(3_000)
        assert h.heartbeat(G, ids["pod-2"], gen, instance="pod-2") in (E.NONE, E.REBALANCE_IN_PROGRESS)
    group = h.coord.groups[G]
    assert ids["pod-1"] not in group.members and "pod-1" not in group.static_members
    assert group.state == GroupState.PREPARING_REBALANCE


def test_a_static_member_back_within_its_session_keeps_its_place():
    h = Harness()
    ids, gen = static_group(h, session=10_000)
    h.advance(6_000)
    assert h.heartbeat(G, ids["pod-2"], gen, instance="pod-2") == E.NONE
    again = restart(h, "pod-1", session=10_000)  # within the session timeout
    h.advance(6_000)  # past the old incarnation's deadline: the new id's timer counts now
    assert h.heartbeat(G, ids["pod-2"], gen, instance="pod-2") == E.NONE
    assert h.heartbeat(G, again.member_id, gen, instance="pod-1") == E.NONE
    assert h.coord.groups[G].state == GroupState.STABLE and h.coord.groups[G].generation == gen
