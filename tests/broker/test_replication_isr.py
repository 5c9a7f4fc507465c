"""The pure ISR/HW rules (broker.isr) and the AlterPartition sender's batching and retries."""
from __future__ import annotations

import uuid

import trio

from broker.alter_partition_manager import AlterPartitionManager
from broker.controller_channel import ControllerReply, ControllerUnavailableError
from broker.isr import FollowerState, IsrState, high_watermark, may_join_isr, out_of_sync_replicas
from metadata.controller.alter_partition import AlterPartitionItem, AlterPartitionResult
from tests.broker.harness import mem_env
from wire.error_codes import ErrorCode

LAG = 10.0


def follower(broker_id, leo, caught_up_at=0.0):
    return FollowerState(broker_id, log_end_offset=leo, last_caught_up_time=caught_up_at)


def test_hw_is_the_minimum_end_offset_over_the_maximal_isr_and_never_moves_back():
    followers = {2: follower(2, 7), 3: follower(3, 4)}
    assert high_watermark(0, 10, followers, (1, 2, 3), now=1, lag_time_s=LAG) == 4
    assert high_watermark(0, 10, followers, (1, 2), now=1, lag_time_s=LAG) == 7
    assert high_watermark(0, 10, {}, (1,), now=1, lag_time_s=LAG) == 10
    assert high_watermark(8, 10, followers, (1, 2, 3), now=1, lag_time_s=LAG) == 8  # never backward
    # A member that has not fetched yet in this epoch (unknown end) holds the HW where it is.
    assert high_watermark(3, 10, {2: FollowerState(2)}, (1, 2), now=1, lag_time_s=LAG) == 3


def test_a_caught_up_replica_about_to_join_counts_for_the_hw_but_a_lagging_one_does_not():
    followers = {2: follower(2, 9), 3: follower(3, 6, caught_up_at=5.0)}
    assert high_watermark(0, 10, followers, (1, 2), now=6, lag_time_s=LAG, eligible=(3,)) == 6
    assert high_watermark(0, 10, followers, (1, 2), now=100, lag_time_s=LAG, eligible=(3,)) == 9


def test_a_replica_whose_fetch_connection_closed_is_not_waited_for_unless_it_is_in_the_isr():
    # Its ISR shrink committed, its broker not fenced yet (a new controller that never saw it
    # go): still caught up by the lag time, but its process is gone.
    followers = {2: follower(2, 9), 3: follower(3, 6, caught_up_at=5.0)}
    followers[3].connection_closed = True
    assert high_watermark(0, 10, followers, (1, 2), now=6, lag_time_s=LAG, eligible=(3,)) == 9
    # An ISR member counts whatever its connection does (until the controller commits its removal).
    assert high_watermark(0, 10, followers, (1, 2, 3), now=6, lag_time_s=LAG, eligible=()) == 6
    followers[3].on_fetch(7, leader_end=10, now=7)  # a fetch proves it back: waited for again
    assert high_watermark(0, 10, followers, (1, 2), now=7, lag_time_s=LAG, eligible=(3,)) == 7


def test_caught_up_time_follows_kafkas_rule():
    s = FollowerState(2)
    s.on_fetch(5, leader_end=5, now=1.0)  # at the leader's end: caught up now
    assert s.last_caught_up_time == 1.0
    s.on_fetch(5, leader_end=8, now=2.0)  # behind, but has what the leader had at the last fetch
    assert s.last_caught_up_time == 1.0
    s.on_fetch(8, leader_end=12, now=3.0)  # reached the end seen at the previous fetch (8)
    assert s.last_caught_up_time == 2.0
    assert s.is_caught_up(12, now=11.9, lag_time_s=LAG)
    assert not s.is_caught_up(12, now=12.1, lag_time_s=LAG)
    assert s.is_caught_up(8, now=100, lag_time_s=LAG)  # exactly at the end: always caught up


def test_out_of_sync_replicas_exclude_the_leader_and_include_silent_members():
    followers = {2: follower(2, 10, caught_up_at=0.0), 3: follower(3, 3, caught_up_at=9.0)}
    assert out_of_sync_replicas((1, 2, 3), 1, followers, 12, now=15, lag_time_s=LAG) == [2]
    assert out_of_sync_replicas((1, 2, 3, 4), 1, followers, 12, now=15, lag_time_s=LAG) == [2, 4]
    assert out_of_sync_replicas((1,), 1, {}, 12, now=15, lag_time_s=LAG) == []


def test_a_member_whose_fetch_connection_closed_is_out_of_sync_until_it_fetches_again():
    followers = {2: follower(2, 12, caught_up_at=14.0), 3: follower(3, 12, caught_up_at=14.0)}
    followers[2].connection_closed = True  # caught up, but its process is gone
    assert out_of_sync_replicas((1, 2, 3), 1, followers, 12, now=15, lag_time_s=LAG) == [2]
    followers[2].on_fetch(12, leader_end=12, now=16)  # a fetch proves it is back
    assert out_of_sync_replicas((1, 2, 3), 1, followers, 12, now=16, lag_time_s=LAG) == []


def test_joining_needs_the_hw_and_the_leader_epoch_start():
    assert may_join_isr(follower(3, 10), 10, 10)
    assert not may_join_isr(follower(3, 9), 10, 5)
    assert not may_join_isr(follower(3, 10), 8, 11)  # has not reached the current epoch yet


def test_isr_state_pending_changes():
    base = IsrState((1, 2))
    grow = base.expand(3)
    assert grow.inflight and grow.isr == (1, 2) and grow.maximal_isr == (1, 2, 3) and grow.proposed == (1, 2, 3)
    shrink = IsrState((1, 2, 3)).shrink([3])
    assert shrink.isr == (1, 2, 3) and shrink.maximal_isr == (1, 2, 3) and shrink.proposed == (1, 2)
    assert not base.inflight


class FlakyChannel:
    def __init__(self, outcomes):
        self.outcomes = list(outcomes)
        self.calls = []

    async def alter_partition(self, broker_id, broker_epoch, items, *, timeout_s=30.0):
        self.calls.append((broker_id, broker_epoch, [i.partition_id for i in items]))
        outcome = self.outcomes.pop(0) if self.outcomes else "ok"
        if outcome == "down":
            raise ControllerUnavailableError("no controller")
        if outcome == "stale":
            return ControllerReply((ErrorCode.STALE_BROKER_EPOCH, []))
        return ControllerReply((ErrorCode.NONE, [
            AlterPartitionResult(i.topic_id, i.partition_id, ErrorCode.NONE, leader=broker_id, leader_epoch=i.leader_epoch,
                                 isr=tuple(i.new_isr), partition_epoch=i.partition_epoch + 1) for i in items]), 5)


async def test_manager_batches_retries_and_keeps_one_change_per_partition():
    tid = uuid.UUID(int=7)
    channel = FlakyChannel(["down", "stale"])
    epochs = iter([41, 42, 43])
    manager = AlterPartitionManager(mem_env(), 1, channel, lambda: next(epochs), retry_backoff_s=0.01)
    results = []
    item = lambda p: AlterPartitionItem(tid, p, 0, 3, (1, 2))  # noqa: E731
    async with trio.open_nursery() as nursery:
        await nursery.start(manager.run)
        assert manager.submit(item(0), results.append)
        assert manager.submit(item(1), results.append)
        assert not manager.submit(item(0), results.append)  # one change per partition at a time
        with trio.fail_after(5):
            while len(results) < 2:
                await trio.sleep(0.005)
        nursery.cancel_scope.cancel()
    assert [c[2] for c in channel.calls] == [[0, 1]] * 3  # the same batch, retried
    assert [c[1] for c in channel.calls] == [41, 42, 43]  # the broker epoch is re-read per attempt
    assert [(r.partition_id, r.error, r.partition_epoch) for r in results] == [(0, ErrorCode.NONE, 4), (1, ErrorCode.NONE, 4)]
    assert not manager.pending(tid, 0)
