"""broker.replica_fetcher: right after a leader change the follower's first request often
reaches the new leader before the change does. Its answer (not the leader, or not at that
leader epoch) is asked again within moments, not after replica.fetch.backoff.ms; other
partition errors still wait the backoff. (Virtual time: trio's autojump clock.)"""
from __future__ import annotations

import uuid
from types import SimpleNamespace

import pytest
import trio

from broker.replica_fetcher import FetcherSettings, ReplicaFetcher, _State
from storage.deadline_reaper import DeadlineReaper
from wire.error_codes import ErrorCode
from wire.protocol import FetchRequest, FetchResponse

BACKOFF = 1.0
SETTINGS = FetcherSettings(backoff_s=BACKOFF)
EPOCH = 3
TOPIC_ID = uuid.UUID(int=7)
R = FetchResponse


class Log:
    closed = False
    log_end_offset = 10
    log_start_offset = 0
    high_watermark = 10

    def __init__(self):
        self.epoch_cache = SimpleNamespace(latest_epoch=EPOCH - 1)


def follower_partition() -> SimpleNamespace:
    return SimpleNamespace(key=("t", 0), topic_id=TOPIC_ID, log=Log(), leader_epoch=EPOCH, is_leader=False,
                           log_end_offset=10, log_start_offset=0, high_watermark=10)


class NewLeader:
    """The source broker: answers Fetch with the partition error `errors` first; a Fetch after
    those (the leader has caught up) is recorded and never answered, as a long poll."""

    def __init__(self, errors):
        self.errors = list(errors)
        self.calls = []  # virtual times of the fetches

    async def call(self, request, version, timeout):
        assert isinstance(request, FetchRequest)
        self.calls.append(trio.current_time())
        if not self.errors:
            await trio.sleep_forever()
        return R(throttle_time_ms=0, error_code=0, session_id=0, responses=[R.FetchableTopicResponse(
            topic_id=TOPIC_ID, partitions=[R.PartitionData(
                partition_index=0, error_code=self.errors.pop(0), high_watermark=-1, last_stable_offset=-1,
                log_start_offset=-1, aborted_transactions=None, records=None)])])


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


@pytest.mark.parametrize("error", [ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.UNKNOWN_LEADER_EPOCH,
                                   ErrorCode.UNKNOWN_TOPIC_ID])
async def test_a_leader_behind_our_metadata_is_asked_again_soon(autojump_clock, error):
    source = NewLeader([error, error])
    await follow(source, 3 * BACKOFF)
    # Asked again after 50 ms, then 100 ms more; the third fetch is answered as a long poll.
    assert source.calls == [0.0, 0.05, pytest.approx(0.15)]


async def test_other_partition_errors_wait_the_backoff(autojump_clock):
    source = NewLeader([ErrorCode.KAFKA_STORAGE_ERROR])
    await follow(source, 3 * BACKOFF)
    assert source.calls == [0.0, BACKOFF]
