"""Producer state with transactions: open transactions bound the last stable offset, markers
close them, aborted ones are handed over for the log's aborted transaction index, and snapshots
keep open transactions."""
from __future__ import annotations

from broker.producer_state import AbortedTxn, ProducerStateManager
from broker.producer_state.snapshot_codec import decode_snapshot
from wire.batch_header import BatchHeader
from wire.error_codes import ErrorCode

TXN, CONTROL = 0x10, 0x20


def batch(pid: int, epoch: int, seq: int, offset: int, count: int = 1, transactional: bool = True) -> BatchHeader:
    return BatchHeader(offset, 100, 0, 2, 0, TXN if transactional else 0, count - 1, 5, 5, pid, epoch, seq, count)


def marker(pid: int, epoch: int, offset: int) -> BatchHeader:
    return BatchHeader(offset, 100, 0, 2, 0, TXN | CONTROL, 0, 5, 5, pid, epoch, -1, 1)


def test_open_transactions_bound_the_lso_until_their_marker_is_below_the_hw():
    state = ProducerStateManager()
    state.apply(batch(1, 0, 0, 0, count=2))     # producer 1: offsets 0-1
    state.apply(batch(2, 0, 0, 2))              # producer 2: offset 2
    state.apply(batch(1, 0, 2, 3))              # producer 1 again: same transaction
    assert state.first_unstable_offset(high_watermark=4) == 0
    state.apply(marker(1, 0, 4), commit=True)
    assert state.first_unstable_offset(high_watermark=4) == 0  # the marker is not replicated yet
    assert state.first_unstable_offset(high_watermark=5) == 2  # producer 2 is still open
    state.apply(marker(2, 0, 5), commit=False)
    assert state.first_unstable_offset(high_watermark=6) is None
    # Nothing else is open once producer 2 aborts: no later aborted transaction starts below 6.
    assert state.newly_aborted == [AbortedTxn(2, 2, 5, 6)]


def test_an_aborted_transaction_records_where_the_others_still_open_begin():
    state = ProducerStateManager()
    state.apply(batch(1, 0, 0, 0))
    state.apply(batch(2, 0, 0, 1))
    state.apply(marker(2, 0, 2), commit=False)
    assert state.newly_aborted == [AbortedTxn(2, 1, 2, 0)]  # producer 1's transaction is still open at 0


def test_a_non_transactional_batch_inside_a_transaction_and_an_old_marker_are_refused():
    state = ProducerStateManager()
    state.apply(batch(1, 3, 0, 0))
    assert state.check(batch(1, 3, 1, 0, transactional=False)).error == ErrorCode.INVALID_TXN_STATE
    assert state.check(batch(1, 3, 1, 0)).ok
    assert state.check_marker(marker(1, 2, 0), coordinator_epoch=0).error == ErrorCode.INVALID_PRODUCER_EPOCH
    assert state.check_marker(marker(1, 4, 0), coordinator_epoch=0).ok
    state.apply(marker(1, 4, 1), commit=False, coordinator_epoch=5)  # a fence: the abort comes with a bumped epoch
    assert state.producers[1].epoch == 4 and not state.ongoing
    # A deposed coordinator (an older leader epoch of __transaction_state) is fenced.
    assert state.check_marker(marker(1, 4, 0), coordinator_epoch=4).error == ErrorCode.TRANSACTION_COORDINATOR_FENCED
    assert state.check_marker(marker(1, 4, 0), coordinator_epoch=5).ok
    assert state.check(batch(1, 3, 1, 0)).error == ErrorCode.INVALID_PRODUCER_EPOCH


def test_snapshots_keep_open_transactions_and_truncation_reopens_them():
    state = ProducerStateManager()
    state.apply(batch(1, 0, 0, 0))
    state.apply(marker(1, 0, 1), commit=False, coordinator_epoch=7)
    state.apply(batch(2, 0, 0, 2))
    blob = state.to_bytes()
    restored = ProducerStateManager()
    restored.load_snapshot(3, blob)
    assert restored.ongoing == {2: 2} and restored.newly_aborted == []  # aborted ones live in the txn index
    assert restored.first_unstable_offset(high_watermark=3) == 2
    entries, aborted = decode_snapshot(blob)
    assert [e.current_txn_first_offset for e in entries] == [-1, 2] and aborted == []
    assert [e.coordinator_epoch for e in entries] == [7, -1]
    # Truncating below the abort marker reopens producer 1's transaction.
    log = [batch(1, 0, 0, 0), (marker(1, 0, 1), False, 3), batch(2, 0, 0, 2)]
    state.truncate_to(1, None, log)
    assert state.ongoing == {1: 0} and state.newly_aborted == []


def test_an_aborted_list_of_an_older_snapshot_is_handed_over_for_the_index():
    from broker.producer_state.snapshot_codec import encode_snapshot
    blob = encode_snapshot([], [AbortedTxn(1, 0, 1)])
    state = ProducerStateManager()
    state.load_snapshot(2, blob)
    assert state.newly_aborted == [AbortedTxn(1, 0, 1)]


def test_version_1_snapshots_are_still_read():
    v1 = bytes.fromhex("0001" "00000001" "0000000000000007" "0002" "00000000000003e8" "00")
    state = ProducerStateManager()
    state.load_snapshot(10, v1)
    assert state.producers[7].epoch == 2 and state.ongoing == {} and state.newly_aborted == []
