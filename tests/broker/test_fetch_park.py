"""handlers.fetch: a parked fetch re-reads only when a partition that fired may add to its answer."""
from types import SimpleNamespace

from broker.handlers.fetch import _may_answer


def _partition(**kw):
    """A leader replica: its offsets live on its log, as a Partition's do."""
    offsets = dict(log_start_offset=0, log_end_offset=10, high_watermark=8)
    log = SimpleNamespace(**{name: kw.pop(name, value) for name, value in offsets.items()})
    base = dict(is_leader=True, leader_epoch=3, last_stable_offset=7, log=log)
    return SimpleNamespace(**{**base, **kw})


def _broker(partition):
    return SimpleNamespace(replicas=SimpleNamespace(get=lambda topic, index: partition))


def test_news_is_judged_against_the_offset_each_kind_of_fetch_reads_to():
    p = _partition()
    key = ("t", 0)
    # A follower reads to the log end, a consumer to the HW, read_committed to the LSO.
    assert _may_answer(_broker(p), key, (p, 3, 9), follower=True, committed=False)
    assert not _may_answer(_broker(p), key, (p, 3, 10), follower=True, committed=False)
    assert not _may_answer(_broker(p), key, (p, 3, 8), follower=False, committed=False)
    assert _may_answer(_broker(p), key, (p, 3, 7), follower=False, committed=False)
    assert not _may_answer(_broker(p), key, (p, 3, 7), follower=False, committed=True)


def test_any_change_that_makes_an_error_answer_is_news():
    p = _partition()
    key = ("t", 0)
    assert _may_answer(_broker(_partition()), key, (p, 3, 10), follower=True, committed=False)  # another replica
    assert _may_answer(_broker(p), key, (p, 2, 10), follower=True, committed=False)  # epoch moved on
    assert _may_answer(_broker(None), key, (p, 3, 10), follower=True, committed=False)  # partition gone
    p.is_leader = False
    assert _may_answer(_broker(p), key, (p, 3, 10), follower=True, committed=False)
    p.is_leader, p.log.log_start_offset = True, 11
    assert _may_answer(_broker(p), key, (p, 3, 10), follower=True, committed=False)  # retention passed it


async def test_a_re_read_the_deadline_cuts_short_leaves_the_answer_whole(autojump_clock):
    """The parked fetch's deadline scope stays armed while re-reading: a re-read it cancels
    (waiting for the replica manager) must leave what was read, and its byte count, intact."""
    import trio

    from broker.handlers.fetch import _Answer
    from metadata.authorizer import AuthorizerSettings

    partition = _partition(read=lambda offset, limit, max_offset, min_one_batch: SimpleNamespace(size=100))
    blocked = False

    async def leader_partition(topic, index, deadline):
        if blocked:
            await trio.sleep_forever()
        return partition

    broker = SimpleNamespace(env=SimpleNamespace(now=trio.current_time), leader_partition=leader_partition,
                             config=SimpleNamespace(authorizer=AuthorizerSettings()))  # no authorizer
    request = SimpleNamespace(replica_id=-1, isolation_level=0, max_bytes=1000, min_bytes=1)
    item = SimpleNamespace(partition=0, fetch_offset=0, current_leader_epoch=-1, last_fetched_epoch=-1,
                           partition_max_bytes=1000)
    answer = _Answer(broker, request, [("t", None, [item])], trio.current_time() + 5)
    await answer.read_all()
    assert answer.total == 100
    first = answer.parts[0][0]
    blocked = True
    with trio.move_on_after(1):
        await answer.reread([("t", 0)])
    assert answer.total == 100 and answer.parts[0][0] is first
    blocked = False
    await answer.reread([("t", 0)])  # redone in full, as _park does after its deadline
    assert answer.total == 100 and answer.parts[0][0] is not first
