"""Soak: a 3-node cluster under all three clients, the fuzzer and kill -9 / SIGSTOP of random nodes.

    python -m raftkafka.bench.soak --minutes 30 [--base-port P] [--data-dir D] [--seed S]

Starts three combined nodes (`python -m raftkafka node`, laid out as `dev --nodes 3`
does), creates topic `soak` (6 partitions, RF 3, min.insync.replicas 2) and runs until
the time is up:

- producers from confluent-kafka, kafka-python and aiokafka, acks=all and idempotent,
  each record's value unique; a record counts as acknowledged when its client says so;
- one consumer group per client (subscribe, auto commit), counting what they read;
- the protocol fuzzer (raftkafka.bench.fuzz) in rounds against a random node that is
  not being disturbed;
- every 30-60 s one disturbance of a random node: kill -9 (restarted 5-10 s later) or
  SIGSTOP (SIGCONT 5-20 s later);
- a monitor that samples every node's RSS once a second and restarts a node that exited
  without being killed (a violation).

At the end producers flush, a fresh consumer reads every partition from the beginning to
its high watermark, and the summary is printed. Exit status 1 on a violation: an
acknowledged record not read back, a node that exited unless killed, a node that could not
be restarted.
"""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import random
import resource
import shutil
import signal
import socket
import sys
import tempfile
import threading
import time

import trio

from raftkafka.bench.fuzz.runner import FuzzConfig, find_tracebacks, run_fuzz, traceback_class
from raftkafka.bench.processes import ports_free
from raftkafka.cli.dev import HOST, node_layout, prepare_node, spawn_node, voters_of, wait_ready
from raftkafka.cli.format_storage import random_uuid_text
from storage.env import RealEnv

TOPIC = "soak"
PARTITIONS = 6
NODE_MEMORY_LIMIT = 4 << 30  # address space per node: a runaway node fails alone, not the machine


class Soak:
    def __init__(self, args):
        self.args = args
        self.rng = random.Random(args.seed)
        self.deadline = time.monotonic() + args.minutes * 60
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.acked: dict[str, set[bytes]] = {"confluent": set(), "kafka-python": set(), "aiokafka": set()}
        self.sent = dict.fromkeys(self.acked, 0)
        self.produce_errors = dict.fromkeys(self.acked, 0)
        self.group_seen: dict[str, set[bytes]] = {k: set() for k in self.acked}
        self.client_errors: list[str] = []
        self.violations: list[str] = []
        self.events: list[str] = []
        self.kills = self.stops = 0
        self.peak_rss: dict[int, int] = {}
        self.disturbed: set[int] = set()  # node ids killed or stopped right now
        self.disturbances = 0  # disturbances begun so far, to tell which fuzz rounds overlapped one
        self.fuzz_cases = 0
        self.fuzz_findings: dict[str, int] = {}
        self.fuzz_findings_disturbed = 0  # findings of rounds a kill or a pause overlapped: expected
        self.fuzz_examples: list[str] = []
        self.procs: dict[int, object] = {}

    # ------------------------------------------------------------------ cluster

    def start_cluster(self) -> None:
        base = self.args.base_port or _free_base()
        self.data_dir = self.args.data_dir or tempfile.mkdtemp(prefix="raftkafka-soak-")
        self.layouts = {i: node_layout(i, 3, base, os.path.join(self.data_dir, f"node-{i}"),
                                       {"min.insync.replicas": 2, "default.replication.factor": 3})
                        for i in (1, 2, 3)}
        self.cluster_id = random_uuid_text(RealEnv())
        voters = voters_of(list(self.layouts.values()))
        for layout in self.layouts.values():
            prepare_node(layout, voters, self.cluster_id)
            self.spawn(layout.node_id)
        self.bootstrap = ",".join(f"{HOST}:{l.client_port}" for l in self.layouts.values())
        trio.run(self._wait_ready)
        print(f"cluster up: {self.bootstrap} (data {self.data_dir})", flush=True)

    async def _wait_ready(self) -> None:
        with trio.fail_after(120):
            await wait_ready({i: l.controller_port for i, l in self.layouts.items()}, self.cluster_id, [1, 2, 3])

    def spawn(self, node_id: int) -> None:
        self.procs[node_id] = spawn_node(self.layouts[node_id], preexec_fn=_limit_memory)

    def create_topic(self) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[TOPIC].result(60)

    def stop_cluster(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGCONT)
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(30)
            except Exception:
                proc.kill()
                proc.wait()

    # ------------------------------------------------------------------ chaos and monitoring

    def chaos(self) -> None:
        while not self._sleep(self.rng.uniform(30, 60)):
            node_id = self.rng.choice(sorted(self.layouts))
            proc = self.procs[node_id]
            with self.lock:
                self.disturbed.add(node_id)
                self.disturbances += 1
            if self.rng.random() < 0.5:
                self.kills += 1
                self.event(f"kill -9 node {node_id} (pid {proc.pid})")
                proc.kill()
                proc.wait()
                self._sleep(self.rng.uniform(5, 10), always=True)
                self.spawn(node_id)
                self.event(f"restarted node {node_id} (pid {self.procs[node_id].pid})")
                self._wait_listening(node_id)  # the fuzzer leaves it alone until then
            else:
                self.stops += 1
                self.event(f"SIGSTOP node {node_id} (pid {proc.pid})")
                proc.send_signal(signal.SIGSTOP)
                self._sleep(self.rng.uniform(5, 20), always=True)
                proc.send_signal(signal.SIGCONT)
                self.event(f"SIGCONT node {node_id}")
            with self.lock:
                self.disturbed.discard(node_id)

    def _wait_listening(self, node_id: int, timeout: float = 60.0) -> None:
        port = self.layouts[node_id].client_port
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                socket.create_connection((HOST, port), timeout=1).close()
                return
            except OSError:
                time.sleep(0.2)

    def monitor(self) -> None:
        while not self.stopping.is_set():
            for node_id, proc in list(self.procs.items()):
                code = proc.poll()
                with self.lock:
                    expected = node_id in self.disturbed
                if code is not None and not expected:
                    self.violations.append(f"node {node_id} (pid {proc.pid}) exited with code {code}")
                    self.event(f"node {node_id} exited unexpectedly ({code}); restarting it")
                    self.spawn(node_id)
                    continue
                rss = _rss_kb(proc.pid)
                if rss:
                    self.peak_rss[node_id] = max(self.peak_rss.get(node_id, 0), rss)
            time.sleep(1.0)

    def fuzz(self) -> None:
        seed = self.args.seed * 1000
        while not self.stopping.is_set():
            with self.lock:
                calm = [i for i in self.layouts if i not in self.disturbed]
            if not calm:
                time.sleep(1)
                continue
            layout = self.layouts[self.rng.choice(calm)]
            with self.lock:
                disturbances_before = self.disturbances
            seed += 1
            config = FuzzConfig(bootstrap=(HOST, layout.client_port), controller=(HOST, layout.controller_port),
                                cases=300, seed=seed, concurrency=4, isolate=False,
                                probe_every=10 ** 9)
            try:
                report = trio.run(run_fuzz, config)
            except Exception as exc:  # the fuzzer's own trouble must not end the soak
                self.client_errors.append(f"fuzzer: {exc!r}")
                time.sleep(1)
                continue
            self.fuzz_cases += report.cases_run
            with self.lock:
                overlapped = self.disturbances != disturbances_before or bool(self.disturbed)
            if overlapped:
                # A paused or killed node (this one, or the controller it forwards to) leaves
                # requests unanswered: not the fuzzer's finding.
                self.fuzz_findings_disturbed += len(report.findings)
            for finding in ([] if overlapped else report.findings):
                self.fuzz_findings[finding.kind] = self.fuzz_findings.get(finding.kind, 0) + 1
                if len(self.fuzz_examples) < 10:
                    self.fuzz_examples.append(f"{finding.kind} against node {layout.node_id}: [{finding.label}] "
                                              f"{finding.detail[:200]}")
            time.sleep(2.0)  # leave the clients most of the CPU

    # ------------------------------------------------------------------ clients

    def confluent_producer(self) -> None:
        from confluent_kafka import Producer

        producer = Producer({"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                             "linger.ms": 5, "message.timeout.ms": 300000, "log_level": 2})
        name, acked = "confluent", self.acked["confluent"]

        def delivered(err, msg):
            if err is None:
                acked.add(msg.value())
            else:
                self.produce_errors[name] += 1

        seq = 0
        while not self.stopping.is_set():
            try:
                producer.produce(TOPIC, value=b"%s-%d" % (name.encode(), seq), on_delivery=delivered)
                seq += 1
                self.sent[name] = seq
            except BufferError:
                pass
            producer.poll(0.01)
        producer.flush(300)

    def kafka_python_producer(self) -> None:
        from kafka import KafkaProducer

        name, acked = "kafka-python", self.acked["kafka-python"]
        producer = KafkaProducer(bootstrap_servers=self.bootstrap.split(","), acks="all", enable_idempotence=True,
                                 linger_ms=5, request_timeout_ms=30000, delivery_timeout_ms=300000)
        seq = 0
        while not self.stopping.is_set():
            value = b"%s-%d" % (name.encode(), seq)
            try:
                future = producer.send(TOPIC, value=value)
            except Exception as exc:
                self.client_errors.append(f"{name} send: {exc!r}")
                time.sleep(1)
                continue
            future.add_callback(lambda _meta, v=value: acked.add(v))
            future.add_errback(lambda _exc: self._count_error(name))
            seq += 1
            self.sent[name] = seq
            time.sleep(0.01)
        producer.flush(300)
        producer.close(30)

    def aiokafka_producer(self) -> None:
        asyncio.run(self._aiokafka_produce())

    async def _aiokafka_produce(self) -> None:
        from aiokafka import AIOKafkaProducer

        name, acked = "aiokafka", self.acked["aiokafka"]
        producer = AIOKafkaProducer(bootstrap_servers=self.bootstrap, acks="all", enable_idempotence=True,
                                    linger_ms=5, request_timeout_ms=30000)
        await producer.start()
        pending: set = set()
        seq = 0

        async def one(value: bytes) -> None:
            try:
                await (await producer.send(TOPIC, value=value))
                acked.add(value)
            except Exception:
                self._count_error(name)

        try:
            while not self.stopping.is_set():
                task = asyncio.ensure_future(one(b"%s-%d" % (name.encode(), seq)))
                pending.add(task)
                task.add_done_callback(pending.discard)
                seq += 1
                self.sent[name] = seq
                await asyncio.sleep(0.01)
            await asyncio.wait_for(asyncio.gather(*pending), 300)
        finally:
            await producer.stop()

    def _count_error(self, name: str) -> None:
        self.produce_errors[name] += 1

    def confluent_group(self) -> None:
        from confluent_kafka import Consumer

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak-confluent",
                             "auto.offset.reset": "earliest", "log_level": 2})
        consumer.subscribe([TOPIC])
        seen = self.group_seen["confluent"]
        while not self.stopping.is_set() or time.monotonic() < self.drain_until:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                seen.add(msg.value())
        consumer.close()

    def kafka_python_group(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(TOPIC, bootstrap_servers=self.bootstrap.split(","), group_id="soak-kafka-python",
                                 auto_offset_reset="earliest")
        seen = self.group_seen["kafka-python"]
        while not self.stopping.is_set() or time.monotonic() < self.drain_until:
            try:
                for records in consumer.poll(500).values():
                    seen.update(r.value for r in records)
            except Exception as exc:
                self.client_errors.append(f"kafka-python consumer: {exc!r}")
                time.sleep(1)
        consumer.close()

    def aiokafka_group(self) -> None:
        asyncio.run(self._aiokafka_consume())

    async def _aiokafka_consume(self) -> None:
        from aiokafka import AIOKafkaConsumer

        consumer = AIOKafkaConsumer(TOPIC, bootstrap_servers=self.bootstrap, group_id="soak-aiokafka",
                                    auto_offset_reset="earliest")
        await consumer.start()
        seen = self.group_seen["aiokafka"]
        try:
            while not self.stopping.is_set() or time.monotonic() < self.drain_until:
                try:
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        seen.update(r.value for r in records)
                except Exception as exc:
                    self.client_errors.append(f"aiokafka consumer: {exc!r}")
                    await asyncio.sleep(1)
        finally:
            await consumer.stop()

    def read_back(self) -> set[bytes]:
        """Every value in the topic: a fresh consumer from the beginning to each high watermark."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "soak-verify",
                             "enable.auto.commit": False, "log_level": 2})
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        positions = dict.fromkeys(ends, 0)
        values: set[bytes] = set()
        deadline = time.monotonic() + 300
        while any(positions[p] < ends[p] for p in ends) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.add(msg.value())
                positions[msg.partition()] = msg.offset() + 1
        consumer.close()
        return values

    # ------------------------------------------------------------------ the run

    def run(self) -> int:
        for name in ("kafka", "aiokafka"):  # their retries during a disturbance are expected, not news
            logging.getLogger(name).setLevel(logging.CRITICAL)
        started = time.monotonic()
        self.drain_until = float("inf")
        self.start_cluster()
        try:
            self.create_topic()
            threads = [threading.Thread(target=fn, name=fn.__name__, daemon=True) for fn in (
                self.monitor, self.confluent_producer, self.kafka_python_producer, self.aiokafka_producer,
                self.confluent_group, self.kafka_python_group, self.aiokafka_group, self.fuzz)]
            for t in threads:
                t.start()
            self.chaos()
            self.event("time is up: stopping producers, draining consumers")
            self.drain_until = time.monotonic() + 60
            self.stopping.set()
            for t in threads:
                t.join(400)
            read = self.read_back()
        finally:
            self.stopping.set()
            self.stop_cluster()
        return self.summary(read, time.monotonic() - started)

    def summary(self, read: set[bytes], elapsed: float) -> int:
        print(f"\nsoak: {elapsed / 60:.1f} min, {self.kills} kill -9, {self.stops} SIGSTOP, "
              f"{self.fuzz_cases} fuzz cases (findings: {self.fuzz_findings or 'none'}; "
              f"{self.fuzz_findings_disturbed} more in rounds a disturbance overlapped, not counted)")
        for name, acked in self.acked.items():
            lost = acked - read
            print(f"  {name:13} sent {self.sent[name]:7}  acked {len(acked):7}  failed {self.produce_errors[name]:5}  "
                  f"read back {len(acked & read):7}  lost {len(lost)}  group read {len(self.group_seen[name] & acked)}")
            if lost:
                self.violations.append(f"{name}: {len(lost)} acknowledged records not read back, e.g. "
                                       f"{sorted(lost)[:5]}")
        for node_id in sorted(self.layouts):
            print(f"  node {node_id}: peak RSS {self.peak_rss.get(node_id, 0) / 1024:.0f} MiB")
        tracebacks = {}
        for layout in self.layouts.values():
            with open(os.path.join(layout.data_dir, "node.log"), errors="replace") as f:
                for text in find_tracebacks(f.read()):
                    tracebacks[traceback_class(text)] = tracebacks.get(traceback_class(text), 0) + 1
        for cls, n in sorted(tracebacks.items(), key=lambda kv: -kv[1]):
            print(f"  traceback x{n}: {cls}")
        for example in self.fuzz_examples:
            print(f"  fuzz finding: {example}")
        for error in self.client_errors[:10]:
            print(f"  client error: {error}")
        for v in self.violations:
            print(f"VIOLATION {v}")
        print("result:", "FAIL" if self.violations else "OK", flush=True)
        if not self.args.keep and not self.args.data_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)
        return 1 if self.violations else 0

    def event(self, text: str) -> None:
        line = f"{time.strftime('%H:%M:%S')} {text}"
        self.events.append(line)
        print(line, flush=True)

    def _sleep(self, seconds: float, always: bool = False) -> bool:
        """Sleep; True when the soak's time is up (unless `always`: a disturbance is always undone)."""
        end = time.monotonic() + seconds
        if not always:
            end = min(end, self.deadline)
        while time.monotonic() < end:
            time.sleep(min(0.5, end - time.monotonic()))
        return time.monotonic() >= self.deadline


def _limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (NODE_MEMORY_LIMIT, NODE_MEMORY_LIMIT))


def _rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _free_base() -> int:
    """An even port P below the ephemeral range with P..P+5 free."""
    rng = random.Random()
    while True:
        base = rng.randrange(20000, 32760, 2)
        if ports_free(range(base, base + 6), HOST):
            return base


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m raftkafka.bench.soak", description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=30.0)
    p.add_argument("--seed", type=int, default=1, help="chooses the disturbances and the fuzz cases")
    p.add_argument("--base-port", type=int, help="node i serves P+2(i-1) and P+2(i-1)+1 (default: free ports)")
    p.add_argument("--data-dir", help="default: a temporary directory, removed afterwards")
    p.add_argument("--keep", action="store_true", help="keep the temporary data directory")
    return Soak(p.parse_args(argv)).run()


if __name__ == "__main__":
    sys.exit(main())
