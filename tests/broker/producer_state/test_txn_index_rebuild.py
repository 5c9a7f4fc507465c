"""The broker's producer state writes the log's aborted transaction index, and writes it again
when a restart finds it lost or damaged, although a newer producer snapshot exists."""
from __future__ import annotations

from types import SimpleNamespace

from broker.producer_state_hooks import ProducerStates
from storage.log import LogConfig, PartitionLog
from storage.log.txn_index import AbortedTxn
from tests.storage.log_helpers import FakeEnv, batch
from wire.records import build_end_txn_marker

CONFIG = LogConfig(segment_bytes=300, index_interval_bytes=100, file_delete_delay_ms=0)


def states(env) -> ProducerStates:
    return ProducerStates(SimpleNamespace(static={}, env=env))


async def test_a_damaged_index_is_written_again_by_a_replay_from_below_it():
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/t-0", CONFIG)
    partition = SimpleNamespace(key=("t", 0), log=log)
    log.append_as_leader(batch(0, [(b"k", b"aborted")], producer_id=1, producer_epoch=0, base_sequence=0,
                               transactional=True), leader_epoch=0)                            # 0
    log.append_as_leader(build_end_txn_marker(False, producer_id=1, producer_epoch=0, coordinator_epoch=0,
                                              timestamp=env.wall), leader_epoch=0)              # 1: ABORT
    first = states(env)
    assert first.aborted_transactions(partition, 0, 2) == [AbortedTxn(1, 0, 1, 2)]
    for _ in range(6):  # roll, and a snapshot above the marker
        log.append_as_leader(batch(0, [(b"p", b"v" * 60)]), leader_epoch=0)
        first.state_for(partition)
        await first.maybe_snapshot(partition)
    assert log.latest_producer_snapshot()[0] > 1 and len(log.segments) > 1
    end = log.log_end_offset
    await log.close()
    f = env.fs.open(log.segments[0].paths()[3])
    f.write_at(0, b"\x00\x07")  # an unknown entry version
    f.close()
    reopened = await PartitionLog.open(env, "/data/t-0", CONFIG, clean_shutdown=True, recovery_point=end)
    assert reopened.txn_index_stale_from == 0 and reopened.collect_aborted_txns(0, end) == []
    partition = SimpleNamespace(key=("t", 0), log=reopened)
    assert states(env).aborted_transactions(partition, 0, end) == [AbortedTxn(1, 0, 1, 2)]
    assert reopened.txn_index_stale_from is None
