"""Benchmark: the raftkafka Spark source in local[2].

    python -m raftkafka.bench.spark_read --bootstrap-server 127.0.0.1:9092 [--records 1000000]
    python -m raftkafka.bench.spark_read --in-process-brokers 1     # from a checkout (test harness)

1. Produces N records of 100-byte values into a fresh topic (4 partitions).
2. Batch read: `format("raftkafka")` → noop sink, all columns materialised; rows/s
   (cold = first query of the session, then warm).
3. Streaming: availableNow with maxOffsetsPerTrigger into a noop sink; the median
   `triggerExecution` of the micro-batches after the first is the steady-state latency.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    from spark_source.cluster_io import RemoteLogClient
    from wire.records import Compression, SimpleRecord, build_batch
    client = RemoteLogClient(bootstrap, client_id="bench-producer")
    client.ensure_topic(topic, partitions)
    value = b"x" * 100
    per_batch = 5000
    started = time.perf_counter()
    now = time.time_ns() // 1_000_000
    for i in range(0, records, per_batch):
        n = min(per_batch, records - i)
        batch = build_batch([SimpleRecord(b"%d" % (i + j), value) for j in range(n)], base_timestamp=now,
                            compression=Compression.NONE)
        client.produce((topic, (i // per_batch) % partitions), batch)
    client.close()
    return time.perf_counter() - started


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m raftkafka.bench.spark_read")
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--in-process-brokers", type=int, default=0,
                        help="start N test-harness brokers in this process (needs a source checkout)")
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--per-trigger", type=int, default=100_000)
    args = parser.parse_args(argv)

    cluster = None
    if args.in_process_brokers:
        sys.path.insert(0, os.getcwd())
        from tests.broker.harness import ThreadedCluster
        cluster = ThreadedCluster(args.in_process_brokers)
        args.bootstrap_server = cluster.start()
    if not args.bootstrap_server:
        parser.error("give --bootstrap-server or --in-process-brokers")

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    took = produce(args.bootstrap_server, topic, args.records, args.partitions)
    print(f"produced {args.records:,} x 100 B in {took:.1f}s ({args.records / took:,.0f} rec/s)")

    spark = (SparkSession.builder.master("local[2]").appName("raftkafka-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "1g")
             .config("spark.sql.adaptive.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    from spark_source.datasource import RaftKafkaDataSource
    spark.dataSource.register(RaftKafkaDataSource)

    def batch_read(label: str) -> None:
        started = time.perf_counter()
        (spark.read.format("raftkafka").option("kafka.bootstrap.servers", args.bootstrap_server)
         .option("subscribe", topic).load().write.format("noop").mode("overwrite").save())
        took = time.perf_counter() - started
        print(f"batch read {label}: {args.records:,} rows in {took:.2f}s = {args.records / took:,.0f} rows/s")

    batch_read("cold")
    batch_read("warm")
    batch_read("warm")

    query = (spark.readStream.format("raftkafka").option("kafka.bootstrap.servers", args.bootstrap_server)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(args.per_trigger)).load()
             .writeStream.format("noop").trigger(availableNow=True).start())
    query.awaitTermination()
    durations = [p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"]]
    steady = durations[1:] or durations
    print(f"micro-batches of {args.per_trigger:,} rows: {len(durations)}; first {durations[0]} ms; "
          f"steady-state median {statistics.median(steady):.0f} ms (min {min(steady)}, max {max(steady)})")
    spark.stop()
    if cluster is not None:
        cluster.stop()


if __name__ == "__main__":
    main()
