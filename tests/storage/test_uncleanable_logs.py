"""A compacted log holding a record the cleaner cannot decode is skipped; the others keep being cleaned.

On real files: the bad batch has a valid CRC around garbage records (what a producer could write
before produce validated records), written to the segment file and read back by the cleaner.
"""
import logging
import os

from storage.env import RealEnv
from storage.log import LogConfig, LogManager
from tests.wire.raw_batches import batch_around

from .log_helpers import all_records, batch

COMPACT = LogConfig(segment_bytes=1500, index_interval_bytes=200, file_delete_delay_ms=0, cleanup_policy="compact",
                    min_cleanable_dirty_ratio=0.1)


async def _fill(log, garbage_at: int | None = None):
    for i in range(60):
        if i == garbage_at:
            log.append_as_leader(batch_around(b"\x09" * 40, count=3), leader_epoch=0)
        log.append_as_leader(batch(0, [(b"k%d" % (i % 3), b"v%d" % i + b"x" * 60)]), leader_epoch=0)
    log.roll()
    log.update_high_watermark(log.log_end_offset)


async def test_a_log_with_an_undecodable_record_is_skipped_and_the_others_are_still_cleaned(tmp_path, caplog):
    env = RealEnv(seed=1)
    manager = LogManager(env, [str(tmp_path)], COMPACT)
    await manager.startup()
    damaged = await manager.get_or_create_log("damaged", 0, COMPACT)
    healthy = await manager.get_or_create_log("healthy", 0, COMPACT)
    await _fill(damaged, garbage_at=5)
    await _fill(healthy)
    damaged_before = segment_sizes(damaged)
    with caplog.at_level(logging.ERROR, logger="storage.log.log_manager"):
        passes = [await manager.cleaning_pass() for _ in range(4)]
    assert manager.is_uncleanable(("damaged", 0), damaged)
    assert "record" in manager.uncleanable[("damaged", 0)][1]  # the reason, as logged
    errors = [r for r in caplog.records if "uncleanable" in r.getMessage()]
    assert len(errors) == 1  # one line, not one per pass
    assert any(p is not None and p.groups_cleaned > 0 for p in passes)
    assert {r.key: r.offset for r in all_records(healthy)} == {b"k0": 57, b"k1": 58, b"k2": 59}
    assert not [n for n in os.listdir(damaged.dir) if n.endswith(".cleaned")]  # nothing left half-written
    assert segment_sizes(damaged) == damaged_before  # the damaged log is untouched
    await manager.shutdown()

    manager = LogManager(env, [str(tmp_path)], COMPACT)  # a restart tries it again (Kafka's behaviour)
    await manager.startup()
    assert manager.uncleanable == {}
    await manager.shutdown()


def segment_sizes(log) -> list[int]:
    return sorted(os.path.getsize(os.path.join(log.dir, n)) for n in os.listdir(log.dir) if n.endswith(".log"))
