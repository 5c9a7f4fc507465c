"""Client quotas measured: a throttled and an unthrottled librdkafka client on one broker.

    python -m raftkafka.bench.quota [--seconds 30] [--quota-mb 5] [--record-size 10000] [--quota-window-num 11]
                                [--partition-fetch-kb 1024]

Starts one combined node (a child process) and sets, with AlterClientQuotas,
producer_byte_rate and consumer_byte_rate = `--quota-mb` MB/s (10^6 bytes) on the client-ids
`throttled-producer` and `throttled-consumer`. Then, for producers and then for consumers:

1. the unthrottled client (another client-id) alone, for `--baseline` seconds: its rate
   (and again after step 2: the change is against the mean of both);
2. both side by side on the same broker for `--quota-window-num` s (quota.window.num x 1 s:
   the burst Kafka's windowed rate lets a new entity take before it is throttled, which the node
   measures with `quota.window.num` = `--quota-window-num`) and then `--seconds` s,
   measured over those last `--seconds` s only: the throttled client's rate against its quota
   (the deviation in %), the lowest and highest over every 30 s span of the window (1 s
   apart), and per 10 s of it, the throttles librdkafka reported
   (throttle_cb), and the unthrottled client's rate against its baseline.

Producer rates count acknowledged record values (the broker also counts batch and request
headers against the quota: a few tens of bytes per 10 kB record); consumer rates count the
bytes librdkafka fetched (its `rxbytes` statistic: record batches with their framing), not
what the application has taken from librdkafka's queue yet (with the unthrottled client
beside it in one Python process, that lags behind). The consumers read a topic written in
batches of at most `--partition-fetch-kb`, their max.partition.fetch.bytes (a fetch answers
whole batches). The unthrottled consumer re-reads its topic from the start whenever it
reaches the end. Prints one table.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace

import trio

from raftkafka.bench.raft_quorum import free_ports
from raftkafka.cli.common import format_table
from raftkafka.cli.dev import node_layout, prepare_node, voters_of
from raftkafka.cli.format_storage import random_uuid_text
from raftkafka.client import Admin, NewTopic
from storage.env import RealEnv

HOST = "127.0.0.1"
SLICE_S = 10.0  # the throttled client's rate is also shown per slice of this length,
SPAN_S = 30.0  # and as the range over every span of this length (1 s apart) in the window
# the unthrottled producer's topic keeps only its latest bytes: the run writes gigabytes
BOUNDED = {"retention.bytes": str(256 << 20), "segment.bytes": str(64 << 20), "retention.ms": "60000"}


def start_node(folder: str, quota_window_num: int) -> tuple[subprocess.Popen, int]:
    client, controller = free_ports(2)
    layout = node_layout(1, 1, client, os.path.join(folder, "node-1"), {
        "listeners": f"PLAINTEXT://{HOST}:{client},CONTROLLER://{HOST}:{controller}",
        "controller.quorum.voters": f"1@{HOST}:{controller}", "log.retention.check.interval.ms": "5000",
        "quota.window.num": str(quota_window_num)})
    layout = replace(layout, controller_port=controller)
    prepare_node(layout, voters_of([layout]), random_uuid_text(RealEnv()))
    log_path = os.path.join(folder, "node.log")
    proc = subprocess.Popen([sys.executable, "-m", "raftkafka", "node", "--config", layout.config_path],
                            stdout=open(log_path, "wb"), stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while b"serving Kafka clients" not in open(log_path, "rb").read():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit(f"the node did not start; see {log_path}")
        time.sleep(0.1)
    return proc, client


async def _setup(bootstrap: str, quota: float) -> None:
    async with Admin(RealEnv(), bootstrap) as admin:
        for topic, configs in (("quota-throttled", {}), ("quota-unthrottled", BOUNDED), ("quota-read", {})):
            await admin.create_topics([NewTopic(topic, 1, 1, configs)])
        errors = await admin.alter_client_quotas([
            ((("client-id", "throttled-producer"),), {"producer_byte_rate": quota}),
            ((("client-id", "throttled-consumer"),), {"consumer_byte_rate": quota})])
        if any(errors):
            raise SystemExit(f"AlterClientQuotas failed: {errors}")


class Meter:
    """Bytes over time, and the throttles librdkafka reported."""

    def __init__(self):
        self.events: list[tuple[float, int]] = []
        self.throttles: list[float] = []
        self.lock = threading.Lock()

    def add(self, nbytes: int, at: float | None = None) -> None:
        with self.lock:
            self.events.append((time.monotonic() if at is None else at, nbytes))

    def rate(self, start: float, end: float) -> float:
        with self.lock:
            total = sum(n for t, n in self.events if start <= t < end)
        return total / (end - start) / 1e6


def run_producer(bootstrap: str, topic: str, client_id: str, record_size: int, stop: threading.Event,
                 meter: Meter) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "acks": 1,
                         "queue.buffering.max.kbytes": 8192,
                         "throttle_cb": lambda e: meter.throttles.append(e.throttle_time)})
    payload = b"b" * record_size

    def delivered(err, msg):
        if err is None:
            meter.add(len(msg.value()))

    while not stop.is_set():
        try:
            producer.produce(topic, payload, on_delivery=delivered)
        except BufferError:
            producer.poll(0.005)
        producer.poll(0)
    producer.purge()
    producer.flush(10)


def run_consumer(bootstrap: str, topic: str, client_id: str, partition_fetch_kb: int, stop: threading.Event,
                 meter: Meter) -> None:
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    fetched = [0]

    def on_stats(text: str) -> None:
        """librdkafka's bytes fetched for the partition (`rxbytes`), at the time it counted them
        (`ts`: the monotonic clock in microseconds, as time.monotonic)."""
        stats = json.loads(text)
        partition = stats["topics"].get(topic, {}).get("partitions", {}).get("0")
        if partition is not None and partition["rxbytes"] > fetched[0]:
            meter.add(partition["rxbytes"] - fetched[0], at=stats["ts"] / 1e6)
            fetched[0] = partition["rxbytes"]

    consumer = Consumer({"bootstrap.servers": bootstrap, "client.id": client_id, "group.id": client_id,
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.max.bytes": 8 << 20, "max.partition.fetch.bytes": partition_fetch_kb << 10,
                         "statistics.interval.ms": 250, "stats_cb": on_stats,
                         "throttle_cb": lambda e: meter.throttles.append(e.throttle_time)})
    consumer.assign([TopicPartition(topic, 0, 0)])
    while not stop.is_set():
        for message in consumer.consume(500, 0.1):
            error = message.error()
            if error is not None and error.code() == KafkaError._PARTITION_EOF:
                consumer.seek(TopicPartition(topic, 0, 0))
    consumer.close()


def side_by_side(runs: list, seconds: float) -> list[Meter]:
    """Run each (target, args) with its own Meter for `seconds`; their meters."""
    stop = threading.Event()
    meters = [Meter() for _ in runs]
    threads = [threading.Thread(target=target, args=(*args, stop, meter)) for (target, args), meter in
               zip(runs, meters)]
    for t in threads:
        t.start()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join(30)
    return meters


def fill(bootstrap: str, topic: str, nbytes: int, record_size: int, batch_kb: int) -> None:
    """Write the consumers' topic in batches of at most `batch_kb` (a fetch answers whole batches)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20, "queue.buffering.max.kbytes": 65536,
                         "batch.size": batch_kb << 10})
    payload = b"r" * record_size
    for _ in range(nbytes // record_size):
        while True:
            try:
                producer.produce(topic, payload)
                break
            except BufferError:
                producer.poll(0.01)
    producer.flush(120)


def _steps(start: float, end: float, step: float) -> list[float]:
    """The starts of the whole slices of `step` in [start, end)."""
    return [start + i * step for i in range(int((end - start) // step))]


def alone(run, seconds: float) -> float:
    """The unthrottled client's rate on its own (past its first second: its start-up)."""
    begin = time.monotonic()
    [meter] = side_by_side([run], seconds)
    return meter.rate(begin + 1, begin + seconds)


def measure(kind: str, throttled_run, unthrottled_run, quota_mb: float, args) -> list[list]:
    before = alone(unthrottled_run, args.baseline)
    warmup = float(args.quota_window_num)  # quota.window.num x quota.window.size.seconds (1 s)
    start = time.monotonic()
    throttled, unthrottled = side_by_side([throttled_run, unthrottled_run], warmup + args.seconds)
    window = (start + warmup, start + warmup + args.seconds)
    rate = throttled.rate(*window)
    slices = [throttled.rate(t, t + SLICE_S) for t in _steps(window[0], window[1], SLICE_S)]
    spans = [throttled.rate(t, t + SPAN_S) for t in _steps(window[0], window[1] - SPAN_S + 1, 1.0)] or [rate]
    low, high = ((r - quota_mb) / quota_mb * 100 for r in (min(spans), max(spans)))
    burst = throttled.rate(start, window[0])
    other = unthrottled.rate(*window)
    after = alone(unthrottled_run, args.baseline)
    baseline = (before + after) / 2  # the machine's load may change during the run: both sides of it
    return [[f"{kind} (quota {quota_mb:g} MB/s)", f"{rate:.2f}", f"{(rate - quota_mb) / quota_mb * 100:+.1f}%",
             f"{low:+.1f}%..{high:+.1f}%", " / ".join(f"{r:.1f}" for r in slices), f"{burst:.2f}", len(throttled.throttles), f"{other:.1f}",
             f"{before:.1f} / {after:.1f}", f"{(other - baseline) / baseline * 100:+.1f}%"]]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m raftkafka.bench.quota", description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=30.0, help="the measuring window, after the first burst")
    parser.add_argument("--quota-mb", type=float, default=5.0, help="the quota, MB/s (10^6 bytes)")
    parser.add_argument("--record-size", type=int, default=10_000)
    parser.add_argument("--quota-window-num", type=int, default=11,
                        help="the node's quota.window.num (windows of 1 s the quotas are measured over)")
    parser.add_argument("--partition-fetch-kb", type=int, default=1024,
                        help="the consumers' max.partition.fetch.bytes in kB (librdkafka's default: 1024), and "
                             "the batch.size their topic is written with (a fetch answers whole batches)")
    parser.add_argument("--baseline", type=float, default=10.0, help="seconds the unthrottled client runs alone")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="quota-bench-") as folder:
        node, port = start_node(folder, args.quota_window_num)
        try:
            bootstrap = f"{HOST}:{port}"
            trio.run(_setup, bootstrap, args.quota_mb * 1e6)
            rows = measure("producer", (run_producer, (bootstrap, "quota-throttled", "throttled-producer",
                                                       args.record_size)),
                           (run_producer, (bootstrap, "quota-unthrottled", "unthrottled-producer",
                                           args.record_size)), args.quota_mb, args)
            # enough for the throttled consumer's burst and window, with room to spare
            fill(bootstrap, "quota-read", int(args.quota_mb * 1e6 * (args.quota_window_num + args.seconds) * 1.3),
                 args.record_size, args.partition_fetch_kb)
            rows += measure("consumer", (run_consumer, (bootstrap, "quota-read", "throttled-consumer", args.partition_fetch_kb)),
                            (run_consumer, (bootstrap, "quota-read", "unthrottled-consumer",
                                            args.partition_fetch_kb)), args.quota_mb, args)
        finally:
            node.kill()
            node.wait()
    print(format_table(["client", "MB/s over window", "vs quota", f"{SPAN_S:g} s spans vs quota", f"per {SLICE_S:g} s",
                        "MB/s in first windows", "throttles reported", "unthrottled MB/s beside it", "unthrottled MB/s alone before / after", "change"], rows))
    print(f"(window: {args.seconds:g} s after the first {args.quota_window_num} s; quota.window.num="
          f"{args.quota_window_num}; {args.record_size} B records; consumers' batches and fetches of at most "
          f"{args.partition_fetch_kb} kB; one node)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
