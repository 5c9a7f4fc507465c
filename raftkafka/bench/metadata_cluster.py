"""Metadata cluster benchmark: `python -m raftkafka.bench.metadata_cluster [--quick]`.

1. Topic creation: 3 controllers + 3 brokers as real processes; `--workers` clients each
   create one topic (3 partitions, RF 3) per request; throughput and latency percentiles.
2. Fencing: an in-process cluster (3 controllers, 3 brokers, in-memory disks) with
   `--fence-partitions` partitions led by one broker; that broker dies, and we time from the
   controller's fence decision to the last live broker publishing the fenced image.
3. Image load: a snapshot of `--load-partitions` partitions restored by a broker's
   MetadataFollower (decode + replay + first publish).
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import trio

from metadata.controller.client import ControllerClient, ControllerConnection
from metadata.controller.topics import CreatableTopic
from metadata.log_format import encode_snapshot
from metadata.metadata_follower import MetadataFollower
from metadata.snapshot import image_from_records
from raftkafka.bench.metadata_image import build_records
from raftkafka.bench.raft_quorum import free_ports, percentile
from raftkafka.node.assembly import ControllerNode
from raftkafka.node.config import load_config
from raftkafka.node.metadata_roles import MetadataApp
from storage.env import RealEnv
from storage.memfs import MemFileSystem
from storage.meta_properties import MetaProperties, VoterSpec, format_data_dir, uuid_to_str


# ----------------------------------------------------------------- topic creation


async def _wait_brokers(client: ControllerClient, n: int) -> None:
    """Until n brokers are unfenced; the client then forwards admin requests as one of them
    (the controller takes admin requests only from a registered broker)."""
    with trio.fail_after(60):
        while True:
            live = [b for b in (await client.describe_cluster()).brokers if not b.fenced]
            if len(live) >= n:
                client.forwarder = lambda b=live[0]: (b.broker_id, b.broker_epoch)
                return
            await trio.sleep(0.1)


CONTROLLERS = (1, 2, 3)
BROKERS = (4, 5, 6)
PROCESS_SETTINGS = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "3000",
    "metadata.log.max.records.between.snapshots": "400",
}


class MetadataProcesses:
    """3 controllers + 3 brokers as `python -m raftkafka node` children; always stop_all()."""

    def __init__(self, base: str, settings: dict[str, str] | None = None):
        self.base = base
        self.settings = {**PROCESS_SETTINGS, **(settings or {})}
        self.ports = dict(zip(CONTROLLERS, free_ports(len(CONTROLLERS))))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(self.ports.items()))
        self.procs: dict[int, subprocess.Popen] = {}

    def cli(self, *args):
        return subprocess.run([sys.executable, "-m", "raftkafka", *args], capture_output=True,
                              text=True, check=True).stdout.strip()

    def data_dir(self, i):
        return os.path.join(self.base, f"node{i}")

    def format(self) -> str:
        cluster_id = self.cli("format", "--random-uuid")
        for i in CONTROLLERS + BROKERS:
            self.cli("format", "--cluster-id", cluster_id, "--node-id", str(i), "--log-dir",
                     self.data_dir(i), "--initial-voters", self.voters)
        return cluster_id

    def start(self, i):
        if i in CONTROLLERS:
            roles, listeners = "controller", f"CONTROLLER://127.0.0.1:{self.ports[i]}"
        else:
            roles, listeners = "broker", "PLAINTEXT://127.0.0.1:0"
        args = [sys.executable, "-m", "raftkafka", "node", "--roles", roles, "--node-id", str(i),
                "--log-dir", self.data_dir(i), "--listeners", listeners]
        for name, value in sorted(self.settings.items()):
            args += ["--set", f"{name}={value}"]
        with open(os.path.join(self.base, f"node{i}.log"), "ab") as out:
            self.procs[i] = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT)

    def kill(self, i):
        proc = self.procs.pop(i)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)

    def stop_all(self):
        for i in list(self.procs):
            self.kill(i)


async def creation(topics: int, workers: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="raftkafka-bench-") as base:
        procs = MetadataProcesses(base)
        try:
            cluster_id = procs.format()
            for i in (1, 2, 3, 4, 5, 6):
                procs.start(i)
            conn = ControllerConnection(RealEnv(), {i: ("127.0.0.1", p) for i, p in procs.ports.items()},
                                        cluster_id=cluster_id)
            client = ControllerClient(conn)
            latencies: list[float] = []
            async with trio.open_nursery() as nursery:
                await nursery.start(conn.run)
                await _wait_brokers(client, 3)
                names = iter(f"bench-{i:06d}" for i in range(topics))

                async def worker():
                    for name in names:
                        start = time.perf_counter()
                        reply = await client.create_topics([CreatableTopic(name, 3, 3)])
                        assert reply.results[0].error == 0, reply.results[0]
                        latencies.append(time.perf_counter() - start)

                start = time.perf_counter()
                async with trio.open_nursery() as pool:
                    for _ in range(workers):
                        pool.start_soon(worker)
                elapsed = time.perf_counter() - start
                nursery.cancel_scope.cancel()
        finally:
            procs.stop_all()
    latencies.sort()
    return {"topics": topics, "workers": workers, "topics_per_s": round(topics / elapsed, 1),
            "p50_ms": round(percentile(latencies, 50) * 1000, 2),
            "p99_ms": round(percentile(latencies, 99) * 1000, 2)}


# ------------------------------------------------------------------------ fencing


class _FenceWatch:
    name = "fence-watch"

    def __init__(self, victim: int):
        self.victim, self.at = victim, None

    def publish(self, delta, image):
        reg = image.brokers.get(self.victim)
        if self.at is None and reg is not None and reg.fenced and self.victim in delta.changed_brokers():
            self.at = time.perf_counter()


async def fencing(partitions: int) -> dict:
    ports = dict(zip((1, 2, 3), free_ports(3)))
    brokers = (101, 102, 103)
    cluster_id = uuid_to_str(uuid.UUID(int=5))
    nodes, scopes = {}, {}
    async with trio.open_nursery() as nursery:
        for i in (1, 2, 3) + brokers:
            fs = MemFileSystem()
            await format_data_dir(fs, "/data", MetaProperties(cluster_id, i, uuid_to_str(uuid.UUID(int=i))),
                                  [VoterSpec(n, "127.0.0.1", p) for n, p in ports.items()])
            config = load_config({
                "node.id": i, "process.roles": "broker" if i in brokers else "controller",
                "log.dirs": "/data", "broker.heartbeat.interval.ms": 500,
                "broker.session.timeout.ms": 3000,
                "listeners": f"CONTROLLER://127.0.0.1:{ports[i]}" if i in ports else "PLAINTEXT://127.0.0.1:0"})
            env = RealEnv(seed=i)
            env.fs = fs
            nodes[i] = ControllerNode(env, config, app=MetadataApp(env, config))
            scopes[i] = trio.CancelScope()

            async def run(node=nodes[i], scope=scopes[i], task_status=trio.TASK_STATUS_IGNORED):
                with scope:
                    await node.run(task_status=task_status)

            await nursery.start(run)
        conn = ControllerConnection(RealEnv(), {i: ("127.0.0.1", p) for i, p in ports.items()},
                                    cluster_id=cluster_id)
        client = ControllerClient(conn)
        await nursery.start(conn.run)
        await _wait_brokers(client, 3)
        per_topic = 100
        total = partitions * 3  # leaders spread evenly over 3 brokers
        for t in range(0, total // per_topic, 10):
            reply = await client.create_topics([CreatableTopic(f"f{t + k:05d}", per_topic, 3)
                                                for k in range(10)], timeout_s=120)
            assert all(r.error == 0 for r in reply.results)
        victim = 102
        watches = {b: _FenceWatch(victim) for b in brokers if b != victim}
        for b, w in watches.items():
            nodes[b].app.broker.add_publisher(w)
        active = next(i for i in (1, 2, 3) if nodes[i].app.controller.service.active)
        service = nodes[active].app.controller.service
        led = service.image.partitions_led_by(victim)
        scopes[victim].cancel()
        with trio.fail_after(120):
            while any(w.at is None for w in watches.values()) or not service.fenced_log:
                await trio.sleep(0.01)
        # fenced_log holds trio's clock; convert through "now" on both clocks.
        decided = time.perf_counter() - (trio.current_time() - service.fenced_log[0][0])
        last = max(w.at for w in watches.values())
        nursery.cancel_scope.cancel()
    return {"partitions_moved": led, "fence_to_last_broker_s": round(last - decided, 3)}


# --------------------------------------------------------------------- image load


def image_load(partitions: int) -> dict:
    image = image_from_records(build_records(partitions, 10, 100, 3))
    data = encode_snapshot(image)
    follower = MetadataFollower()
    start = time.perf_counter()
    follower.restore((image.offset + 1, 1), data)
    follower.observe_leader_high_watermark(image.offset + 1)
    elapsed = time.perf_counter() - start
    assert follower.caught_up and follower.image.partition_count() == partitions
    return {"partitions": partitions, "snapshot_mb": round(len(data) / 1e6, 1),
            "load_s": round(elapsed, 3)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topics", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--fence-partitions", type=int, default=10_000)
    ap.add_argument("--load-partitions", type=int, default=100_000)
    ap.add_argument("--quick", action="store_true", help="small sizes, for a smoke run")
    args = ap.parse_args(argv)
    if args.quick:
        args.topics, args.fence_partitions, args.load_partitions = 100, 600, 10_000
    random.seed(0)
    out = {"image_load": image_load(args.load_partitions)}
    print(json.dumps(out), flush=True)
    out["creation"] = trio.run(creation, args.topics, args.workers)
    print(json.dumps({"creation": out["creation"]}), flush=True)
    out["fencing"] = trio.run(fencing, args.fence_partitions)
    print(json.dumps({"fencing": out["fencing"]}), flush=True)


if __name__ == "__main__":
    main()
