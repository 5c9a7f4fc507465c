"""How long a partition reassignment takes, with and without a replication throttle.

    python -m raftkafka.bench.reassign [--mb 1024] [--partitions 4] [--throttle 20000000] [--json]

Two node processes (both brokers, node 1 also the controller). A topic of `--partitions`
partitions, all on broker 1 (RF 1), is filled with `--mb` MiB (100 KiB records, acks=1,
uncompressed). Then, through `python -m raftkafka reassign-partitions --execute`, every
partition gets a second replica on broker 2 (RF 1 -> 2): the time from the command until no
reassignment is listed is the copy of the whole topic. Then the replicas on broker 2 are removed
(their logs deleted) and the same reassignment runs with `--throttle B/s`; `--verify` clears
the throttle afterwards. Prints both durations and the bytes/s they amount to.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time

import trio

from raftkafka.bench.replication import ReplicationProcesses
from raftkafka.client import Admin
from storage.env import RealEnv

TOPIC = "bulk"
RECORD_BYTES = 100 * 1024


def _cli(bootstrap: str, *args: str) -> str:
    out = subprocess.run([sys.executable, "-m", "raftkafka", "reassign-partitions", "--bootstrap-server",
                          bootstrap, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"reassign-partitions {' '.join(args)}: {out.stdout}{out.stderr}")
    return out.stdout


def _plan(path: str, partitions: int, replicas: list[int]) -> str:
    with open(path, "w") as f:
        json.dump({"version": 1, "partitions": [{"topic": TOPIC, "partition": p, "replicas": replicas}
                                                for p in range(partitions)]}, f)
    return path


def _until_no_reassignment(bootstrap: str, timeout: float) -> float:
    async def poll() -> float:
        async with Admin(RealEnv(), bootstrap) as admin:
            start = time.monotonic()
            while await admin.list_partition_reassignments():
                if time.monotonic() - start > timeout:
                    raise TimeoutError("the reassignment did not finish")
                await trio.sleep(0.1)
            return time.monotonic()
    return trio.run(poll)


def _fill(bootstrap: str, partitions: int, mb: int) -> int:
    from confluent_kafka import Producer
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + 60
    while True:
        try:
            admin.create_topics([NewTopic(TOPIC, partitions, replica_assignment=[[1]] * partitions)])[TOPIC].result(10)
            break
        except Exception:  # noqa: BLE001 - the brokers are still starting
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    producer = Producer({"bootstrap.servers": bootstrap, "acks": 1, "linger.ms": 20, "enable.idempotence": False, "log_level": 0,
                         "message.max.bytes": 2_000_000, "queue.buffering.max.kbytes": 512 * 1024})
    value = b"x" * RECORD_BYTES
    count = mb * 1024 * 1024 // RECORD_BYTES
    for i in range(count):
        while True:
            try:
                producer.produce(TOPIC, value=value, partition=i % partitions)
                break
            except BufferError:
                producer.poll(0.05)
        producer.poll(0)
    if producer.flush(600) != 0:
        raise RuntimeError("records left unsent")
    return count * RECORD_BYTES


def _timed_copy(bootstrap: str, plan: str, throttle: int | None, timeout: float) -> float:
    args = ["--reassignment-json-file", plan, "--execute"]
    if throttle is not None:
        args += ["--throttle", str(throttle)]
    start = time.monotonic()
    _cli(bootstrap, *args)
    end = _until_no_reassignment(bootstrap, timeout)
    _cli(bootstrap, "--reassignment-json-file", plan, "--verify")  # clears the throttle
    return end - start


def run(mb: int, partitions: int, throttle: int) -> dict:
    base = tempfile.mkdtemp(prefix="raftkafka-reassign-bench-")
    cluster = ReplicationProcesses(base, n=2, controllers=(1,), static={
        "default.replication.factor": "1", "min.insync.replicas": "1", "message.max.bytes": "2000000"})
    try:
        cluster.format()
        for i in cluster.ids:
            cluster.start(i)
        size = _fill(cluster.bootstrap, partitions, mb)
        grow = _plan(f"{base}/grow.json", partitions, [1, 2])
        shrink = _plan(f"{base}/shrink.json", partitions, [1])
        unthrottled = _timed_copy(cluster.bootstrap, grow, None, 3600)
        _cli(cluster.bootstrap, "--reassignment-json-file", shrink, "--execute")
        _until_no_reassignment(cluster.bootstrap, 600)
        throttled = _timed_copy(cluster.bootstrap, grow, throttle, 3600)
        return {"bytes": size, "partitions": partitions,
                "unthrottled_s": round(unthrottled, 1), "unthrottled_MBps": round(size / unthrottled / 1e6, 1),
                "throttle_Bps": throttle,
                "throttled_s": round(throttled, 1), "throttled_MBps": round(size / throttled / 1e6, 1)}
    finally:
        cluster.stop_all()
        shutil.rmtree(base, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m raftkafka.bench.reassign")
    parser.add_argument("--mb", type=int, default=1024, help="MiB in the topic (default 1024)")
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--throttle", type=int, default=20_000_000, help="bytes/s for the throttled run")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.mb, args.partitions, args.throttle)
    if args.json:
        print(json.dumps(result))
        return
    print(f"reassignment of {result['bytes'] / 2**20:.0f} MiB in {result['partitions']} partitions (RF 1 -> 2)")
    print(f"  unthrottled: {result['unthrottled_s']} s ({result['unthrottled_MBps']} MB/s)")
    print(f"  throttled at {result['throttle_Bps']} B/s: {result['throttled_s']} s ({result['throttled_MBps']} MB/s)")


if __name__ == "__main__":
    main()
