"""3 controllers + 3 brokers as real `python -m raftkafka node` processes on loopback.

Create 200 topics x 3 partitions (RF 3) and kill -9 the active controller in the middle:
every acknowledged topic exists exactly once, on the new controller and in every live
broker's metadata (read back from its data dir). Then kill -9 a broker: once its session
lapses its partitions have new leaders from their ISR, with leader epochs moved up by one.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
import trio

from metadata.controller.topics import CreatableTopic
from metadata.controller_client import (
    ControllerClient, ControllerConnection, ControllerUnavailableError,
)
from metadata.errors import Errors
from metadata.metadata_follower import MetadataFollower
from raft.node_storage import NodeStorage
from raftkafka.bench.raft_quorum import free_ports
from storage.env import RealEnv, RealFileSystem

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONTROLLERS = (1, 2, 3)
BROKERS = (4, 5, 6)
SETTINGS = {
    "controller.quorum.election.timeout.ms": "500",
    "controller.quorum.fetch.timeout.ms": "1000",
    "broker.heartbeat.interval.ms": "300",
    "broker.session.timeout.ms": "3000",
    "metadata.log.max.records.between.snapshots": "400",
}


class Processes:
    def __init__(self, base: str):
        self.base = base
        self.ports = dict(zip(CONTROLLERS, free_ports(len(CONTROLLERS))))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in sorted(self.ports.items()))
        self.procs: dict[int, subprocess.Popen] = {}

    def cli(self, *args):
        return subprocess.run([sys.executable, "-m", "raftkafka", *args], capture_output=True,
                              text=True, check=True).stdout.strip()

    def data_dir(self, i):
        return os.path.join(self.base, f"node{i}")

    def format(self):
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
        for name, value in sorted(SETTINGS.items()):
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


async def broker_image(data_dir: str):
    """What a broker's loader holds: its snapshot + every entry on its disk, replayed."""
    storage = NodeStorage(RealFileSystem(), data_dir)
    try:
        _, log = await storage.load()
    finally:
        storage.close()
    follower = MetadataFollower()
    follower.restore(log.snapshot_id, log.snapshot)
    entries = [e for e in log.entries if e.offset >= log.snapshot_id[0]]
    follower.observe_leader_high_watermark(log.end_offset)
    if entries:
        follower.apply(entries, log.end_offset)
    return follower.image


async def test_topics_survive_controller_kill_and_a_dead_broker_loses_leadership(tmp_path):
    procs = Processes(str(tmp_path))
    try:
        cluster_id = procs.format()
        for i in CONTROLLERS + BROKERS:
            procs.start(i)
        env = RealEnv()
        conn = ControllerConnection(env, {i: ("127.0.0.1", p) for i, p in procs.ports.items()},
                                    cluster_id=cluster_id)
        client = ControllerClient(conn)
        async with trio.open_nursery() as nursery:
            await nursery.start(conn.run)

            async def describe():
                return await client.describe_cluster(timeout_s=30)

            with trio.fail_after(60):
                while True:
                    view = await describe()
                    if [b.broker_id for b in view.brokers if not b.fenced] == list(BROKERS):
                        break
                    await trio.sleep(0.1)

            acked: list[str] = []
            names = iter(f"topic-{i:03d}" for i in range(200))

            async def worker():
                for name in names:
                    while True:
                        try:
                            reply = await client.create_topics([CreatableTopic(name, 3, 3)],
                                                               timeout_s=30)
                        except ControllerUnavailableError:
                            continue
                        code = reply.results[0].error
                        if code in (Errors.NONE, Errors.TOPIC_ALREADY_EXISTS):
                            acked.append(name)
                            break

            with trio.fail_after(120):
                async with trio.open_nursery() as workers:
                    for _ in range(8):
                        workers.start_soon(worker)
                    while len(acked) < 60:
                        await trio.sleep(0.01)
                    killed = conn.leader
                    procs.kill(killed)
            assert len(acked) == 200
            view = await describe()
            assert conn.leader != killed
            by_topic: dict[str, list] = {}
            for p in view.partitions:
                by_topic.setdefault(p.topic, []).append(p)
            assert set(acked) <= set(by_topic)
            assert all(sorted(p.partition for p in by_topic[t]) == [0, 1, 2] for t in acked)
            assert all(len(p.replicas) == 3 and p.leader in BROKERS for p in view.partitions)

            # kill -9 a broker: after its session its partitions get leaders from the ISR.
            victim = 5
            before = {(p.topic, p.partition): p for p in view.partitions}
            led = [k for k, p in before.items() if p.leader == victim]
            assert led
            procs.kill(victim)
            with trio.fail_after(60):
                while True:
                    view = await describe()
                    if next(b for b in view.brokers if b.broker_id == victim).fenced:
                        break
                    await trio.sleep(0.2)
            after = {(p.topic, p.partition): p for p in view.partitions}
            for key in led:
                assert after[key].leader in before[key].isr and after[key].leader != victim
                assert after[key].leader_epoch == before[key].leader_epoch + 1
            # The live brokers caught up with that; read their metadata back from disk.
            with trio.fail_after(30):
                while True:
                    view = await describe()
                    offsets = {b.broker_id: b.metadata_offset for b in view.brokers}
                    if all(offsets[b] >= view.offset for b in (4, 6)):
                        break
                    await trio.sleep(0.2)
            nursery.cancel_scope.cancel()
        procs.stop_all()
        for b in (4, 6):
            image = await broker_image(procs.data_dir(b))
            names = [t.name for t in image.topics_by_id.values()]
            assert len(names) == len(set(names))
            assert set(acked) <= set(names)
            for key in led:
                part = image.topic(key[0]).partitions[key[1]]
                assert part.leader == after[key].leader
                assert part.leader_epoch == after[key].leader_epoch
    finally:
        procs.stop_all()
