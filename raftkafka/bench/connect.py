"""Benchmark: connect-standalone (FileStreamSource, FileStreamSink) and mirror, as real processes.

    python -m raftkafka.bench.connect --dev-nodes 1 [--records 200000]
    python -m raftkafka.bench.connect --dev-nodes 3     # two 3-node clusters (RF=3), six node processes
    python -m raftkafka.bench.connect --dev-nodes 3 --mirror-only    # the mirror, both modes only

1. FileStreamSource: a file of N lines of 100 bytes (StringConverter) into a 1-partition topic;
   records/s until the topic holds all N.
2. FileStreamSink: that topic into a file; records/s until the file holds all N lines.
3. mirror: N records of 100 bytes produced beforehand into 4 topics of 4 partitions on cluster A,
   copied to cluster B (DefaultReplicationPolicy, RF as the clusters'); records/s from the
   mirror's start until B's remote topics hold all N. Run three times, side by side, each on
   its own topics: at-least-once (the default); exactly-once (`B.exactly.once.source.support =
   enabled`, one transaction per batch polled); exactly-once-1s (`transaction.boundary =
   interval`, one transaction a second). B's end offsets count transaction markers too
   (one per partition a transaction wrote), so the exactly-once clock may stop by that many
   offsets early; the markers' share is printed after the run.
Each clock starts when the process is launched, so start-up (connecting, joining the group,
creating topics) is included.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

from raftkafka.bench.spark_read import DevCluster, produce


def _end_offsets(admin, topics: dict[str, int]) -> int:
    """Records in `topics` (a BlockingAdmin asks); 0 while they do not exist yet."""
    from raftkafka.client import KafkaError

    try:
        found = admin.list_offsets({(t, p): "latest" for t, n in topics.items() for p in range(n)})
    except KafkaError:
        return 0
    return sum(offset for offset, _ in found.values())


def _lines(path: str) -> int:
    try:
        with open(path, "rb") as f:
            return sum(chunk.count(b"\n") for chunk in iter(lambda: f.read(1 << 20), b""))
    except FileNotFoundError:
        return 0


def _timed(args: list[str], cwd: str, progress, what: str, records: int) -> None:
    """Run the command until `progress()` (records done) reaches `records`; print the rate over
    the whole run and over the part after the first 10 % (start-up excluded)."""
    proc = subprocess.Popen([sys.executable, "-m", "raftkafka", *args], cwd=cwd,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.perf_counter()
    tenth = None
    try:
        while (done := progress()) < records:
            if tenth is None and done >= records // 10:
                tenth = (time.perf_counter(), done)
            if proc.poll() is not None:
                raise RuntimeError(f"{what}: the process exited ({proc.returncode})")
            time.sleep(0.1)
        ended = time.perf_counter()
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
    steady = ""
    if tenth is not None and ended > tenth[0]:
        steady = f"; after the first 10 %: {(records - tenth[1]) / (ended - tenth[0]):,.0f} records/s"
    print(f"{what}: {records:,} records in {ended - started:.1f}s from launch = "
          f"{records / (ended - started):,.0f} records/s{steady}", flush=True)


def bench_connect(bootstrap: str, records: int, work: str) -> None:
    with open(os.path.join(work, "in.txt"), "w") as f:
        for i in range(records):
            f.write(f"{i:010d} {'x' * 89}\n")
    with open(os.path.join(work, "worker.properties"), "w") as f:
        f.write(f"bootstrap.servers={bootstrap}\n"
                "key.converter=org.apache.kafka.connect.storage.StringConverter\n"
                "value.converter=org.apache.kafka.connect.storage.StringConverter\n"
                f"offset.storage.file.filename={work}/connect.offsets\noffset.flush.interval.ms=10000\n")
    with open(os.path.join(work, "source.properties"), "w") as f:
        f.write("name=bench-source\nconnector.class=FileStreamSource\nfile=in.txt\ntopic=bench-connect\n")
    with open(os.path.join(work, "sink.properties"), "w") as f:
        f.write("name=bench-sink\nconnector.class=FileStreamSink\nfile=out.txt\ntopics=bench-connect\n")
    from raftkafka.client.blocking import BlockingAdmin

    with BlockingAdmin(bootstrap) as admin:
        admin.create_topic("bench-connect", 1)
        _timed(["connect-standalone", "worker.properties", "source.properties"], work,
               lambda: _end_offsets(admin, {"bench-connect": 1}), "FileStreamSource file -> topic", records)
    _timed(["connect-standalone", "worker.properties", "sink.properties"], work,
           lambda: _lines(os.path.join(work, "out.txt")), "FileStreamSink topic -> file", records)


def bench_mirror(source: str, target: str, records: int, nodes: int, work: str, mode: str) -> None:
    topics = {f"bench-mirror-{mode}-{i}": 4 for i in range(4)}
    for topic in topics:
        produce(source, topic, records // len(topics), 4)
    with open(os.path.join(work, f"mm2-{mode}.properties"), "w") as f:
        f.write(f"clusters = A, B\nA.bootstrap.servers = {source}\nB.bootstrap.servers = {target}\n"
                f"A->B.enabled = true\nA->B.topics = bench-mirror-{mode}-.*\n"
                f"replication.factor = {nodes}\noffset-syncs.topic.replication.factor = {nodes}\n"
                f"checkpoints.topic.replication.factor = {nodes}\noffset.storage.replication.factor = {nodes}\n"
                f"heartbeats.topic.replication.factor = {nodes}\n"
                "offset.flush.interval.ms = 10000\n"
                f"B.exactly.once.source.support = {'disabled' if mode == 'at-least-once' else 'enabled'}\n"
                + ("transaction.boundary = interval\ntransaction.boundary.interval.ms = 1000\n"
                   if mode == "exactly-once-1s" else ""))
    remote = {f"A.{t}": n for t, n in topics.items()}
    from raftkafka.client.blocking import BlockingAdmin

    with BlockingAdmin(target) as admin:
        copied = records // len(topics) * len(topics)
        _timed(["mirror", f"mm2-{mode}.properties"], work, lambda: _end_offsets(admin, remote),
               f"mirror A -> B, {mode}", copied)
        if mode != "at-least-once":
            markers = _end_offsets(admin, remote) - copied
            print(f"  transaction markers: {markers:,} offsets ({markers / copied:.1%} of the records)", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(prog="python -m raftkafka.bench.connect")
    parser.add_argument("--dev-nodes", type=int, default=1, help="nodes of each of the two dev clusters")
    parser.add_argument("--base-port", type=int, default=29092, help="cluster A's; cluster B's is 20 above")
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--mirror-only", action="store_true", help="skip the FileStream connectors")
    args = parser.parse_args(argv)
    a = DevCluster(args.dev_nodes, args.base_port)
    try:
        b = DevCluster(args.dev_nodes, args.base_port + 20)
        try:
            with tempfile.TemporaryDirectory(prefix="raftkafka-bench-connect-") as work:
                print(f"two clusters of {args.dev_nodes} node(s); {args.records:,} records of 100 bytes", flush=True)
                if not args.mirror_only:
                    bench_connect(a.bootstrap, args.records, work)
                for mode in ("at-least-once", "exactly-once", "exactly-once-1s"):
                    bench_mirror(a.bootstrap, b.bootstrap, args.records, args.dev_nodes, work, mode)
        finally:
            b.stop()
    finally:
        a.stop()


if __name__ == "__main__":
    main()
