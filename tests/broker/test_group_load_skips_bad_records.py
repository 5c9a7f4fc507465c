"""A `__consumer_offsets` partition holding records the coordinator cannot decode still loads
(issue 16, case 3): what a client wrote there before produce refused internal topics — a record
whose key has a negative version, or a CRC-valid batch of garbage — is skipped with a logged
error, and every other group of the partition is served."""
from __future__ import annotations

import logging

import trio
import trio.testing

from broker.group_driver import GroupDriver
from broker.groups.loader import replay
from tests.broker.test_group_load_at_hw import GROUP, _commit_batch, _fetch, _image, _Log, _setup
from tests.wire.raw_batches import batch_around
from wire.error_codes import ErrorCode
from wire.records import SimpleRecord, build_batch, iter_records


def _client_junk(offset: int) -> bytes:
    # confluent-kafka producing b"hello" with key b"\xff\xff..." lands as a key of version -1.
    return build_batch([SimpleRecord(b"\xff\xff-not-a-group-key", b"hello")], base_offset=offset, base_timestamp=0)


async def test_undecodable_records_and_batches_are_skipped_and_the_groups_load(caplog):
    broker, partition = _setup(hw=4)
    garbage = bytearray(batch_around(b"\x05" * 30, count=2))
    garbage[:8] = (2).to_bytes(8, "big")  # base offset 2: offsets 2-3
    partition.log = _Log([_commit_batch(0, 27), _client_junk(1), bytes(garbage), b"", _commit_batch(4, 37)])
    partition.log_end_offset = partition.high_watermark = 5
    driver = GroupDriver(broker)
    with caplog.at_level(logging.ERROR, logger="broker.group_driver"):
        async with trio.open_nursery() as nursery:
            await nursery.start(driver.run)
            driver.publish(None, _image(leader=1, epoch=1, offset=10))
            await trio.testing.wait_all_tasks_blocked()
            assert _fetch(driver) == (ErrorCode.NONE, [37])
            nursery.cancel_scope.cancel()
    logged = [r.getMessage() for r in caplog.records]
    assert any("undecodable record at offset 1" in m for m in logged)
    assert any("undecodable batch at offsets 2-3" in m for m in logged)


def test_replay_reports_each_record_it_leaves_out():
    skipped = []
    good = _commit_batch(0, 5)
    key, value = next((r.key, r.value) for r in iter_records(good))
    groups = replay([(b"\xff\xfe", b"x"), (key, value), (key[:5], value), (key, b"\x00\x09junk")], wall_ms=0,
                    on_skip=lambda position, reason: skipped.append(position))
    assert skipped == [0, 2, 3]
    assert groups[GROUP].offsets[("t", 0)].offset == 5
