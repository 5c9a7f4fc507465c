"""The aborted transaction index: its file format, the search a read_committed fetch makes,
where a log puts entries, and how a missing or damaged file is reported (never trusted)."""
import pytest

from storage.log import LogConfig, PartitionLog
from storage.log.txn_index import (
    ENTRY_SIZE, AbortedTxn, CorruptTxnIndexError, collect_aborted, decode_entries, encode_entry,
)

from .log_helpers import FakeEnv, batch

CONFIG = LogConfig(segment_bytes=400, index_interval_bytes=100, file_delete_delay_ms=0)


def test_entries_round_trip_and_bad_files_are_refused():
    entries = [AbortedTxn(1, 0, 4, 5), AbortedTxn(2, 3, 9, 10)]
    blob = b"".join(encode_entry(e) for e in entries)
    assert len(blob) == 2 * ENTRY_SIZE == 68
    assert decode_entries(blob) == entries
    with pytest.raises(CorruptTxnIndexError):
        decode_entries(blob[:-1])  # torn
    with pytest.raises(CorruptTxnIndexError):
        decode_entries(b"\x00\x01" + blob[2:])  # unknown version
    with pytest.raises(CorruptTxnIndexError):
        decode_entries(encode_entry(entries[1]) + encode_entry(entries[0]))  # out of order
    with pytest.raises(CorruptTxnIndexError):
        decode_entries(encode_entry(AbortedTxn(1, 9, 4, 5)))  # ends before it begins


def test_collect_finds_overlapping_transactions_and_stops_at_a_stable_offset_past_the_read():
    entries = [AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 9, 10), AbortedTxn(3, 12, 14, 15)]
    assert collect_aborted(entries, 0, 3) == ([AbortedTxn(1, 0, 4, 2), AbortedTxn(2, 2, 9, 10)], True)
    assert collect_aborted(entries, 5, 12) == ([AbortedTxn(2, 2, 9, 10)], True)  # 3 begins at 12
    assert collect_aborted(entries, 15, 20) == ([], False)  # a later segment may hold more


async def test_a_log_indexes_each_abort_in_the_segment_of_its_marker_and_searches_across_segments():
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/t-0", CONFIG)
    for _ in range(12):
        log.append_as_leader(batch(0, [(b"k", b"v" * 60)]), leader_epoch=0)
    assert len(log.segments) > 2
    second, third = log.segments[1], log.segments[2]
    early = AbortedTxn(5, 0, second.base_offset, second.base_offset)  # a transaction spanning segments
    late = AbortedTxn(6, third.base_offset, third.base_offset + 1, third.base_offset + 2)
    assert log.append_aborted_txn(early) and log.append_aborted_txn(late)
    assert not log.append_aborted_txn(early)  # a replay writes each entry once
    assert second.txn_index.entries == [early] and third.txn_index.entries == [late]
    assert log.collect_aborted_txns(0, 1) == [early]
    assert log.collect_aborted_txns(0, log.log_end_offset) == [early, late]
    assert log.collect_aborted_txns(third.base_offset + 2, log.log_end_offset) == []
    # Truncation forgets the aborts whose marker it removes.
    await log.truncate_to(third.base_offset + 1)
    assert log.collect_aborted_txns(0, log.log_end_offset) == [early]
    await log.close()
    reopened = await PartitionLog.open(env, "/data/t-0", CONFIG, clean_shutdown=True,
                                       recovery_point=log.log_end_offset)
    assert reopened.collect_aborted_txns(0, reopened.log_end_offset) == [early]
    assert reopened.txn_index_stale_from is None


@pytest.mark.parametrize("damage", ["missing", "torn", "garbage", "oversized"])
async def test_a_missing_or_damaged_index_file_is_reported_for_rebuild_and_never_trusted(damage):
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/t-0", CONFIG)
    for _ in range(8):
        log.append_as_leader(batch(0, [(b"k", b"v" * 60)]), leader_epoch=0)
    second = log.segments[1]
    log.append_aborted_txn(AbortedTxn(5, 0, second.base_offset, second.base_offset + 1))
    end = log.log_end_offset
    await log.close()
    path = second.paths()[3]
    assert path.endswith(".txnindex")
    if damage == "missing":
        env.fs.remove(path)
    else:
        f = env.fs.open(path)
        if damage == "torn":
            f.truncate(ENTRY_SIZE - 3)
        elif damage == "garbage":
            f.write_at(0, b"\xff" * ENTRY_SIZE)
        else:  # well-formed entries, more than the segment's data could account for
            f.write_at(0, b"".join(encode_entry(AbortedTxn(5, i, i, i + 1)) for i in range(100)))
        f.close()
    reopened = await PartitionLog.open(env, "/data/t-0", CONFIG, clean_shutdown=True, recovery_point=end)
    assert reopened.txn_index_stale_from == second.base_offset
    assert reopened.collect_aborted_txns(0, end) == []
    assert reopened.log_end_offset == end  # the data is untouched
    reopened.txn_indexes_rebuilt()
    assert reopened.txn_index_stale_from is None


async def test_segments_recovered_after_an_unclean_shutdown_have_their_index_rebuilt():
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/t-0", CONFIG)
    for _ in range(8):
        log.append_as_leader(batch(0, [(b"k", b"v" * 60)]), leader_epoch=0)
    log.append_aborted_txn(AbortedTxn(5, 0, log.log_end_offset - 1, log.log_end_offset))
    await log.flush()
    reopened = await PartitionLog.open(env, "/data/t-0", CONFIG, clean_shutdown=False,
                                       recovery_point=log.segments[1].base_offset)
    assert reopened.txn_index_stale_from == reopened.segments[1].base_offset


async def _recovered_with_an_abort_in_its_second_segment(env):
    """A log of a few segments with an aborted transaction in its second, flushed, then opened
    after an unclean shutdown with that segment past the recovery point (its index reset):
    (second segment, the aborted transaction, log end, the recovered log)."""
    log = await PartitionLog.open(env, "/data/t-0", CONFIG)
    for _ in range(8):
        log.append_as_leader(batch(0, [(b"k", b"v" * 60)]), leader_epoch=0)
    second = log.segments[1]
    aborted = AbortedTxn(5, second.base_offset, second.base_offset + 1, second.base_offset + 2)
    log.append_aborted_txn(aborted)
    await log.flush()
    recovered = await PartitionLog.open(env, "/data/t-0", CONFIG, clean_shutdown=False,
                                        recovery_point=second.base_offset)
    return second, aborted, log.log_end_offset, recovered


async def test_an_index_reset_by_recovery_stays_stale_for_a_start_before_its_rebuild():
    # Recovery empties the index of each segment it rescans; the producer state replay that
    # writes it again may never come (the process dies first, after flushing the segment).
    # The next start, trusting its recovery point, does not rescan: it must still find the
    # index stale, not whole and empty (a lost abort: aborted records read as committed).
    env = FakeEnv()
    second, aborted, end, recovered = await _recovered_with_an_abort_in_its_second_segment(env)
    assert recovered.txn_index_stale_from == second.base_offset
    await recovered.flush()  # no rebuild, then a kill -9
    again = await PartitionLog.open(env, "/data/t-0", CONFIG, clean_shutdown=False, recovery_point=end)
    assert again.txn_index_stale_from == second.base_offset
    again.append_aborted_txn(aborted)
    again.txn_indexes_rebuilt()
    await again.flush()
    await again.close()
    whole = await PartitionLog.open(env, "/data/t-0", CONFIG, clean_shutdown=True, recovery_point=end)
    assert whole.txn_index_stale_from is None
    assert whole.collect_aborted_txns(0, end) == [aborted]


async def test_a_rebuilt_index_reappears_only_with_its_entries_durable():
    # The replay after a recovery rebuilds the index in memory; a kill -9 before the next
    # flush must leave the file missing (rebuilt again), not present and empty: the segment
    # sits below the recovery point, so the next start would trust it (fuzz seed 222: G1a).
    env = FakeEnv()
    second, aborted, end, recovered = await _recovered_with_an_abort_in_its_second_segment(env)
    await recovered.flush()
    assert recovered.txn_index_stale_from == second.base_offset
    assert recovered.append_aborted_txn(aborted)
    recovered.txn_indexes_rebuilt()  # then a kill -9 before any flush
    killed = await PartitionLog.open(env, "/data/t-0", CONFIG, clean_shutdown=False, recovery_point=end)
    assert killed.txn_index_stale_from == second.base_offset
    assert killed.append_aborted_txn(aborted)
    killed.txn_indexes_rebuilt()
    await killed.flush()  # writes the rebuilt file
    await killed.close()
    again = await PartitionLog.open(env, "/data/t-0", CONFIG, clean_shutdown=True, recovery_point=end)
    assert again.txn_index_stale_from is None
    assert again.collect_aborted_txns(0, end) == [aborted]
