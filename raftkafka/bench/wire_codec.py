"""Kafka protocol codec costs: `python -m raftkafka.bench.wire_codec`.

- decode of a Produce v8 request carrying one ~1 MiB batch, for several record
  sizes: the records field is a memoryview slice of the frame, so the cost
  must not depend on how many records the batch holds;
- encode and decode rates of a Fetch v11 response with a few 1 MiB partitions.
"""
from __future__ import annotations

import argparse
import statistics
import time

from wire.protocol import (
    FetchResponse, ProduceRequest, RequestHeader, decode_request, decode_response, encode_request, encode_response,
    encode_response_parts,
)
from wire.records import SimpleRecord, build_batch

MIB = 1024 * 1024


def one_mib_batch(record_size: int) -> bytes:
    count = MIB // (record_size + 8)  # ~8 bytes of per-record framing
    value = b"v" * record_size
    return build_batch([SimpleRecord(key=None, value=value, timestamp=1_700_000_000_000)] * count)


def timed(fn, repeat: int) -> float:
    """Median seconds per call over `repeat` runs (after one warm-up)."""
    fn()
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples)


def produce_frame(batch: bytes) -> bytes:
    body = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[ProduceRequest.TopicProduceData(
        name="bench", partition_data=[ProduceRequest.PartitionProduceData(index=0, records=batch)])])
    return encode_request(body, 8, 1, "bench-client")[4:]


def fetch_response(partitions: int, batch: bytes) -> FetchResponse:
    # A distinct copy per partition, so the encode copies are not served from one cache-hot source.
    parts = [FetchResponse.PartitionData(partition_index=p, high_watermark=1000, last_stable_offset=1000,
                                         log_start_offset=0, records=bytearray(batch)) for p in range(partitions)]
    return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="bench", partitions=parts)])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4)
    args = parser.parse_args(argv)

    print("Produce v8 request decode (one ~1 MiB batch, records = memoryview slice):")
    for record_size in (10, 100, 1000):
        batch = one_mib_batch(record_size)
        frame = produce_frame(batch)
        header, body = decode_request(frame)
        records = body.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview) and records.obj is frame  # zero-copy
        seconds = timed(lambda: decode_request(frame), args.repeat)
        count = MIB // (record_size + 8)
        print(f"  {record_size:5d}-byte records ({count:6d} records, {len(frame) / MIB:.2f} MiB frame): "
              f"{seconds * 1e6:7.1f} us/request")

    # Cycle through several distinct responses (~64 MiB of records) so copies are not cache-hot.
    batch = one_mib_batch(100)
    responses = [fetch_response(args.partitions, batch) for _ in range(max(2, 64 // args.partitions))]
    header = RequestHeader(1, 11, 7, "bench")
    frames = [encode_response(header, r) for r in responses]
    size_mib = len(frames[0]) / MIB
    turn = iter(range(1 << 62))

    def encode_one():
        return encode_response(header, responses[next(turn) % len(responses)])

    def decode_one():
        return decode_response(memoryview(frames[next(turn) % len(frames)])[4:], 1, 11)

    enc = timed(encode_one, max(args.repeat // 4, 10))
    dec = timed(decode_one, args.repeat)
    print(f"Fetch v11 response, {args.partitions} partitions x 1 MiB ({size_mib:.2f} MiB frame):")
    print(f"  encode: {enc * 1e3:7.3f} ms/response  ({size_mib / enc:8.0f} MiB/s, one copy into the frame)")
    print(f"  decode: {dec * 1e6:7.1f} us/response  ({size_mib / dec:8.0f} MiB/s, records stay views)")
    parts = encode_response_parts(header, responses[0])
    print(f"  encode_response_parts (no join, for vectored writes): "
          f"{timed(lambda: encode_response_parts(header, responses[0]), args.repeat) * 1e6:.1f} us/response, "
          f"{len(parts)} chunks")


if __name__ == "__main__":
    main()
