"""broker.fetch_session (the broker's session cache) and broker.fetch_session_client, sans-IO."""
from __future__ import annotations

import random
import uuid

from broker.fetch_session import (FINAL_EPOCH, INITIAL_EPOCH, INVALID_SESSION_ID, FetchSessionCache,
                                  next_epoch)
from broker.fetch_session_client import FetchSessionClient, PartitionRequest
from wire.error_codes import ErrorCode as E
from wire.protocol import FetchRequest as F
from wire.protocol import FetchResponse as R

V = 11


def request(parts=(), *, session_id=0, epoch=INITIAL_EPOCH, forgotten=()):
    """parts: (topic, index, fetch_offset) triples; forgotten: (topic, index) pairs."""
    topics: dict[str, list] = {}
    for topic, index, offset in parts:
        topics.setdefault(topic, []).append(F.FetchPartition(
            partition=index, current_leader_epoch=1, fetch_offset=offset, log_start_offset=0,
            partition_max_bytes=1 << 20))
    gone: dict[str, list] = {}
    for topic, index in forgotten:
        gone.setdefault(topic, []).append(index)
    return F(replica_id=2, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
             session_id=session_id, session_epoch=epoch,
             topics=[F.FetchTopic(topic=t, partitions=ps) for t, ps in topics.items()],
             forgotten_topics_data=[F.ForgottenTopic(topic=t, partitions=ps) for t, ps in gone.items()],
             rack_id="")


def pd(index, *, hw=10, lso=None, start=0, records=b"", error=E.NONE):
    return R.PartitionData(partition_index=index, error_code=error, high_watermark=hw,
                           last_stable_offset=hw if lso is None else lso, log_start_offset=start,
                           aborted_transactions=None, preferred_read_replica=-1, records=records)


def answer(context, changes=None, default=None):
    """Read what `context` names: every partition pd(index), or changes[(topic, index)]."""
    changes = changes or {}
    responses = [R.FetchableTopicResponse(topic=name, partitions=[
        changes.get((name, item.partition), default or pd(item.partition)) for item in items])
        for name, items in context.topics]
    return responses


def keys(responses):
    return [(t.topic, p.partition_index) for t in responses for p in t.partitions]


def open_session(cache, parts, now=0, privileged=True):
    ctx = cache.new_context(request(parts), V, now, privileged=privileged)
    session_id, _ = ctx.respond(answer(ctx), now)
    assert session_id != INVALID_SESSION_ID
    return session_id


def incremental(cache, session_id, epoch, parts=(), forgotten=(), now=0):
    return cache.new_context(request(parts, session_id=session_id, epoch=epoch, forgotten=forgotten), V, now,
                             privileged=True)


PARTS = [("a", 0, 5), ("a", 1, 5), ("b", 0, 5)]


def test_full_fetch_opens_a_session_and_incremental_fetches_answer_only_news():
    cache = FetchSessionCache(random.Random(1))
    sid = open_session(cache, PARTS)
    assert len(cache) == 1 and cache.sessions[sid].epoch == 1

    ctx = incremental(cache, sid, 1)
    assert not ctx.error and ctx.incremental
    # An empty incremental request still reads every partition of the session...
    assert [(n, i.partition, i.fetch_offset) for n, items in ctx.topics for i in items] == PARTS
    # ...and answers none of them when nothing changed.
    assert ctx.respond(answer(ctx), 1) == (sid, [])

    ctx = incremental(cache, sid, 2)
    _, out = ctx.respond(answer(ctx, {("a", 1): pd(1, hw=11)}), 2)
    assert keys(out) == [("a", 1)]


def test_a_partition_with_records_is_always_answered_even_if_nothing_else_moved():
    cache = FetchSessionCache(random.Random(1))
    sid = open_session(cache, PARTS)
    for epoch in (1, 2):  # the same data again (the fetcher did not move its offset): still sent
        ctx = incremental(cache, sid, epoch)
        _, out = ctx.respond(answer(ctx, {("b", 0): pd(0, records=b"x" * 70)}), 1)
        assert keys(out) == [("b", 0)] and len(out[0].partitions[0].records) == 70


def test_each_news_kind_is_answered_once():
    cache = FetchSessionCache(random.Random(1))
    sid = open_session(cache, [("a", 0, 5)])
    epoch = 1
    for change in (pd(0, hw=12), pd(0, hw=12, lso=11), pd(0, hw=12, lso=11, start=3)):
        for expected in ([("a", 0)], []):
            ctx = incremental(cache, sid, epoch)
            epoch += 1
            assert keys(ctx.respond(answer(ctx, default=change), 0)[1]) == expected


def test_an_error_is_always_answered_and_the_partition_is_answered_again_once_it_clears():
    cache = FetchSessionCache(random.Random(1))
    sid = open_session(cache, [("a", 0, 5)])
    error = pd(0, hw=-1, lso=-1, start=-1, error=E.NOT_LEADER_OR_FOLLOWER)
    for epoch in (1, 2):
        ctx = incremental(cache, sid, epoch)
        assert keys(ctx.respond(answer(ctx, default=error), 0)[1]) == [("a", 0)]
    ctx = incremental(cache, sid, 3)
    out = ctx.respond(answer(ctx), 0)[1]  # the same HW as before the error: still news
    assert keys(out) == [("a", 0)] and out[0].partitions[0].high_watermark == 10


def test_incremental_requests_add_update_and_forget_partitions():
    cache = FetchSessionCache(random.Random(1))
    sid = open_session(cache, PARTS)
    ctx = incremental(cache, sid, 1, parts=[("a", 1, 9), ("c", 4, 0)], forgotten=[("b", 0), ("zz", 1)])
    got = {(n, i.partition): i.fetch_offset for n, items in ctx.topics for i in items}
    assert got == {("a", 0): 5, ("a", 1): 9, ("c", 4): 0}
    _, out = ctx.respond(answer(ctx), 0)
    assert keys(out) == [("c", 4)]  # new to the session: its first answer is news
    ctx = incremental(cache, sid, 2)
    assert sorted(k for n, items in ctx.topics for k in [(n, i.partition) for i in items]) == [
        ("a", 0), ("a", 1), ("c", 4)]


def test_answered_partitions_move_to_the_back_round_robin():
    cache = FetchSessionCache(random.Random(1))
    sid = open_session(cache, PARTS)
    ctx = incremental(cache, sid, 1)
    ctx.respond(answer(ctx, {("a", 0): pd(0, records=b"r")}), 0)
    ctx = incremental(cache, sid, 2)
    assert [(n, i.partition) for n, items in ctx.topics for i in items] == [("a", 1), ("b", 0), ("a", 0)]
    assert [n for n, _ in ctx.topics] == ["a", "b", "a"]  # runs of one topic, in session order


def test_session_errors():
    cache = FetchSessionCache(random.Random(1))
    sid = open_session(cache, PARTS)
    assert incremental(cache, sid + 1, 1).error == E.FETCH_SESSION_ID_NOT_FOUND
    assert incremental(cache, sid, 2).error == E.INVALID_FETCH_SESSION_EPOCH
    assert incremental(cache, sid, 1).error == E.NONE
    assert incremental(cache, sid, 1).error == E.INVALID_FETCH_SESSION_EPOCH  # a replayed epoch
    assert cache.session_errors == 3 and sid in cache.sessions  # errors do not end the session


def test_closing_and_reopening():
    cache = FetchSessionCache(random.Random(1))
    sid = open_session(cache, PARTS)
    # (id, -1) closes it and is served sessionless.
    ctx = cache.new_context(request(PARTS, session_id=sid, epoch=FINAL_EPOCH), V, 0, privileged=True)
    assert sid not in cache.sessions
    session_id, out = ctx.respond(answer(ctx), 0)
    assert session_id == INVALID_SESSION_ID and keys(out) == [(t, i) for t, i, _ in PARTS]
    # (id, 0) closes it and opens a new one.
    sid = open_session(cache, PARTS)
    ctx = cache.new_context(request(PARTS, session_id=sid, epoch=INITIAL_EPOCH), V, 0, privileged=True)
    new_id, _ = ctx.respond(answer(ctx), 0)
    assert list(cache.sessions) == [new_id] and new_id not in (sid, INVALID_SESSION_ID)


def test_sessionless_requests_keep_nothing():
    cache = FetchSessionCache(random.Random(1))
    for version, epoch in ((6, INITIAL_EPOCH), (V, FINAL_EPOCH)):
        ctx = cache.new_context(request(PARTS, epoch=epoch), version, 0, privileged=False)
        assert ctx.respond(answer(ctx), 0)[0] == INVALID_SESSION_ID
    assert len(cache) == 0 and cache.sessionless_fetches == 2


def test_no_room_means_no_session_and_slots_zero_disables_sessions():
    cache = FetchSessionCache(random.Random(1), max_slots=0)
    ctx = cache.new_context(request(PARTS), V, 0, privileged=True)
    assert ctx.respond(answer(ctx), 0)[0] == INVALID_SESSION_ID


def test_eviction_prefers_stale_sessions_then_the_least_valuable():
    cache = FetchSessionCache(random.Random(1), max_slots=2, eviction_ms=1000)
    consumer = open_session(cache, PARTS[:1], now=0, privileged=False)
    follower = open_session(cache, PARTS, now=0, privileged=True)
    # Full, nothing stale, both young: another consumer cannot get in.
    ctx = cache.new_context(request(PARTS), V, 500, privileged=False)
    assert ctx.respond(answer(ctx), 500)[0] == INVALID_SESSION_ID
    # A follower displaces the young consumer session.
    follower2 = open_session(cache, PARTS[:1], now=600, privileged=True)
    assert sorted(cache.sessions) == sorted([follower, follower2]) and cache.evictions == 1
    assert consumer not in cache.sessions
    # Keep the first follower busy; the second goes stale and a consumer may take its slot.
    ctx = incremental(cache, follower, 1, now=1500)
    consumer2 = open_session(cache, PARTS[:1], now=1700, privileged=False)
    assert sorted(cache.sessions) == sorted([follower, consumer2])


def test_old_sessions_are_evicted_smallest_first_when_the_newcomer_is_worth_as_much():
    cache = FetchSessionCache(random.Random(1), max_slots=2, eviction_ms=1000)
    big = open_session(cache, PARTS, now=0, privileged=False)
    small = open_session(cache, PARTS[:1], now=0, privileged=False)
    for epoch in (1,):  # keep both in use (nothing stale), but both are past their minimum lifetime
        incremental(cache, big, epoch, now=1500)
        incremental(cache, small, epoch, now=1500)
    ctx = cache.new_context(request([]), V, 1600, privileged=False)  # worth less than either
    assert ctx.respond(answer(ctx), 1600)[0] == INVALID_SESSION_ID
    newcomer = open_session(cache, PARTS[:2], now=1600, privileged=False)
    assert sorted(cache.sessions) == sorted([big, newcomer])


def test_session_ids_come_from_the_rng_and_are_never_zero():
    a = FetchSessionCache(random.Random(7))
    b = FetchSessionCache(random.Random(7))
    ids = [open_session(a, PARTS) for _ in range(50)]
    assert ids == [open_session(b, PARTS) for _ in range(50)]
    assert len(set(ids)) == 50 and all(0 < i < 2 ** 31 for i in ids)


def test_epochs_wrap_past_zero():
    assert next_epoch(0) == 1 and next_epoch(41) == 42
    assert next_epoch(2 ** 31 - 1) == 1
    assert next_epoch(-1) == -1


# -- the fetcher side ------------------------------------------------------------------------
def req(offset, epoch=1):
    return PartitionRequest(fetch_offset=offset, log_start_offset=0, current_leader_epoch=epoch,
                            partition_max_bytes=100)


def test_client_sends_everything_first_then_only_changes_and_forgets_what_it_dropped():
    client = FetchSessionClient()
    wanted = {("a", 0): req(5), ("a", 1): req(5), ("b", 0): req(5)}
    plan = client.build(wanted)
    assert plan.full and (plan.session_id, plan.epoch) == (0, 0) and plan.partitions == wanted
    assert client.handle_response(plan, E.NONE, 77)
    plan = client.build(wanted)
    assert (plan.session_id, plan.epoch, plan.partitions, plan.forgotten) == (77, 1, {}, [])
    assert client.handle_response(plan, E.NONE, 77)
    plan = client.build({("a", 0): req(9), ("b", 0): req(5, epoch=2), ("c", 0): req(0)})
    assert plan.epoch == 2 and plan.forgotten == [("a", 1)]
    assert plan.partitions == {("a", 0): req(9), ("b", 0): req(5, epoch=2), ("c", 0): req(0)}


def test_client_falls_back_to_full_requests():
    client = FetchSessionClient()
    wanted = {("a", 0): req(5)}
    client.handle_response(client.build(wanted), E.NONE, 77)
    plan = client.build(wanted)
    assert not client.handle_response(plan, E.INVALID_FETCH_SESSION_EPOCH, 0)
    plan = client.build(wanted)
    assert plan.full and plan.session_id == 77 and plan.partitions == wanted  # closes 77, opens anew
    client.handle_response(plan, E.NONE, 78)
    assert not client.handle_response(client.build(wanted), E.FETCH_SESSION_ID_NOT_FOUND, 0)
    plan = client.build(wanted)
    assert plan.full and plan.session_id == 0
    client.handle_response(plan, E.NONE, 0)  # the broker had no room: full again next time
    assert client.build(wanted).full
    client.handle_response(client.build(wanted), E.NONE, 79)
    client.build(wanted)
    client.handle_error()  # the answer was lost
    plan = client.build(wanted)
    assert plan.full and plan.session_id == 79


def _by_id_request(ids, *, session_id=0, epoch=INITIAL_EPOCH, forgotten=()):
    """A Fetch v13+ request: ids are (topic id, index, fetch_offset) triples."""
    topics: dict = {}
    for topic_id, index, offset in ids:
        topics.setdefault(topic_id, []).append(F.FetchPartition(
            partition=index, current_leader_epoch=1, fetch_offset=offset, last_fetched_epoch=1, log_start_offset=0,
            partition_max_bytes=1 << 20))
    gone: dict = {}
    for topic_id, index in forgotten:
        gone.setdefault(topic_id, []).append(index)
    return F(max_wait_ms=0, min_bytes=1, session_id=session_id, session_epoch=epoch,
             topics=[F.FetchTopic(topic_id=t, partitions=ps) for t, ps in topics.items()],
             forgotten_topics_data=[F.ForgottenTopic(topic_id=t, partitions=ps) for t, ps in gone.items()])


def test_a_session_opened_by_topic_id_keys_partitions_by_id_and_refuses_requests_by_name():
    a, b = uuid.UUID(int=1), uuid.UUID(int=2)
    cache = FetchSessionCache(random.Random(1))
    ctx = cache.new_context(_by_id_request([(a, 0, 5), (b, 0, 7)]), 16, 0, privileged=True)
    assert ctx.by_id and [key for key, _ in ctx.topics] == [a, b]
    responses = [R.FetchableTopicResponse(topic="", topic_id=key, partitions=[pd(item.partition) for item in items])
                 for key, items in ctx.topics]
    session_id, _ = ctx.respond(responses, 0)
    session = cache.sessions[session_id]
    assert session.uses_topic_ids and set(session.partitions) == {(a, 0), (b, 0)}
    assert session.partitions[(a, 0)].last_fetched_epoch == 1
    # Forgetting goes by id too.
    ctx = cache.new_context(_by_id_request([], session_id=session_id, epoch=1, forgotten=[(b, 0)]), 16, 0,
                            privileged=True)
    assert ctx.error == E.NONE and [key for key, _ in ctx.topics] == [a]
    # The same session asked for by a request naming topics (v12 and older) is refused, and so
    # is a session opened by name asked for by id (Kafka's FETCH_SESSION_TOPIC_ID_ERROR).
    by_name = cache.new_context(request([("t", 0, 1)], session_id=session_id, epoch=2), 12, 0, privileged=True)
    assert by_name.error == E.FETCH_SESSION_TOPIC_ID_ERROR
    named = open_session(cache, [("t", 0, 1)])
    assert cache.new_context(_by_id_request([(a, 0, 5)], session_id=named, epoch=1), 13, 0,
                             privileged=True).error == E.FETCH_SESSION_TOPIC_ID_ERROR


def test_an_incremental_answer_always_carries_a_diverging_epoch():
    cache = FetchSessionCache(random.Random(1))
    session_id = open_session(cache, [("t", 0, 5)])
    ctx = incremental(cache, session_id, 1)
    diverged = pd(0)
    diverged.diverging_epoch = R.EpochEndOffset(epoch=1, end_offset=3)
    _, responses = ctx.respond(answer(ctx, {("t", 0): diverged}), 0)
    assert keys(responses) == [("t", 0)] and responses[0].partitions[0].diverging_epoch.end_offset == 3
