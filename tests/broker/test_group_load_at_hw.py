"""A new group coordinator serves its offsets partition only once the high watermark has
reached the log end it replayed (broker.group_driver).

Simulation seed 2118: the leader of `__consumer_offsets-1` appended a commit (of 37) that
timed out before its HW passed it; a follower had copied it and was elected with an ISR of
itself alone (below min.insync.replicas, so its HW could not advance). It replayed its log
to the end and at once answered OffsetFetch with 37, an offset a further failover could
still drop; the old leader, not yet told, answered 27 a moment later. Served only from
committed records, a reader can never see a commit the log may still lose.
"""
from __future__ import annotations

from types import SimpleNamespace

import trio
import trio.testing

from broker.fetch_purgatory import FetchPurgatory
from broker.group_driver import GroupDriver
from broker.group_settings import OFFSETS_TOPIC
from broker.groups.records import OffsetCommitValue, offset_commit_record
from storage.env import RealEnv
from wire.error_codes import ErrorCode
from wire.records import SimpleRecord, build_batch

GROUP, TOPIC = "g", "t"


class _Log:
    """Just enough of a PartitionLog for broker.log_scan: one batch per offset."""

    def __init__(self, batches: list[bytes]):
        self.batches = batches
        self.log_start_offset = 0

    @property
    def log_end_offset(self) -> int:
        return len(self.batches)

    def read(self, offset, max_bytes, *, max_offset, min_one_batch):
        return SimpleNamespace(read=lambda: b"".join(self.batches[offset:max_offset]))


def _commit_batch(offset: int, committed: int) -> bytes:
    key, value = offset_commit_record(GROUP, TOPIC, 0, OffsetCommitValue(
        offset=committed, leader_epoch=-1, metadata="", commit_timestamp=0, expire_timestamp=-1))
    return build_batch([SimpleRecord(key, value)], base_offset=offset, base_timestamp=0)


class _Replicas:
    def __init__(self, partition):
        self.partition = partition

    def get(self, topic, index):
        return self.partition if (topic, index) == (OFFSETS_TOPIC, 0) else None

    async def wait_applied(self, offset, deadline):
        return None


def _image(leader: int, epoch: int, offset: int):
    partitions = {0: SimpleNamespace(leader=leader, leader_epoch=epoch)}
    return SimpleNamespace(offset=offset, topics_by_name={OFFSETS_TOPIC: SimpleNamespace(partitions=partitions)})


def _setup(hw: int):
    # Offsets 0 and 1: commits of 27 then 37; the new leader's HW says which are committed.
    log = _Log([_commit_batch(0, 27), _commit_batch(1, 37)])
    partition = SimpleNamespace(is_leader=True, leader_epoch=1, high_watermark=hw, isr=(1,), log=log,
                                log_end_offset=2)
    broker = SimpleNamespace(env=RealEnv(seed=1), static={"offsets.topic.num.partitions": "1"}, node_id=1,
                             replicas=_Replicas(partition), purgatory=FetchPurgatory(RealEnv(seed=0)), controller=None)
    return broker, partition


def _fetch(driver: GroupDriver):
    result = driver.coordinator.fetch_offsets(GROUP, [(TOPIC, [0])], now=driver.now())
    return result.error, [o.offset for o in result.offsets]


async def test_a_new_coordinator_answers_load_in_progress_until_the_hw_reaches_its_log_end():
    broker, partition = _setup(hw=1)  # the commit of 37 is past the HW
    driver = GroupDriver(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        driver.publish(None, _image(leader=1, epoch=1, offset=10))
        await trio.testing.wait_all_tasks_blocked()
        assert _fetch(driver) == (ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, [])

        partition.high_watermark = 2  # a follower caught up: everything replayed is committed
        broker.purgatory.notify((OFFSETS_TOPIC, 0))
        await trio.testing.wait_all_tasks_blocked()
        assert _fetch(driver) == (ErrorCode.NONE, [37])
        nursery.cancel_scope.cancel()


async def test_a_coordinator_whose_log_is_all_committed_serves_at_once():
    broker, _ = _setup(hw=2)
    driver = GroupDriver(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        driver.publish(None, _image(leader=1, epoch=1, offset=10))
        await trio.testing.wait_all_tasks_blocked()
        assert _fetch(driver) == (ErrorCode.NONE, [37])
        nursery.cancel_scope.cancel()


async def test_leadership_lost_while_waiting_for_the_hw_leaves_the_partition_unserved():
    broker, partition = _setup(hw=1)
    driver = GroupDriver(broker)
    async with trio.open_nursery() as nursery:
        await nursery.start(driver.run)
        driver.publish(None, _image(leader=1, epoch=1, offset=10))
        await trio.testing.wait_all_tasks_blocked()
        partition.is_leader = False  # another broker leads now; our tail may be truncated
        driver.publish(None, _image(leader=2, epoch=2, offset=11))
        broker.purgatory.notify((OFFSETS_TOPIC, 0))
        await trio.testing.wait_all_tasks_blocked()
        assert _fetch(driver) == (ErrorCode.NOT_COORDINATOR, [])
        nursery.cancel_scope.cancel()
