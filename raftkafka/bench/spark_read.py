"""Benchmark: the raftkafka Spark source and sink in local[2] against real nodes, with
librdkafka's figures on the same cluster in the same run.

    python -m raftkafka.bench.spark_read --bootstrap-server 127.0.0.1:9092 [--records 1000000]
    python -m raftkafka.bench.spark_read --dev-nodes 3      # starts `python -m raftkafka dev` itself

1. librdkafka (confluent-kafka, acks=all) writes N records of 100-byte values into a fresh
   topic (4 partitions, the cluster's default replication factor; with --dev-nodes N that
   is N) and reads them back: the reference figures. Then the source's and the sink's own
   code without Spark, in one thread: the range reader over all partitions (Arrow rows),
   and one sink task (`write_task`) copying them into another topic.
2. Cold read, each in a fresh process: a SparkSession is started (timed), then the first
   query of the session counts a small topic (1,000 records); for scale, the same over
   Spark's floor source (1,000 ready-made rows): what a Python source's first query costs.
3. Batch read: `format("raftkafka")` → noop sink, all columns materialised, rows/s (warm).
   For scale, the same query over a Python source that yields ready-made Arrow batches of
   the same schema ("Spark's floor": what Spark itself costs per row here).
4. Streaming: availableNow with maxOffsetsPerTrigger into a noop sink; the median
   `triggerExecution` of the micro-batches after the first is the steady-state latency, and
   the median of each of Spark's phases (`durationMs`) says where it goes. For scale, the
   same over micro-batches of ready-made rows, in as many tasks as topic partitions and in 2.
   Spark's floor in 2 tasks also runs first, as the session's first streaming query: it
   takes Spark's warm-up of its streaming path, which would otherwise fall on ours.
5. Sink: a streaming query copies the topic into another through the exactly-once sink
   (sinkId, availableNow, 250,000 rows per micro-batch); rows/s over the query's run and
   over the micro-batches after the first, and the target's record count checked against N;
   the CPU every kind of process on the machine spent meanwhile (Spark's JVM, its Python
   workers, the brokers). For scale, the same copy into a sink that drops the rows (our read
   and Spark's copy, no write), and Spark's floor: ready-made rows into that sink.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from raftkafka.bench.processes import cpu_seconds


def produce(bootstrap: str, topic: str, records: int, partitions: int) -> float:
    """N records of 100-byte values round-robin over the partitions, with raftkafka's own
    idempotent producer (acks=all); the seconds it took. (Setup for other benchmarks.)"""
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


def librdkafka_write(bootstrap: str, topic: str, records: int) -> float:
    from raftkafka.bench.load_librdkafka import produce
    result = produce(bootstrap, topic, records, 100, 0, {"acks": "all", "linger.ms": "5"}, None)
    if result.errors:
        raise RuntimeError(f"librdkafka produce: {result.first_error}")
    return result.records_per_s


def librdkafka_read(bootstrap: str, topic: str, records: int) -> float:
    from raftkafka.bench.load_librdkafka import consume
    return consume(bootstrap, topic, records, 30, {}, None, None).records_per_s


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
    parser.add_argument("--cold", choices=("raftkafka", "floor"), help=argparse.SUPPRESS)  # one cold query
    parser.add_argument("--topic", help=argparse.SUPPRESS)  # with --cold raftkafka
    args = parser.parse_args(argv)
    if args.cold:
        print(json.dumps(cold_query(args.cold, args.bootstrap_server, args.topic)))
        return
    if bool(args.bootstrap_server) == bool(args.dev_nodes):
        parser.error("give one of --bootstrap-server or --dev-nodes")

    cluster = DevCluster(args.dev_nodes, args.base_port) if args.dev_nodes else None
    bootstrap = cluster.bootstrap if cluster else args.bootstrap_server
    try:
        run(args, bootstrap)
    finally:
        if cluster is not None:
            cluster.stop()


def without_spark(bootstrap: str, topic: str, partitions: int) -> None:
    from spark_source.cluster_io import LATEST_TS, RemoteLogClient
    from spark_source.planning import OffsetRange
    from spark_source.range_reader import read_range
    from spark_source.sink_protocol import ledger_topic, write_task
    from spark_source.sink_rows import SinkRows

    client = RemoteLogClient(bootstrap)
    try:
        tps = [(topic, p) for p in range(partitions)]
        ends = client.list_offsets(tps, LATEST_TS)
        started = time.perf_counter()
        batches = [b for tp in tps for b in read_range(client, OffsetRange(topic, tp[1], 0, ends[tp]))]
        took = time.perf_counter() - started
        rows = sum(b.num_rows for b in batches)
        print(f"range reader, one thread, no Spark: {rows:,} rows in {took:.2f}s = {rows / took:,.0f} rows/s",
              flush=True)
        target, sink_id = f"{topic}-sink-direct", f"direct-{topic}"
        client.ensure_topic(target, partitions)
        client.ensure_topic(ledger_topic(sink_id), 1)
        started = time.perf_counter()
        sink_rows = SinkRows.from_arrow([b.select(["key", "value"]) for b in batches], topic_option=target, task=0,
                                        partition_counts=lambda name: partitions)
        write_task(client, sink_id, 0, 0, [sink_rows], timestamp_ms=int(time.time() * 1000))
        took = time.perf_counter() - started
        print(f"sink task (write_task), one thread, no Spark: {rows:,} rows in {took:.2f}s = "
              f"{rows / took:,.0f} rows/s", flush=True)
    finally:
        client.close()


# Spark runs a streaming source's and sink's driver-side calls (offsets, planning, commits) in
# runner processes of their own, one per query; its executors' Python workers fork from its daemon.
_KINDS = (("Spark's JVM", "java"), ("brokers", "raftkafka node"), ("Spark's Python runners", "python_streaming_"),
          ("Spark's Python workers", "pyspark.daemon"), ("Spark's Python workers", "pyspark.worker"),
          ("this benchmark", "spark_read"))


def cpu_by_process() -> dict[int, tuple[str, float]]:
    """Every process on the machine: pid -> (kind, CPU seconds, user + system); empty where
    there is no /proc. A child that has exited but is not yet reaped reads as "other" (its
    command line is empty then)."""
    out = {}
    for entry in os.scandir("/proc") if os.path.isdir("/proc") else ():
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                command = f.read().replace(b"\0", b" ").decode(errors="replace")
            spent = cpu_seconds(int(entry.name))
        except OSError:
            continue  # gone meanwhile
        kind = next((name for name, needle in _KINDS if needle in command), "other")
        out[int(entry.name)] = (kind, spent)
    return out


class CpuSamples:
    """`cpu_by_process()` every `every` seconds in a thread while the with-block runs."""

    def __init__(self, every: float = 0.2):
        self.every, self.samples = every, []
        self.kinds: dict[int, str] = {}  # pid -> its kind while it ran (not "other" once exited)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while True:
            self._sample()
            if self._stop.wait(self.every):
                self._sample()
                return

    def _sample(self) -> None:
        sample = cpu_by_process()
        for pid, (kind, _) in sample.items():
            if kind != "other":
                self.kinds.setdefault(pid, kind)
        self.samples.append((time.time(), sample))

    def __enter__(self) -> "CpuSamples":
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def first_time(self) -> float:
        return self.samples[0][0]

    @property
    def last_time(self) -> float:
        return self.samples[-1][0]

    def spent(self, start: float, end: float) -> dict[str, float]:
        """CPU per kind between the samples nearest `start` and `end` (wall-clock seconds)."""
        def nearest(t: float) -> dict:
            return min(self.samples, key=lambda sample: abs(sample[0] - t))[1]

        return cpu_spent(nearest(start), nearest(end), self.kinds)


def _ended_at(progress: dict) -> float:
    """Wall-clock time a micro-batch ended: its start (Spark's progress timestamp) plus its duration."""
    started = datetime.datetime.fromisoformat(progress["timestamp"].replace("Z", "+00:00")).timestamp()
    return started + progress["durationMs"]["triggerExecution"] / 1000


def _cpu_text(cpu: dict[str, float]) -> str:
    if not cpu:
        return "not measured (no /proc)"
    return ", ".join(f"{kind} {seconds:.2f}" for kind, seconds in sorted(cpu.items(), key=lambda kv: -kv[1]))


def cpu_spent(before: dict, after: dict, kinds: dict[int, str] | None = None) -> dict[str, float]:
    """CPU per kind between two `cpu_by_process()` samples. A process counts under the kind
    `kinds` knows it by (its kind while it ran), else its kind in either sample; a pid whose
    CPU went down is a new process under a reused pid."""
    kinds = kinds or {}
    spent: dict[str, float] = {}
    for pid, (kind, seconds) in after.items():
        earlier_kind, earlier = before.get(pid, (kind, 0.0))
        if seconds < earlier:
            earlier_kind, earlier = kind, 0.0
        kind = kinds.get(pid) or (kind if kind != "other" else earlier_kind)
        spent[kind] = spent.get(kind, 0.0) + seconds - earlier
    return {kind: seconds for kind, seconds in spent.items() if seconds >= 0.05}


def start_session():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("raftkafka-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", "2").config("spark.driver.memory", "1g")
             .config("spark.sql.adaptive.enabled", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


_SINK_PER_TRIGGER = 250_000  # rows per micro-batch of the sink queries


def micro_batches(query) -> list[dict]:
    """Spark's `durationMs` of each micro-batch that read rows."""
    return [p["durationMs"] for p in query.recentProgress if p["numInputRows"]]


def phase_medians(query) -> str:
    """Where a steady micro-batch's time goes, by Spark's own phases: the median of each over
    the micro-batches after the first."""
    steady = micro_batches(query)[1:]
    phases = sorted({k for d in steady for k in d} - {"triggerExecution"})
    return ", ".join(f"{k} {statistics.median(d.get(k, 0) for d in steady):.0f}" for k in phases)


def cold_query(source: str, bootstrap: str | None, topic: str | None) -> dict:
    """In this (fresh) process: the session start and the first query, counting 1,000 rows."""
    started = time.perf_counter()
    spark = start_session()
    session = time.perf_counter() - started
    started = time.perf_counter()
    if source == "raftkafka":
        from spark_source.datasource import RaftKafkaDataSource
        spark.dataSource.register(RaftKafkaDataSource)
        frame = spark.read.format("raftkafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    else:
        from raftkafka.bench.spark_floor import FLOOR_PARTITIONS, SparkFloor
        spark.dataSource.register(SparkFloor)
        frame = spark.read.format(SparkFloor.name()).option("rows", 1000 // FLOOR_PARTITIONS).option("batches", 1)
    rows = frame.load().count()
    first = time.perf_counter() - started
    spark.stop()
    return {"session_s": session, "first_query_s": first, "rows": rows}


def cold_in_fresh_process(source: str, bootstrap: str, topic: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "raftkafka.bench.spark_read", "--cold", source,
                           "--bootstrap-server", bootstrap, "--topic", topic],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def run(args, bootstrap: str) -> None:
    from raftkafka.client.blocking import BlockingAdmin

    suffix = uuid.uuid4().hex[:8]
    topic, small, copy = f"bench-spark-{suffix}", f"bench-spark-small-{suffix}", f"bench-spark-copy-{suffix}"
    with BlockingAdmin(bootstrap) as admin:
        for name in (topic, small, copy):
            admin.create_topic(name, args.partitions)
    write = librdkafka_write(bootstrap, topic, args.records)
    read = librdkafka_read(bootstrap, topic, args.records)
    librdkafka_write(bootstrap, small, 1000)
    print(f"librdkafka: write {write:,.0f} rec/s (acks=all), read {read:,.0f} rec/s", flush=True)
    without_spark(bootstrap, topic, args.partitions)

    for source in ("raftkafka", "floor"):
        cold = cold_in_fresh_process(source, bootstrap, small)
        label = "cold read" if source == "raftkafka" else "Spark's floor, cold (1,000 ready-made rows)"
        print(f"{label}, fresh process: session start {cold['session_s']:.2f}s; first query: {cold['rows']:,} rows "
              f"in {cold['first_query_s']:.2f}s", flush=True)

    spark = start_session()
    from spark_source.datasource import RaftKafkaDataSource
    from raftkafka.bench.spark_floor import FLOOR_ROWS_TOTAL, SparkFloor
    spark.dataSource.register(RaftKafkaDataSource)
    spark.dataSource.register(SparkFloor)

    def source(name: str):
        return spark.read.format("raftkafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", name)

    def timed(label: str, frame, rows: int) -> None:
        started = time.perf_counter()
        frame.write.format("noop").mode("overwrite").save()
        took = time.perf_counter() - started
        print(f"{label}: {rows:,} rows in {took:.2f}s = {rows / took:,.0f} rows/s", flush=True)

    for _ in range(3):
        timed("batch read", source(topic).load(), args.records)
    for _ in range(2):
        timed("Spark's floor (ready-made Arrow batches)", spark.read.format(SparkFloor.name()).load(),
              FLOOR_ROWS_TOTAL)

    def floor_stream(tasks: int):
        query = (spark.readStream.format(SparkFloor.name()).option("perBatch", args.per_trigger)
                 .option("total", args.records).option("tasks", tasks).load()
                 .writeStream.format("noop").trigger(availableNow=True).start())
        query.awaitTermination()
        return query

    def floor_line(label: str, query) -> str:
        floor = [d["triggerExecution"] for d in micro_batches(query)][1:]
        return (f"  {label}: median {statistics.median(floor):.0f} ms (min {min(floor)}, max {max(floor)}); "
                f"by phase: {phase_medians(query)}")

    # The session's first streaming query pays Spark's own warm-up of its streaming path (class
    # loading, the JIT): Spark's floor alone runs 50-60 ms slower per micro-batch the first
    # time. Measured first, so that every query after it, ours and the floors, runs warm.
    print(floor_line(f"the session's first streaming query, Spark's floor ({args.per_trigger:,} ready-made rows "
                     f"per micro-batch in 2 tasks)", floor_stream(2)), flush=True)
    query = (spark.readStream.format("raftkafka").option("kafka.bootstrap.servers", bootstrap)
             .option("subscribe", topic).option("startingOffsets", "earliest")
             .option("maxOffsetsPerTrigger", str(args.per_trigger)).load()
             .writeStream.format("noop").trigger(availableNow=True).start())
    query.awaitTermination()
    durations = [d["triggerExecution"] for d in micro_batches(query)]
    steady = durations[1:] or durations
    print(f"micro-batches of {args.per_trigger:,} rows: {len(durations)}; first {durations[0]} ms; "
          f"steady-state median {statistics.median(steady):.0f} ms (min {min(steady)}, max {max(steady)})",
          flush=True)
    print(f"  steady-state medians by phase (ms): {phase_medians(query)}", flush=True)
    for tasks in (args.partitions, 2):
        print(floor_line(f"Spark's floor, micro-batches of {args.per_trigger:,} ready-made rows in {tasks} tasks",
                         floor_stream(tasks)), flush=True)

    def copy_query(frame, sink: str, **options) -> tuple[list, float, str]:
        """A streaming copy of `frame`'s key and value into `sink`, availableNow: the progress of
        the micro-batches that read rows, the query's seconds, and the CPU each kind of process
        on the machine spent in the whole query and after its first micro-batch."""
        with tempfile.TemporaryDirectory(prefix="raftkafka-bench-sink-") as checkpoint:
            writer = frame.selectExpr("key", "value").writeStream.format(sink).option("checkpointLocation", checkpoint)
            for key, value in options.items():
                writer = writer.option(key, value)
            with CpuSamples() as samples:
                started = time.perf_counter()
                query = writer.trigger(availableNow=True).start()
                query.awaitTermination()
                took = time.perf_counter() - started
        progress = [p for p in query.recentProgress if p["numInputRows"]]
        whole = samples.spent(samples.first_time, samples.last_time)
        steady = samples.spent(_ended_at(progress[0]), samples.last_time) if len(progress) > 1 else {}
        return progress, took, f"{_cpu_text(whole)}; after the first micro-batch: {_cpu_text(steady)}"

    def steady_rate(progress: list) -> float:
        """Rows/s over the micro-batches after the first (which also starts the sink's Python workers)."""
        steady = progress[1:] or progress
        return sum(p["numInputRows"] for p in steady) / (sum(p["durationMs"]["triggerExecution"] for p in steady)
                                                         / 1000)

    def stream_of(name: str):
        return (spark.readStream.format("raftkafka").option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", name).option("startingOffsets", "earliest")
                .option("maxOffsetsPerTrigger", str(_SINK_PER_TRIGGER)).load())

    progress, took, cpu = copy_query(stream_of(topic), "raftkafka", **{
        "kafka.bootstrap.servers": bootstrap, "topic": copy, "sinkId": f"bench-{suffix}"})
    took_ms = [p["durationMs"]["triggerExecution"] for p in progress]
    with BlockingAdmin(bootstrap) as admin:
        written = sum(o for o, _ in admin.list_offsets({(copy, p): -1 for p in range(args.partitions)}).values())
    print(f"sink (exactly-once, streaming): {args.records:,} rows in {took:.2f}s = {args.records / took:,.0f} rows/s; "
          f"micro-batches {took_ms} ms, after the first {steady_rate(progress):,.0f} rows/s (read + write); "
          f"target holds {written:,} records", flush=True)
    print(f"  CPU seconds during the sink query, by process kind: {cpu}", flush=True)
    # The same copy with Spark's parts alone: our source into a sink that drops the rows, and
    # ready-made rows (as many per task as ours) into it.
    progress, _, cpu = copy_query(stream_of(topic), SparkFloor.name())
    print(f"  the same query into a sink that drops the rows (our read, Spark's copy): after the first "
          f"{steady_rate(progress):,.0f} rows/s; CPU seconds: {cpu}", flush=True)
    floor = (spark.readStream.format(SparkFloor.name()).option("perBatch", _SINK_PER_TRIGGER)
             .option("total", args.records).option("tasks", args.partitions).load())
    progress, _, cpu = copy_query(floor, SparkFloor.name())
    print(f"  Spark's floor: ready-made rows into a sink that drops them, {_SINK_PER_TRIGGER:,} per micro-batch in "
          f"{args.partitions} tasks: after the first {steady_rate(progress):,.0f} rows/s; CPU seconds: {cpu}",
          flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
