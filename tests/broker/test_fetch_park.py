"""handlers.fetch: a parked fetch re-reads only when a partition that fired may add to its answer."""
from types import SimpleNamespace

from broker.handlers.fetch import _may_answer


def _partition(**kw):
    base = dict(is_leader=True, leader_epoch=3, log_start_offset=0, log_end_offset=10, high_watermark=8,
                last_stable_offset=7)
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
    p.is_leader, p.log_start_offset = True, 11
    assert _may_answer(_broker(p), key, (p, 3, 10), follower=True, committed=False)  # retention passed it
