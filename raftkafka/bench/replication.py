"""Replication benchmark and process harness: 3 combined nodes, RF=3, acks=all.

    python -m raftkafka.bench.replication [--seconds 10] [--rate 10000] [--size 100]

prints JSON: the unthrottled acks=all throughput (records/s) and, at `--rate`
records/s, the p50/p99 end-to-end latency (librdkafka producer with acks=all
→ librdkafka consumer, measured from the send timestamp inside each value).

`ReplicationProcesses` starts each node as its own OS process
(`python -m raftkafka node --roles broker,controller`), so tests can kill -9
or SIGSTOP one.
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

from raftkafka.bench.raft_quorum import free_ports, percentile

__all__ = ["ReplicationProcesses", "NODE_SETTINGS", "BROKER_STATIC"]

NODE_SETTINGS = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "250",
    "broker.session.timeout.ms": "2000",
}
BROKER_STATIC = {
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.backoff.ms": "100",
    "replica.fetch.wait.max.ms": "200",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
}


class ReplicationProcesses:
    """N combined (controller + broker) nodes as child processes; always call stop_all()."""

    def __init__(self, base: str, n: int = 3, *, static: dict[str, str] | None = None,
                 settings: dict[str, str] | None = None, controllers: tuple[int, ...] | None = None):
        """Nodes 1..n run the broker role; `controllers` (default: all) also run the controller role."""
        self.base = base
        self.ids = tuple(range(1, n + 1))
        self.controller_ids = tuple(controllers or self.ids)
        ports = free_ports(2 * n)
        self.controller_ports = dict(zip(self.controller_ids, ports[:len(self.controller_ids)]))
        self.kafka_ports = dict(zip(self.ids, ports[n:]))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(self.controller_ports.items()))
        self.static = {**BROKER_STATIC, **(static or {})}
        self.settings = {**NODE_SETTINGS, **(settings or {})}
        self.procs: dict[int, subprocess.Popen] = {}
        self.cluster_id = ""

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{p}" for _, p in sorted(self.kafka_ports.items()))

    def data_dir(self, i: int) -> str:
        return os.path.join(self.base, f"node{i}")

    def kafka_dir(self, i: int) -> str:
        return self.data_dir(i)  # partition logs live next to the metadata log (log.dirs)

    def format(self) -> str:
        def cli(*args):
            return subprocess.run([sys.executable, "-m", "raftkafka", *args], capture_output=True,
                                  text=True, check=True).stdout.strip()
        self.cluster_id = cli("format", "--random-uuid")
        for i in self.ids:
            cli("format", f"--cluster-id={self.cluster_id}", "--node-id", str(i), "--log-dir",
                self.data_dir(i), "--initial-voters", self.voters)
        return self.cluster_id

    def start(self, i: int) -> None:
        listeners = f"PLAINTEXT://127.0.0.1:{self.kafka_ports[i]}"
        roles = "broker"
        if i in self.controller_ports:
            listeners = f"CONTROLLER://127.0.0.1:{self.controller_ports[i]},{listeners}"
            roles = "broker,controller"
        args = [sys.executable, "-m", "raftkafka", "node", "--roles", roles, "--node-id", str(i),
                "--log-dir", self.data_dir(i), "--listeners", listeners]
        for name, value in sorted({**self.settings, **self.static}.items()):
            args += ["--set", f"{name}={value}"]
        with open(os.path.join(self.base, f"node{i}.log"), "ab") as out:
            self.procs[i] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def kill(self, i: int) -> None:
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def signal(self, i: int, signum: int) -> None:
        self.procs[i].send_signal(signum)

    def stop_all(self) -> None:
        for i in list(self.procs):
            try:
                self.procs[i].send_signal(signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.kill(i)


# ------------------------------------------------------------------ the benchmark


def wait_for_topic(bootstrap: str, topic: str, timeout: float = 60.0) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": bootstrap})
    deadline = time.monotonic() + timeout
    while True:
        try:
            admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(10)
            break
        except Exception as exc:  # noqa: BLE001 - brokers still starting, or already created
            if "TOPIC_ALREADY_EXISTS" in str(exc) or "already exists" in str(exc):
                break
            if time.monotonic() > deadline:
                raise
            time.sleep(0.3)
    while time.monotonic() < deadline:
        md = admin.list_topics(topic, timeout=5).topics.get(topic)
        if md is not None and md.error is None and md.partitions and len(md.partitions[0].isrs) == 3:
            return
        time.sleep(0.2)
    raise TimeoutError(f"topic {topic} has no full ISR")


def produce_run(bootstrap: str, topic: str, seconds: float, rate: float | None, size: int) -> dict:
    """Produce for `seconds` (at `rate` records/s, or as fast as possible) and consume
    concurrently; returns throughput and end-to-end latency percentiles."""
    import threading

    from confluent_kafka import OFFSET_END, Consumer, Producer, TopicPartition
    latencies: list[float] = []
    stop = threading.Event()

    def consume():
        c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{time.time_ns()}",
                      "auto.offset.reset": "latest", "enable.auto.commit": False, "fetch.wait.max.ms": 10})
        c.assign([TopicPartition(topic, 0, OFFSET_END)])
        while not stop.is_set():
            for m in c.consume(500, 0.002):  # short timeout: consume() waits for a full batch
                if m.error() is None:
                    latencies.append(time.time() - float(m.value()[:20]))
        c.close()

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()
    time.sleep(2.0)
    p = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "enable.idempotence": False,
                  "queue.buffering.max.messages": 1_000_000})
    acked = [0]

    def done(err, _msg):
        if err is None:
            acked[0] += 1
    pad = b"x" * max(0, size - 20)
    sent = 0
    start = time.time()
    while (now := time.time()) - start < seconds:
        if rate is not None and sent >= rate * (now - start):
            p.poll(0.0005)
            continue
        try:
            p.produce(topic, b"%20.6f" % time.time() + pad, on_delivery=done)
            sent += 1
        except BufferError:
            p.poll(0.01)
        if sent % 1000 == 0:
            p.poll(0)
    p.flush(60)
    elapsed = time.time() - start
    time.sleep(1.0)
    stop.set()
    reader.join(10)
    latencies.sort()
    return {"sent": sent, "acked": acked[0], "acked_per_s": round(acked[0] / elapsed),
            "e2e_p50_ms": round(percentile(latencies, 50) * 1000, 2) if latencies else None,
            "e2e_p99_ms": round(percentile(latencies, 99) * 1000, 2) if latencies else None,
            "consumed": len(latencies)}


def main(argv=None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=float, default=10000.0)
    ap.add_argument("--size", type=int, default=100)
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="raftkafka-repl-bench-") as base:
        procs = ReplicationProcesses(base)
        try:
            procs.format()
            for i in procs.ids:
                procs.start(i)
            wait_for_topic(procs.bootstrap, "bench")
            out = {"nodes": 3, "rf": 3, "acks": "all", "record_bytes": args.size,
                   "max": produce_run(procs.bootstrap, "bench", args.seconds, None, args.size),
                   f"at_{int(args.rate)}_per_s": produce_run(procs.bootstrap, "bench", args.seconds,
                                                             args.rate, args.size)}
        finally:
            procs.stop_all()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
