"""broker.replica_fetcher: a follower whose log ends at the leader's log start takes the leader's
first batch even when DeleteRecords put that log start inside the batch (found by the
simulation's retention workload: the follower refused the batch for ever)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from broker.replica_fetcher import _start_at_first_batch
from storage.log import InvalidAppendOffsetError, LogConfig, PartitionLog
from tests.storage.log_helpers import FakeEnv, batch


async def follower_log_at(start: int) -> PartitionLog:
    log = await PartitionLog.open(FakeEnv(), "/data/t-0", LogConfig(file_delete_delay_ms=0))
    await log.truncate_fully_and_start_at(start)
    return log


async def test_a_log_started_inside_the_leaders_first_batch_starts_at_its_base():
    log = await follower_log_at(2)
    records = batch(1, [(b"k", b"a"), (b"k", b"b"), (b"k", b"c")], epoch=0)  # offsets 1..3
    with pytest.raises(InvalidAppendOffsetError):
        log.append_as_follower(records)
    await _start_at_first_batch(SimpleNamespace(key=("t", 0), log=log), records, leader_log_start=2)
    log.append_as_follower(records)
    assert (log.log_start_offset, log.log_end_offset) == (1, 4)


async def test_a_log_cut_back_to_the_leaders_log_start_inside_its_first_batch_starts_at_its_base():
    # Seeds 1014/1496: reconciliation cut our epoch-0 records back to the leader's log start 3
    # (its answer for an epoch older than its epoch cache), which lies inside its batch 2..5.
    log = await follower_log_at(0)
    log.append_as_follower(batch(0, [(b"k", b"old")] * 3, epoch=0))  # offsets 0..2: end 3
    records = batch(2, [(b"k", b"new")] * 4, epoch=5)  # the leader's first batch: offsets 2..5
    with pytest.raises(InvalidAppendOffsetError):
        log.append_as_follower(records)
    await _start_at_first_batch(SimpleNamespace(key=("t", 0), log=log), records, leader_log_start=3)
    log.append_as_follower(records)
    assert (log.log_start_offset, log.log_end_offset) == (2, 6)


async def test_a_log_that_holds_records_is_left_alone():
    log = await follower_log_at(2)
    log.append_as_follower(batch(2, [(b"k", b"a")], epoch=0))
    records = batch(1, [(b"k", b"a"), (b"k", b"b")])
    await _start_at_first_batch(SimpleNamespace(key=("t", 0), log=log), records, leader_log_start=1)
    assert (log.log_start_offset, log.log_end_offset) == (2, 3)
