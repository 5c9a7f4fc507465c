"""An in-process metadata cluster for tests: controllers and brokers as real nodes (Raft
driver, TCP transport on 127.0.0.1, controller service, broker lifecycle), each with an
in-memory disk that can crash."""
from __future__ import annotations

import uuid

import trio

from metadata.controller.client import ControllerClient, ControllerConnection
from raftkafka.bench.raft_quorum import free_ports
from raftkafka.node.assembly import ControllerNode
from raftkafka.node.config import load_config
from raftkafka.node.metadata_roles import MetadataApp
from storage.env import RealEnv
from storage.memfs import MemFileSystem
from storage.meta_properties import MetaProperties, VoterSpec, format_data_dir, uuid_to_str

CLUSTER = uuid_to_str(uuid.UUID(int=42))

FAST = {
    "controller.quorum.election.timeout.ms": 300,
    "controller.quorum.fetch.timeout.ms": 600,
    "controller.quorum.append.linger.ms": 5,
    "broker.heartbeat.interval.ms": 100,
    "broker.session.timeout.ms": 1500,
}


class MetadataCluster:
    def __init__(self, nursery, *, controllers=3, brokers=(), combined=(), settings=None):
        """`controllers` voters 1..n (plus `combined` ids that are also brokers), and
        broker-only observers with the ids in `brokers`."""
        self.nursery = nursery
        self.controller_ids = list(range(1, controllers + 1))
        self.combined = set(combined)
        self.broker_ids = list(brokers)
        self.ports = dict(zip(self.controller_ids, free_ports(len(self.controller_ids))))
        self.voters = ",".join(f"{i}@127.0.0.1:{p}" for i, p in self.ports.items())
        self.settings = {**FAST, **(settings or {})}
        self.fs = {i: MemFileSystem() for i in self.controller_ids + self.broker_ids}
        self.nodes: dict[int, ControllerNode] = {}
        self.scopes: dict[int, trio.CancelScope] = {}
        self.stopped: dict[int, trio.Event] = {}
        self.env = RealEnv(seed=99)

    async def format(self):
        for i, fs in sorted(self.fs.items()):
            meta = MetaProperties(CLUSTER, i, uuid_to_str(uuid.UUID(int=100 + i)))
            voters = [VoterSpec(n, "127.0.0.1", p) for n, p in self.ports.items()]
            await format_data_dir(fs, "/data", meta, voters)

    def roles(self, i):
        if i in self.broker_ids:
            return "broker"
        return "broker,controller" if i in self.combined else "controller"

    async def start(self, i):
        listeners = (f"CONTROLLER://127.0.0.1:{self.ports[i]}" if i in self.ports
                     else "PLAINTEXT://127.0.0.1:0")
        config = load_config({"node.id": i, "process.roles": self.roles(i), "log.dirs": "/data",
                              "listeners": listeners, **self.settings})
        env = RealEnv(seed=i * 1000 + len(self.scopes))
        env.fs = self.fs[i]
        node = self.nodes[i] = ControllerNode(env, config, app=MetadataApp(env, config))
        scope = self.scopes[i] = trio.CancelScope()
        stopped = self.stopped[i] = trio.Event()

        async def run(task_status=trio.TASK_STATUS_IGNORED):
            try:
                with scope:
                    await node.run(task_status=task_status)
            finally:
                stopped.set()

        await self.nursery.start(run)

    async def start_all(self):
        await self.format()
        for i in sorted(self.fs):
            await self.start(i)

    async def crash(self, i):
        """Stop node i; its disk keeps only what was fsynced. The disk is cut once the node's tasks
        have ended: a cancelled task already woken runs on to its next checkpoint (a process's last
        writes end with it), and must not meet a disk that is already gone."""
        self.scopes.pop(i).cancel()
        await self.stopped.pop(i).wait()
        self.fs[i].crash(self.env.rng)

    # ------------------------------------------------------------ observations
    def service(self, i):
        return self.nodes[i].app.controller.service

    def active_controller(self) -> int | None:
        for i in sorted(self.scopes):
            app = self.nodes[i].app
            if app.controller is not None and app.controller.service is not None \
                    and app.controller.service.active:
                return i
        return None

    async def wait_for(self, predicate, timeout=20.0, what="condition"):
        with trio.fail_after(timeout):
            while True:
                value = predicate()
                if value:
                    return value
                await trio.sleep(0.02)

    async def wait_active(self, timeout=20.0) -> int:
        return await self.wait_for(self.active_controller, timeout)

    def broker_image(self, i):
        return self.nodes[i].app.broker.follower.image

    def committed_image(self, i):
        return self.nodes[i].app.controller.state_machine.image

    def client(self, nursery) -> tuple[ControllerConnection, ControllerClient]:
        conn = ControllerConnection(self.env, {i: ("127.0.0.1", p) for i, p in self.ports.items()},
                                    cluster_id=CLUSTER)
        return conn, ControllerClient(conn, forwarder=self.broker_identity)

    def broker_identity(self) -> tuple[int, int] | None:
        """A live broker registration to forward admin requests as (metadata.controller.gate)."""
        for i, node in sorted(self.nodes.items()):
            broker = node.app.broker
            if broker is not None and broker.lifecycle is not None and broker.lifecycle.broker_epoch >= 0:
                return i, broker.lifecycle.broker_epoch
        return None


async def open_client(cluster: MetadataCluster, nursery) -> ControllerClient:
    conn, client = cluster.client(nursery)
    await nursery.start(conn.run)
    return client
