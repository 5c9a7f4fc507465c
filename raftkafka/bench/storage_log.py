"""Micro-benchmark of the partition log on a real disk (page cache).

    python -m raftkafka.bench.storage_log [--size-mib 256] [--compact-mib 64] [--dir DIR]

Measures, in a fresh temporary directory (removed afterwards):
- append: `append_as_leader` of 1 MiB batches (validate CRC, assign offsets, write),
  then one fsync of everything (reported separately);
- sequential read: `read()` of up to 1 MiB per call from offset 0 to the end, bytes copied out;
- recovery: reopen after an unclean stop with recovery point 0 (full CRC scan +
  index rebuild + fsync), reported as seconds per GiB (extrapolated from --size-mib);
- compaction: one cleaning pass over a keyed log of 100-byte values (10 000 keys),
  MB/s of log bytes read.
"""
from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

import trio

from storage.env import RealEnv
from storage.log import LogConfig, PartitionLog, clean_log
from wire.records import SimpleRecord, build_batch

MiB = 1 << 20


def _batch_of(total: int, record_size: int, keys: int | None = None, start: int = 0) -> bytes:
    count = max(1, total // (record_size + 12))
    records = [SimpleRecord(None if keys is None else b"key-%06d" % ((start + i) % keys),
                            bytes([i % 251]) * record_size, timestamp=1_700_000_000_000 + i) for i in range(count)]
    return build_batch(records)


async def bench(size_mib: int, compact_mib: int, root: str) -> dict[str, float]:
    env = RealEnv(seed=1)
    config = LogConfig(segment_bytes=128 * MiB)
    path = os.path.join(root, "bench-0")
    log = await PartitionLog.open(env, path, config)
    big = _batch_of(MiB - 200, 1000)
    n = size_mib
    t0 = time.perf_counter()
    for _ in range(n):
        log.append_as_leader(big, leader_epoch=0)
    t1 = time.perf_counter()
    await log.flush()
    t2 = time.perf_counter()
    total = log.size_in_bytes
    figures = {"append_MBps": total / (t1 - t0) / 1e6, "fsync_s": t2 - t1}

    offset, read_bytes = 0, 0
    t0 = time.perf_counter()
    while offset < log.log_end_offset:
        fetch = log.read(offset, MiB)
        data = fetch.read()
        read_bytes += len(data)
        offset = _next(data)
    t1 = time.perf_counter()
    figures["read_MBps"] = read_bytes / (t1 - t0) / 1e6

    log.closed = True  # abandon without a clean close: the reopen below is an unclean recovery
    t0 = time.perf_counter()
    recovered = await PartitionLog.open(env, path, config, recovery_point=0)
    t1 = time.perf_counter()
    assert recovered.log_end_offset == log.log_end_offset
    figures["recovery_s_per_GiB"] = (t1 - t0) / (total / (1 << 30))
    figures["recovery_MBps"] = total / (t1 - t0) / 1e6
    await recovered.close()

    compact = LogConfig(segment_bytes=16 * MiB, cleanup_policy="compact")
    cpath = os.path.join(root, "compact-0")
    clog = await PartitionLog.open(env, cpath, compact)
    written = 0
    i = 0
    while written < compact_mib * MiB:
        b = _batch_of(64 * 1024, 100, keys=10_000, start=i)
        clog.append_as_leader(b, leader_epoch=0)
        written += len(b)
        i += 500
    clog.roll()
    clog.update_high_watermark(clog.log_end_offset)
    await clog.flush()
    t0 = time.perf_counter()
    result = await clean_log(env, clog, 0, max_dirty_bytes=1 << 40)
    t1 = time.perf_counter()
    figures["compaction_MBps"] = result.bytes_read / 2 / (t1 - t0) / 1e6  # map pass + rewrite pass each read the log
    figures["compaction_records_per_s"] = result.records_read / (t1 - t0)
    figures["compaction_kept_ratio"] = result.bytes_written / max(1, written)
    await clog.close()
    return figures


def _next(data: bytes) -> int:
    """Next offset after the whole batches in `data` (header walk)."""
    from wire.batch_header import iter_batches

    last = None
    for _, header in iter_batches(data, validate=False):
        last = header
    return last.next_offset


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m raftkafka.bench.storage_log", description=__doc__.split("\n")[0])
    parser.add_argument("--size-mib", type=int, default=256, help="MiB appended (and then read and recovered)")
    parser.add_argument("--compact-mib", type=int, default=64, help="MiB of keyed log compacted")
    parser.add_argument("--dir", default=None, help="parent directory for the temporary data (default: system temp)")
    args = parser.parse_args(argv)
    root = tempfile.mkdtemp(prefix="raftkafka-bench-", dir=args.dir)
    try:
        figures = trio.run(bench, args.size_mib, args.compact_mib, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"append 1 MiB batches : {figures['append_MBps']:8.0f} MB/s  (then fsync {figures['fsync_s']:.2f} s)")
    print(f"sequential read      : {figures['read_MBps']:8.0f} MB/s")
    print(f"recovery (unclean)   : {figures['recovery_s_per_GiB']:8.2f} s/GiB  ({figures['recovery_MBps']:.0f} MB/s, "
          f"extrapolated from {args.size_mib} MiB)")
    print(f"compaction           : {figures['compaction_MBps']:8.1f} MB/s  ({figures['compaction_records_per_s']:.0f} "
          f"records/s, output {figures['compaction_kept_ratio']:.1%} of input)")


if __name__ == "__main__":
    main()
