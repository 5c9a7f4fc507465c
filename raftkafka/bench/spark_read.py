"""Benchmark: the raftkafka Spark source in local[2] against real nodes.

    python -m raftkafka.bench.spark_read --bootstrap-server 127.0.0.1:9092 [--records 1000000]
    python -m raftkafka.bench.spark_read --dev-nodes 3      # starts `python -m raftkafka dev` itself

1. Produces N records of 100-byte values into a fresh topic (4 partitions,
   the cluster's default replication factor; with --dev-nodes N that is N),
   with raftkafka's own idempotent producer, acks=all.
2. Batch read: `format("raftkafka")` → noop sink, all columns materialised; rows/s
   (cold = first query of the session, then warm).
3. Streaming: availableNow with maxOffsetsPerTrigger into a noop sink; the median
   `triggerExecution` of the micro-batches after the first is the steady-state latency.
"""
from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    from raftkafka.client.blocking import BlockingAdmin, BlockingProducer

    with BlockingAdmin(bootstrap) as admin:
        admin.create_topic(topic, partitions)

    async def send_chunk(producer, first: int, count: int) -> None:
        value = b"x" * 100
        futures = [await producer.send(topic, value, b"%d" % i, partition=i % partitions)
                   for i in range(first, first + count)]
        await producer.flush()
        for future in futures:
            await future  # raises the delivery error, if any

    started = time.perf_counter()
    with BlockingProducer(bootstrap, acks="all", linger_ms=5, batch_size=512 * 1024,
                          max_request_size=4 << 20) as producer:
        chunk = 50_000
        for first in range(0, records, chunk):
            producer.run_in_loop(send_chunk, first, min(chunk, records - first))
    return time.perf_counter() - started


class DevCluster:
    """`python -m raftkafka dev --nodes N` in a temporary directory, stopped with SIGTERM."""

    def __init__(self, nodes: int, base_port: int):
        self.data = tempfile.TemporaryDirectory(prefix="raftkafka-bench-spark-")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "raftkafka", "dev", "--nodes", str(nodes), "--base-port", str(base_port),
             "--data-dir", self.data.name, "--set", f"default.replication.factor={nodes}",
             "--set", f"min.insync.replicas={min(2, nodes)}"],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in self.proc.stdout:
            m = re.match(r"^ready\s+bootstrap\.servers=(\S+)", line)
            if m:
                self.bootstrap = m.group(1)
                return
        raise RuntimeError(f"dev cluster exited ({self.proc.wait()}) before it was ready")

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.data.cleanup()


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m raftkafka.bench.spark_read")
    parser.add_argument("--bootstrap-server", help="a running cluster")
    parser.add_argument("--dev-nodes", type=int, default=0, help="start a dev cluster of N nodes for the run")
    parser.add_argument("--base-port", type=int, default=29092, help="with --dev-nodes")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-trigger", type=int, default=100_000)
    args = parser.parse_args(argv)
    if bool(args.bootstrap_server) == bool(args.dev_nodes):
        parser.error("give one of --bootstrap-server or --dev-nodes")

    cluster = DevCluster(args.dev_nodes, args.base_port) if args.dev_nodes else None
    bootstrap = cluster.bootstrap if cluster else args.bootstrap_server
    try:
        run(args, bootstrap)
    finally:
        if cluster is not None:
            cluster.stop()


def run(args, bootstrap: str) -> None:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    took = produce(bootstrap, topic, args.records, args.partitions)
    print(f"produced {args.records:,} x 100 B in {took:.1f}s ({args.records / took:,.0f} rec/s)", flush=True)

    spark = (SparkSession.builder.master("local[2]").appName("raftkafka-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "1g")
             .config("spark.sql.adaptive.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from spark_source.datasource import RaftKafkaDataSource
    spark.dataSource.register(RaftKafkaDataSource)

    def batch_read(label: str) -> None:
        started = time.perf_counter()
        (spark.read.format("raftkafka").option("kafka.bootstrap.servers", bootstrap)
         .option("subscribe", topic).load().write.format("noop").mode("overwrite").save())
        took = time.perf_counter() - started
        print(f"batch read {label}: {args.records:,} rows in {took:.2f}s = {args.records / took:,.0f} rows/s",
              flush=True)

    batch_read("cold")
    batch_read("warm")
    batch_read("warm")

    query = (spark.readStream.format("raftkafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(args.per_trigger)).load()
             .writeStream.format("noop").trigger(availableNow=True).start())
    query.awaitTermination()
    durations = [p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"]]
    steady = durations[1:] or durations
    print(f"micro-batches of {args.per_trigger:,} rows: {len(durations)}; first {durations[0]} ms; "
          f"steady-state median {statistics.median(steady):.0f} ms (min {min(steady)}, max {max(steady)})")
    spark.stop()


if __name__ == "__main__":
    main()
