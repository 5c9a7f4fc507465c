"""PartitionLog.read over many batch sizes: whole batches, as many as fit in max_bytes.

The segment answers "how many bytes of whole batches fit" from the sparse offset index
instead of walking every header; this checks the answer against a plain header walk
for every start offset, byte budget and high watermark of a log with uneven batches
spread over several segments and index entries.
"""
import random

from storage.log import LogConfig, PartitionLog

from .log_helpers import FakeEnv, value_batch


def expected_size(sizes: list[tuple[int, int, int]], offset: int, max_bytes: int, limit: int,
                  min_one_batch: bool, segment_of) -> tuple[int, int]:
    """(first offset, bytes) by walking the batches: (base, last, size) in log order."""
    # Only batches entirely below `limit` and in the segment of the first one are served.
    batches = [b for b in sizes if b[1] >= offset and b[1] < limit]
    if not batches:
        return -1, 0
    first_segment = segment_of(batches[0][0])
    total = 0
    for base, last, size in batches:
        if segment_of(base) != first_segment:
            break
        if total + size > max_bytes and not (total == 0 and min_one_batch):
            break
        total += size
    return batches[0][0], total


async def test_reads_match_a_header_walk_for_every_offset_budget_and_limit():
    env = FakeEnv()
    log = await PartitionLog.open(env, "/data/t-0",
                                  LogConfig(segment_bytes=3000, index_interval_bytes=150, file_delete_delay_ms=0))
    rng = random.Random(5)
    batches = []
    for _ in range(60):
        info = log.append_as_leader(value_batch(rng.randint(1, 4), size=rng.randint(5, 120)), leader_epoch=0)
        batches.append((info.first_offset, info.last_offset, info.size))
    bases = sorted(log._segments)
    assert len(bases) >= 3  # several segments, each with several index entries

    def segment_of(offset: int) -> int:
        return max(b for b in bases if b <= offset)

    end = log.log_end_offset
    checked = 0
    for offset in range(0, end, 3):
        for max_bytes in (1, 40, 150, 333, 1000, 5000):
            for limit in (end, offset + 1, offset + 7, (offset + end) // 2 + 1):
                limit = min(limit, end)
                for min_one in (True, False):
                    fetch = log.read(offset, max_bytes, max_offset=limit, min_one_batch=min_one)
                    first, size = expected_size(batches, offset, max_bytes, limit, min_one, segment_of)
                    assert fetch.size == size, (offset, max_bytes, limit, min_one)
                    if size:
                        assert fetch.first_offset == first
                    checked += 1
    assert checked > 1000
