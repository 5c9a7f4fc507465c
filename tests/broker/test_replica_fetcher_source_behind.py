"""broker.replica_fetcher: right after a leader change the follower's first request often
reaches the new leader before the change does. Its answer (not the leader, or not at that
leader epoch) is asked again within moments, not after replica.fetch.backoff.ms; other
partition errors still wait the backoff. (Virtual time: trio's autojump clock.)"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import trio

from broker.replica_fetcher import FetcherSettings, ReplicaFetcher, _State
from storage.deadline_reaper import DeadlineReaper
from wire.error_codes import ErrorCode
from wire.protocol import FetchRequest, OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

BACKOFF = 1.0
SETTINGS = FetcherSettings(backoff_s=BACKOFF)
EPOCH = 3
R = OffsetForLeaderEpochResponse


class Log:
    closed = False
    log_end_offset = 10
    log_start_offset = 0
    high_watermark = 10

    def __init__(self):
        self.epoch_cache = SimpleNamespace(latest_epoch=EPOCH - 1)

    def end_offset_for_epoch(self, epoch):
        return EPOCH - 1, self.log_end_offset

    async def truncate_to(self, offset):
        return False


def follower_partition() -> SimpleNamespace:
    return SimpleNamespace(key=("t", 0), log=Log(), leader_epoch=EPOCH, is_leader=False, log_end_offset=10,
                           log_start_offset=0, high_watermark=10)


class NewLeader:
    """The source broker: answers OffsetForLeaderEpoch with `errors` first, then the epoch's end;
    a Fetch (the fetcher is past reconciling) is recorded and never answered."""

    def __init__(self, errors):
        self.errors = list(errors)
        self.calls = []  # (virtual time, request kind)
        self.retire_at = float("inf")

    async def call(self, request, version, timeout):
        kind = "epoch" if isinstance(request, OffsetForLeaderEpochRequest) else "fetch"
        assert isinstance(request, (OffsetForLeaderEpochRequest, FetchRequest))
        self.calls.append((trio.current_time(), kind))
        if kind == "fetch":
            await trio.sleep_forever()
        error = self.errors.pop(0) if self.errors else ErrorCode.NONE
        return R(throttle_time_ms=0, topics=[R.OffsetForLeaderTopicResult(topic="t", partitions=[
            R.EpochEndOffset(error_code=error, partition=0, leader_epoch=EPOCH - 1, end_offset=10)])])


async def follow(source: NewLeader, seconds: float) -> None:
    env = SimpleNamespace(now=trio.current_time, sleep=trio.sleep, sleep_until=trio.sleep_until,
                          move_on_at=trio.move_on_at, fail_after=trio.fail_after)
    timers = DeadlineReaper(env)
    fetcher = ReplicaFetcher(env, broker_id=2, source_id=1, address_of=lambda _id: ("n1", 9092),
                             settings=SETTINGS, timers=timers)

    async def connect():
        return source
    fetcher._connect = connect
    partition = follower_partition()
    fetcher.partitions[partition.key] = _State(partition)
    async with trio.open_nursery() as nursery:
        await nursery.start(timers.run)
        with trio.move_on_after(seconds):
            await fetcher.run()
        nursery.cancel_scope.cancel()


@pytest.mark.parametrize("error", [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH])
async def test_a_leader_behind_our_metadata_is_asked_again_soon(autojump_clock, error):
    source = NewLeader([error, error])
    await follow(source, 3 * BACKOFF)
    # Asked again after 50 ms, then 100 ms; reconciled, the partition is fetched at once.
    assert source.calls == [(0.0, "epoch"), (0.05, "epoch"), (pytest.approx(0.15), "epoch"),
                            (pytest.approx(0.15), "fetch")]


async def test_other_partition_errors_wait_the_backoff(autojump_clock):
    source = NewLeader([ErrorCode.KAFKA_STORAGE_ERROR])
    await follow(source, 3 * BACKOFF)
    assert source.calls == [(0.0, "epoch"), (BACKOFF, "epoch"), (BACKOFF, "fetch")]
