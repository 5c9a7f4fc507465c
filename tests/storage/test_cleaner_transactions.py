"""The cleaner and transactions (Kafka's CleanedTransactionMetadata): aborted records go,
committed transactional records are compacted as any other, and a marker goes only once its
transaction left nothing behind and its delete horizon passed."""
from storage.log import LogConfig, PartitionLog, clean_log
from storage.log.cleaner_txns import CleanedTransactions
from storage.log.txn_index import AbortedTxn
from wire.batch_header import BatchHeader
from wire.records import build_end_txn_marker, decode_batch

from .log_helpers import FakeEnv, all_batches, all_records, batch, check_consistent

COMPACT = LogConfig(cleanup_policy="compact", segment_bytes=100_000, index_interval_bytes=100,
                    delete_retention_ms=10_000, file_delete_delay_ms=0)
TXN, CONTROL = 0x10, 0x20


def header(pid: int, offset: int, *, control: bool = False, transactional: bool = True) -> BatchHeader:
    attributes = (TXN if transactional else 0) | (CONTROL if control else 0)
    return BatchHeader(offset, 100, 0, 2, 0, attributes, 0, 5, 5, pid, 0, -1 if control else 0, 1)


def test_batches_of_indexed_aborts_are_discarded_and_their_marker_kept_while_data_was_met():
    txns = CleanedTransactions([AbortedTxn(1, 1, 3, 4), AbortedTxn(1, 1, 3, 4)])  # listed twice
    assert not txns.on_batch(header(1, 0, transactional=False))
    assert txns.on_batch(header(1, 1))          # aborted
    assert not txns.on_batch(header(2, 2))      # producer 2's transaction was committed
    assert not txns.on_marker(header(1, 3, control=True), commit=False)  # met its data: kept
    assert txns.kept_aborted == [AbortedTxn(1, 1, 3, 4)]
    assert not txns.on_marker(header(2, 4, control=True), commit=True)   # met its batch: kept
    assert txns.on_marker(header(2, 5, control=True), commit=True)       # nothing met: discardable
    assert not txns.on_marker(header(3, 6, control=True), commit=None)   # not a transaction marker


def test_an_abort_whose_records_are_gone_is_discardable_and_leaves_the_index():
    txns = CleanedTransactions([AbortedTxn(1, 1, 3, 4)])
    assert txns.on_marker(header(1, 3, control=True), commit=False)
    assert txns.kept_aborted == []


def marker(pid: int, commit: bool, ts: int) -> bytes:
    return build_end_txn_marker(commit, producer_id=pid, producer_epoch=0, coordinator_epoch=0, timestamp=ts)


async def txn_log(env):
    """k=committed (plain), an aborted write of k by producer 7, a committed transaction of
    producer 8 writing j twice, then plain writes that supersede j; producer 7 writes again
    later (so its aborted batch is not its last)."""
    log = await PartitionLog.open(env, "/data/c-0", COMPACT)
    append = lambda data: log.append_as_leader(data, leader_epoch=0)  # noqa: E731
    append(batch(0, [(b"k", b"committed")], ts=env.wall))                                         # 0
    append(batch(0, [(b"k", b"aborted")], ts=env.wall, producer_id=7, producer_epoch=0,
                 base_sequence=0, transactional=True))                                              # 1
    append(marker(7, False, env.wall))                                                              # 2
    log.append_aborted_txn(AbortedTxn(7, 1, 2, 3))
    append(batch(0, [(b"j", b"t1"), (b"j", b"t2")], ts=env.wall, producer_id=8, producer_epoch=0,
                 base_sequence=0, transactional=True))                                              # 3-4
    append(batch(0, [(b"x", b"8")], ts=env.wall, producer_id=8, producer_epoch=0, base_sequence=2,
                 transactional=True))                                                               # 5
    append(marker(8, True, env.wall))                                                               # 6
    append(batch(0, [(b"j", b"plain")], ts=env.wall))                                               # 7
    append(batch(0, [(b"y", b"7")], ts=env.wall, producer_id=7, producer_epoch=0, base_sequence=1))  # 8
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    return log


def shape(log):
    return [(decode_batch(b)[0].base_offset, decode_batch(b)[0].is_control) for b in all_batches(log)]


async def test_markers_outlive_their_transaction_by_the_delete_horizon_then_go():
    env = FakeEnv()
    log = await txn_log(env)
    first = await clean_log(env, log, 0, now_ms=env.wall)
    assert [(r.offset, r.value) for r in all_records(log) if not r.key.startswith(b"\x00")] == [
        (0, b"committed"), (5, b"8"), (7, b"plain"), (8, b"7")]
    # The ABORT marker met its data in this pass: kept, with its index entry.
    assert shape(log) == [(0, False), (2, True), (5, False), (6, True), (7, False), (8, False)]
    assert log.collect_aborted_txns(0, log.log_end_offset) == [AbortedTxn(7, 1, 2, 3)]
    assert first.earliest_delete_horizon is None
    # Producer 8's batch 5 is still there, so its COMMIT stays; the ABORT met nothing: stamped.
    second = await clean_log(env, log, 0, now_ms=env.wall + 1)
    assert second.earliest_delete_horizon == env.wall + 1 + COMPACT.delete_retention_ms
    assert shape(log) == [(0, False), (2, True), (5, False), (6, True), (7, False), (8, False)]
    assert log.collect_aborted_txns(0, log.log_end_offset) == []
    # Before the horizon the marker stays; after it, it goes.
    await clean_log(env, log, 0, now_ms=env.wall + 2)
    assert (2, True) in shape(log)
    await clean_log(env, log, 0, now_ms=second.earliest_delete_horizon)
    assert shape(log) == [(0, False), (5, False), (6, True), (7, False), (8, False)]
    assert log.log_end_offset == 9
    check_consistent(log)


async def test_an_emptied_last_batch_of_a_producer_stays_and_so_does_its_marker():
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/c-0", COMPACT)
    log.append_as_leader(batch(0, [(b"k", b"aborted")], producer_id=7, producer_epoch=0, base_sequence=0,
                               transactional=True), leader_epoch=0)
    log.append_as_leader(marker(7, False, env.wall), leader_epoch=0)
    log.append_aborted_txn(AbortedTxn(7, 0, 1, 2))
    log.append_as_leader(batch(0, [(b"k", b"v")]), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    for step in range(3):
        await clean_log(env, log, 0, now_ms=env.wall + step * 100_000)
    headers = [decode_batch(b)[0] for b in all_batches(log)]
    kept = [(h.base_offset, h.records_count, h.base_sequence) for h in headers if h.producer_id == 7]
    assert kept == [(0, 0, 0), (1, 1, -1)]  # the producer's sequence survives in the empty batch
    assert log.collect_aborted_txns(0, 3) == [AbortedTxn(7, 0, 1, 2)]


async def test_nothing_at_or_above_the_last_stable_offset_is_cleaned():
    env = FakeEnv()
    log = await txn_log(env)
    result = await clean_log(env, log, 0, now_ms=env.wall, stable_offset=3)
    assert result.first_dirty == 0 and result.groups_cleaned == 0


async def test_a_marker_kept_only_as_its_segment_s_last_batch_sets_no_horizon_to_come_back_for():
    # Were its passed horizon reported, the log manager would pick this log again at once, forever.
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/c-0", COMPACT)
    log.append_as_leader(batch(0, [(b"k", b"v")]), leader_epoch=0)
    log.append_as_leader(marker(9, True, env.wall), leader_epoch=0)  # a COMMIT that met no batch
    log.roll()
    log.update_high_watermark(log.log_end_offset)
    stamped = await clean_log(env, log, 0, now_ms=env.wall)
    assert stamped.earliest_delete_horizon == env.wall + COMPACT.delete_retention_ms
    later = await clean_log(env, log, 0, now_ms=stamped.earliest_delete_horizon + 1)
    assert shape(log) == [(0, False), (1, True)]  # still there: the segment's last batch
    assert later.earliest_delete_horizon is None
