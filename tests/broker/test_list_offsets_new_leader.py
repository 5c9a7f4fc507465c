"""ListOffsets on a freshly elected leader whose high watermark has not caught up yet.

A new leader learns the HW from its followers' fetches; until it reaches the start of
the leader's epoch it can be below the old leader's HW, so answering "latest" with it
would hide acknowledged records (the simulation found a final read stopping short of an
acknowledged write that way). Kafka answers OFFSET_NOT_AVAILABLE, which clients retry.
"""
from types import SimpleNamespace

from broker.handlers.list_offsets import _lookup
from storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from wire.error_codes import ErrorCode
from wire.protocol import ListOffsetsRequest

CONSUMER, FOLLOWER = -1, 2


def partition(hw: int, epoch_start: int, leo: int):
    log = SimpleNamespace(log_start_offset=0)
    return SimpleNamespace(high_watermark=hw, last_stable_offset=hw, leader_epoch_start=epoch_start,
                           log_end_offset=leo, log=log)


def ask(p, timestamp: int, replica_id: int = CONSUMER):
    return _lookup(p, ListOffsetsRequest.ListOffsetsPartition(partition_index=2, timestamp=timestamp),
                   replica_id, committed=False)


def test_consumer_gets_offset_not_available_while_the_hw_lags_the_epoch_start():
    new_leader = partition(hw=96, epoch_start=97, leo=97)
    for ts in (LATEST_TIMESTAMP, EARLIEST_TIMESTAMP):
        answer = ask(new_leader, ts)
        assert answer.error_code == ErrorCode.OFFSET_NOT_AVAILABLE and answer.offset == -1
    # A replica (or the debugging id) still gets the log end: it is not reading committed data.
    assert ask(new_leader, LATEST_TIMESTAMP, replica_id=FOLLOWER).offset == 97


def test_once_the_hw_reaches_the_epoch_start_latest_is_the_hw():
    caught_up = partition(hw=97, epoch_start=97, leo=99)
    answer = ask(caught_up, LATEST_TIMESTAMP)
    assert answer.error_code == ErrorCode.NONE and answer.offset == 97
