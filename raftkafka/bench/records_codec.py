"""Record codec benchmark: build/decode rates and compression throughput.

    python -m raftkafka.bench.records_codec [--batch-records 500] [--record-bytes 100] [--min-time 0.5]

Prints, per codec: records/s for `build_batch` and `decode_batch` of batches of
`--batch-records` records with `--record-bytes`-byte values (JSON-ish log lines,
16-byte keys, one header every 4th record), the compression ratio, and
compress/decompress MB/s (of uncompressed bytes) on 1 MiB of the same data.
Also: header-only validation (CRC), the produce path's record scan (records/s,
decompression included; and for same-shaped records) and internal RPC frame
rates.
"""
from __future__ import annotations

import argparse
import random
import time
from dataclasses import dataclass

from wire.batch_header import HEADER_SIZE, validate_batch
from wire.compression import Compression, compress, decompress
from wire.record_scan import scan_records
from wire.records import SimpleRecord, build_batch, decode_batch
from wire.rpc import FrameDecoder, Registry, encode_frame, rpc_message

_WORDS = [b"user", b"order", b"click", b"session", b"payment", b"region", b"eu-west", b"status", b"ok", b"cart"]


def log_line(rng: random.Random, size: int) -> bytes:
    """A JSON-ish event padded/cut to `size` bytes: compresses like real topic data."""
    line = bytearray()
    while len(line) < size:
        line += b'{"id":%d,"%s":"%s","ts":%d}' % (
            rng.randrange(10**9), rng.choice(_WORDS), rng.choice(_WORDS), 1_700_000_000_000 + rng.randrange(10**6)
        )
    return bytes(line[:size])


def make_records(count: int, size: int, seed: int = 1) -> list[SimpleRecord]:
    rng = random.Random(seed)
    return [
        SimpleRecord(
            b"key-%012d" % rng.randrange(10**12),
            log_line(rng, size),
            (("trace", b"%016x" % rng.getrandbits(64)),) if i % 4 == 0 else (),
            1_700_000_000_000 + i,
        )
        for i in range(count)
    ]


def rate(fn, min_time: float) -> float:
    """Calls per second of fn(), run for at least min_time seconds."""
    fn()  # warm up
    calls, start = 0, time.perf_counter()
    while True:
        fn()
        calls += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time:
            return calls / elapsed


def bench_records(batch_records: int, record_bytes: int, min_time: float) -> None:
    records = make_records(batch_records, record_bytes)
    print(f"records: {batch_records} records/batch, {record_bytes}-byte values")
    print(f"{'codec':8} {'bytes/batch':>11} {'build rec/s':>12} {'decode rec/s':>13} {'validate MB/s':>14} "
          f"{'scan rec/s':>11}")
    for codec in Compression:
        batch = build_batch(records, compression=codec)
        build = rate(lambda: build_batch(records, compression=codec), min_time) * batch_records
        decode = rate(lambda: decode_batch(batch), min_time) * batch_records
        validate = rate(lambda: validate_batch(batch), min_time) * len(batch) / 1e6
        print(f"{codec.name:8} {len(batch):>11} {build:>12,.0f} {decode:>13,.0f} {validate:>14,.0f} "
              f"{_scan_rate(batch, min_time) * batch_records:>11,.0f}")
    # What a load generator sends: records of one shape (no headers, same sizes), which the
    # produce-time scan checks a column at a time.
    same = build_batch([SimpleRecord(None, r.value, (), r.timestamp) for r in records])
    print(f"scan rec/s of same-shaped records (null keys, no headers): {_scan_rate(same, min_time) * batch_records:,.0f}")


def _scan_rate(batch: bytes, min_time: float) -> float:
    """Batches/s through the produce path's record validation (wire.record_scan)."""
    header = validate_batch(batch)
    payload = memoryview(batch)[HEADER_SIZE:]
    return rate(lambda: scan_records(header, payload), min_time)


def bench_compression(min_time: float) -> None:
    rng = random.Random(2)
    data = b"\n".join(log_line(rng, 100) for _ in range(10_400))[: 1 << 20]
    print(f"\ncompression: {len(data)} bytes of log lines; MB/s of uncompressed data")
    print(f"{'codec':8} {'ratio':>6} {'compress MB/s':>14} {'decompress MB/s':>16}")
    for codec in Compression:
        if codec is Compression.NONE:
            continue
        packed = compress(codec, data)
        assert decompress(codec, packed) == data
        up = rate(lambda: compress(codec, data), min_time) * len(data) / 1e6
        down = rate(lambda: decompress(codec, packed), min_time) * len(data) / 1e6
        print(f"{codec.name:8} {len(data) / len(packed):>6.1f} {up:>14,.0f} {down:>16,.0f}")


_REGISTRY = Registry()


@rpc_message("BenchFetch", version=1, registry=_REGISTRY)
@dataclass(slots=True, frozen=True)
class BenchFetch:
    cluster_id: str
    replica_id: int
    epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    max_wait_ms: int


def bench_rpc(min_time: float) -> None:
    message = BenchFetch("cluster-x", 3, 17, 123_456, 16, 500)
    frame = encode_frame(message, 1, registry=_REGISTRY)
    frames = frame * 100
    decoder = FrameDecoder(registry=_REGISTRY)

    def decode_hundred():
        decoder.feed(frames)
        for _ in decoder:
            pass

    encode = rate(lambda: encode_frame(message, 1, registry=_REGISTRY), min_time)
    decode = rate(decode_hundred, min_time) * 100
    print(f"\nrpc: {len(frame)}-byte Fetch-like frame: encode {encode:,.0f}/s, decode {decode:,.0f}/s")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-records", type=int, default=500)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument("--min-time", type=float, default=0.5, help="seconds per measurement")
    args = parser.parse_args(argv)
    bench_records(args.batch_records, args.record_bytes, args.min_time)
    bench_compression(args.min_time)
    bench_rpc(args.min_time)


if __name__ == "__main__":
    main()
