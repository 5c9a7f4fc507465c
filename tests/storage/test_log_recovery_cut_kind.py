"""Recovery tells a torn last write (a crash mid-append: nothing acknowledged lost) from a whole
batch that fails its CRC (bit rot: records a replica may have acknowledged are gone); the
broker's clean-restart claim (KIP-966) depends on the difference."""

from storage.log import LogConfig, PartitionLog

from .log_helpers import FakeEnv, batch

PATH = "/data/t-0"
CONFIG = LogConfig(segment_bytes=1 << 20)


async def _log_with_damage(damage, on_data_loss=None) -> PartitionLog:
    env = FakeEnv()
    log = await PartitionLog.open(env, PATH, CONFIG)
    for i in range(5):
        log.append_as_leader(batch(0, [(b"k", b"v%d" % i * 20)]), leader_epoch=0)
    await log.flush()
    segment = f"{PATH}/{0:020d}.log"
    size = env.fs.file_size(segment)
    await log.close()
    f = env.fs.open(segment)
    damage(f, size)
    f.close()
    return await PartitionLog.open(env, PATH, CONFIG, recovery_point=0, clean_shutdown=False,
                                   on_data_loss=on_data_loss)


async def test_a_torn_last_write_is_cut_without_losing_a_whole_batch():
    torn = b"\x00" * 8 + (500).to_bytes(4, "big") + b"half a batch"  # declares 500 bytes, has 12
    log = await _log_with_damage(lambda f, size: f.append(torn))
    assert log.recovery_stats.bytes_truncated == len(torn)
    assert not log.recovery_stats.whole_batches_lost
    assert log.log_end_offset == 5


async def test_a_flipped_bit_inside_a_whole_batch_loses_it_and_everything_after():
    def rot(f, size):
        last = f.read(0, size)
        at = size // 2  # inside the third batch's CRC-covered bytes
        f.write_at(at, bytes([last[at] ^ 0x01]))
    log = await _log_with_damage(rot)
    assert log.recovery_stats.bytes_truncated > 0
    assert log.recovery_stats.whole_batches_lost
    assert log.log_end_offset < 5


async def test_only_a_cut_whole_batch_is_reported_to_on_data_loss():
    # The broker forgets its clean-restart claim in this callback (raftkafka.node.metadata_roles).
    calls = []

    def rot(f, size):
        at = f.read(0, size)
        f.write_at(size // 2, bytes([at[size // 2] ^ 0x01]))

    def on_data_loss():
        calls.append("cut")

    torn = b"\x00" * 8 + (500).to_bytes(4, "big") + b"half a batch"
    await _log_with_damage(lambda f, size: f.append(torn), on_data_loss)
    assert calls == []
    await _log_with_damage(rot, on_data_loss)
    assert len(calls) == 1


async def test_a_damaged_length_reaching_past_the_end_is_not_a_torn_write_when_batches_follow():
    # A misdirected write (simulation seed 287): one batch's bytes landed one byte into the
    # batch before, so that batch's length field is garbage reaching past the end of the file,
    # while whole valid batches still follow. Records were lost: not a torn last write.
    def misdirect(f, size):
        data = f.read(0, size)
        second = int.from_bytes(data[8:12], "big") + 12
        f.write_at(second + 1, data[second:second + 20])
        f.write_at(second + 8, (10 ** 6).to_bytes(4, "big"))
    log = await _log_with_damage(misdirect)
    assert log.recovery_stats.bytes_truncated > 0
    assert log.recovery_stats.whole_batches_lost
    assert log.log_end_offset == 1
