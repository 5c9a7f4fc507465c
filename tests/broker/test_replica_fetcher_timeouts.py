"""broker.replica_fetcher: each request to the source broker is bounded by the request
timeout, and nothing else the fetcher awaits is (storage.deadline_reaper.Timer)."""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import trio
import trio.testing

from broker.replica_fetcher import FetcherSettings, ReplicaFetcher, _State
from storage.deadline_reaper import DeadlineReaper, Timer
from storage.log.epoch_cache import UNDEFINED_EPOCH

TIMEOUT = 30.0
SETTINGS = FetcherSettings(request_timeout_s=TIMEOUT, wait_max_ms=500, backoff_s=1.0)


class SlowLog:
    """A log whose truncation takes longer than a request may."""

    closed = False
    log_end_offset = 0
    log_start_offset = 0
    high_watermark = 0

    def __init__(self):
        self.epoch_cache = SimpleNamespace(latest_epoch=UNDEFINED_EPOCH)
        self.truncations = []

    async def truncate_to(self, offset: int) -> bool:
        await trio.sleep(3 * TIMEOUT)
        self.truncations.append((trio.current_time(), offset))
        return False


def follower_partition() -> SimpleNamespace:
    log = SlowLog()
    return SimpleNamespace(key=("t", 0), topic_id=uuid.UUID(int=1), log=log, leader_epoch=1, is_leader=False,
                           log_end_offset=0,
                           log_start_offset=0, high_watermark=0)


class SilentSource:
    """The source broker's network: connections that are accepted and never answered."""

    def __init__(self):
        self.connects = []
        self.peers = []

    async def connect(self, host, port, *, tls=None):
        self.connects.append(trio.current_time())
        ours, theirs = trio.testing.memory_stream_pair()
        self.peers.append(theirs)  # kept open: the requests are read by nobody
        return ours


def env_with(net) -> SimpleNamespace:
    return SimpleNamespace(net=net, now=trio.current_time, sleep=trio.sleep, sleep_until=trio.sleep_until,
                           move_on_at=trio.move_on_at, fail_after=trio.fail_after)


def fetcher_with(net, timers: DeadlineReaper) -> ReplicaFetcher:
    env = env_with(net)
    return ReplicaFetcher(env, broker_id=2, source_id=1, address_of=lambda _id: ("n1", 9092), settings=SETTINGS,
                          timers=timers)


async def test_an_unanswered_fetch_times_out_reconnects_and_times_out_again(autojump_clock):
    net = SilentSource()
    timers = DeadlineReaper(env_with(net))
    fetcher = fetcher_with(net, timers)
    partition = follower_partition()
    fetcher.partitions[partition.key] = state = _State(partition)
    state.truncating = False  # straight to fetching
    request_timeout = TIMEOUT + SETTINGS.wait_max_ms / 1000
    async with trio.open_nursery() as nursery:
        await nursery.start(timers.run)
        with trio.move_on_after(2 * request_timeout + 2 * SETTINGS.backoff_s + 1):
            await fetcher.run()
        nursery.cancel_scope.cancel()
    # Each connection's request gave up after exactly its timeout; then a backoff, then anew.
    assert net.connects == [0.0, request_timeout + SETTINGS.backoff_s,
                            2 * (request_timeout + SETTINGS.backoff_s)]


async def test_a_truncation_after_a_request_is_not_bounded_by_its_timeout(autojump_clock):
    net = SilentSource()
    timers = DeadlineReaper(env_with(net))
    fetcher = fetcher_with(net, timers)
    partition = follower_partition()
    fetcher.partitions[partition.key] = state = _State(partition)
    async with trio.open_nursery() as nursery:
        await nursery.start(timers.run)
        timer = fetcher._timer = Timer(timers)
        with timer.scope:
            timer.arm(TIMEOUT)  # a request came and went
            timer.disarm()
            await fetcher._truncate_to(partition.key, state, 0, done=True)
        nursery.cancel_scope.cancel()
    assert not timer.scope.cancelled_caught
    assert partition.log.truncations == [(3 * TIMEOUT, 0)]
    assert not state.truncating
