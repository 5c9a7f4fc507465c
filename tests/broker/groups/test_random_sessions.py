"""Random member behaviour against the coordinator: no held request is lost or answered twice."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from broker.groups import GroupState
from tests.broker.groups.harness import Harness
from wire.error_codes import ErrorCode as E

G = "g"

ops = st.lists(st.tuples(
    st.sampled_from(["join_new", "join", "sync", "heartbeat", "leave", "commit", "advance", "hold", "release",
                     "fail_appends", "static_join"]),
    st.integers(0, 2),  # which member slot
    st.integers(0, 12_000),  # ms, for advance
), max_size=60)


@given(ops)
@settings(max_examples=250, deadline=None)
def test_every_held_request_is_answered_exactly_once(script):
    h = Harness()
    slots: dict[int, str] = {}
    generations: dict[str, int] = {}
    held_tokens: list = []
    last_generation = 0
    for op, slot, ms in script:
        member = slots.get(slot, "")
        gen = generations.get(member, -1)
        if op == "join_new":
            got = h.answer(h.join(G, session=6_000, rebalance=8_000))
            if got.error == E.MEMBER_ID_REQUIRED:
                slots[slot] = got.member_id
        elif op in ("join", "static_join"):
            instance = f"i{slot}" if op == "static_join" else None
            token = h.join(G, "" if instance else member, session=6_000, rebalance=8_000, instance=instance)
            held_tokens.append(("join", token, slot))
        elif op == "sync" and member:
            assignments = {m: b"a" for m in h.coord.groups[G].members} if G in h.coord.groups else {}
            held_tokens.append(("sync", h.sync(G, member, gen, assignments), slot))
        elif op == "heartbeat" and member:
            h.heartbeat(G, member, gen)
        elif op == "leave" and member:
            h.leave(G, member)
        elif op == "commit":
            held_tokens.append(("commit", h.commit(G, [("t", slot, ms, -1, "")], gen, member), slot))
        elif op == "advance":
            h.advance(ms)
        elif op == "hold":
            h.auto_append = False
        elif op == "release":
            h.auto_append = True
            h.release_appends()
        elif op == "fail_appends":
            h.release_appends(E.NOT_ENOUGH_REPLICAS)
        # Learn generations and ids from answered joins.
        for kind, token, s in held_tokens:
            got = h.answer(token)
            if kind == "join" and got is not None and got.error == E.NONE:
                slots[s] = got.member_id
                generations[got.member_id] = got.generation_id
        group = h.coord.groups.get(G)
        if group is not None:
            assert group.generation >= last_generation
            last_generation = group.generation
            assert group.leader_id is None or group.leader_id in group.members or not group.members
    # Drain: appends complete, time runs out every timer; every held request must have its answer.
    h.auto_append = True
    h.release_appends()
    h.advance(400_000)
    for kind, token, _ in held_tokens:
        assert len(h.answers[token]) == 1, (kind, token, h.answers[token])
    group = h.coord.groups.get(G)
    if group is not None:
        assert all(m.join_waiter is None and m.sync_waiter is None for m in group.members.values())
        assert group.state in (GroupState.EMPTY, GroupState.STABLE, GroupState.COMPLETING_REBALANCE)
