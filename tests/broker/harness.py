"""Test harness for the broker: an in-process controller and a raw protocol client.

NOT a shipped feature. `InProcessController` implements the broker's
ControllerChannel by running the REAL pure controller logic
(metadata.controller.*) against its own MetadataImage and publishing each
committed batch, as a delta, to every broker — standing in for the active
controller + Raft + MetadataLoader until those exist.

`BrokerCluster` runs N brokers inside one trio run (each with its own data dir
and port, all registered with the in-process controller). `ThreadedCluster`
runs such a cluster in a background thread with RealEnv on 127.0.0.1, for the
end-to-end tests that drive real Kafka clients.
"""
from __future__ import annotations

import random
import tempfile
import threading
import uuid
from contextlib import asynccontextmanager

import trio

from broker import Broker, BrokerConfig, ControllerReply
from metadata.controller.acls import create_acls, delete_acls
from metadata.controller.alter_partition import alter_partition
from metadata.controller.brokers import fence_broker
from metadata.controller.dynamic_configs import alter_configs, incremental_alter_configs
from metadata.controller.heartbeats import BrokerHeartbeatManager
from metadata.controller.replication import elect_leaderless, remove_broker_from_isrs
from metadata.controller.client_quotas import alter_client_quotas
from metadata.controller.scram import alter_user_scram_credentials
from metadata.controller.elect_leaders import ElectionType, elect_leaders
from metadata.controller.reassignment import alter_partition_reassignments, list_partition_reassignments
from metadata.controller.topics import create_partitions, create_topics, delete_topics
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, METADATA_VERSION
from metadata.records import BrokerRegistrationChange, Endpoint, FeatureLevel, RegisterBroker
from metadata.snapshot import image_to_records
from metadata.controller.mutation_quota import MutationQuotas
from storage.env import RealEnv
from storage.memfs import MemFileSystem
from wire.protocol import FrameReader, decode_response, encode_request


class InProcessController:
    """ControllerChannel for tests: pure controller functions + publish to the brokers."""

    def __init__(self, *, static=None, seed: int = 0):
        self.image = EMPTY_IMAGE
        self.brokers: list[Broker] = []
        self.static = dict(static or {})
        self.rng = random.Random(seed)
        self.next_offset = 0
        self.calls: list[str] = []
        # Tests hold AlterPartition answers here (the leader must keep its old ISR meanwhile).
        self.alter_partition_gate: trio.Event | None = None
        self.alter_partition_requests: list = []
        self.mutation_quotas = MutationQuotas()
        self.now = 0.0  # the controller's clock for controller_mutation_rate (tests move it)

    def commit(self, records) -> int:
        """Append one batch: replay it, publish (delta, image) to every broker; returns its last offset."""
        if not records:
            return -1
        delta = MetadataDelta(self.image)
        for rec in records:
            delta.replay(rec)
        last = self.next_offset + len(records) - 1
        self.next_offset = last + 1
        delta.set_provenance(last, 1)
        self.image = delta.apply()
        for b in self.brokers:
            b.publish(delta, self.image)
        return last

    def attach(self, broker: Broker) -> None:
        """Install a broker as a publisher; it first gets the whole state as one delta."""
        self.brokers.append(broker)
        full = MetadataDelta(EMPTY_IMAGE)
        for rec in image_to_records(self.image):
            full.replay(rec)
        full.set_provenance(self.image.offset, self.image.epoch)
        broker.publish(full, self.image)

    def register(self, node_id: int, host: str, port: int, *, rack=None, fenced=False) -> int:
        recs = []
        if METADATA_VERSION not in self.image.features:
            recs.append(FeatureLevel(METADATA_VERSION, 1))
        epoch = 100 + node_id
        existing = self.image.brokers.get(node_id)
        if existing is not None:
            # A new incarnation (KIP-966: it did not shut down cleanly, so its log may have lost
            # unflushed data): out of every ISR and ELR first, as the real controller does.
            epoch = existing.epoch + 1000
            recs += remove_broker_from_isrs(self.image, node_id, unclean_shutdown=True, static=self.static)
        recs.append(RegisterBroker(node_id, uuid.UUID(int=node_id + 1), epoch,
                                   endpoints=(Endpoint("PLAINTEXT", host, port),), rack=rack, fenced=fenced))
        last = self.commit(recs)
        if existing is not None and not fenced:
            elections = elect_leaderless(self.image, static=self.static)
            if elections:
                last = self.commit(elections)
        return last

    def fence(self, node_id: int) -> int:
        """What the controller does when a broker's session lapses: ISRs and leadership move off it."""
        hb = BrokerHeartbeatManager(session_timeout=9.0)
        last = -1
        for batch in fence_broker(self.image, node_id, hb, static=self.static):
            last = self.commit(batch)
        return last

    def unfence(self, node_id: int) -> int:
        reg = self.image.brokers[node_id]
        self.commit([BrokerRegistrationChange(node_id, reg.epoch, fenced=False)])
        return self.commit(elect_leaderless(self.image, static=self.static))

    # -- ControllerChannel ------------------------------------------------------------
    async def create_topics(self, topics, *, validate_only=False, timeout_s=30.0, requester=None):
        self.calls.append("create_topics")
        quota = self.mutation_quotas.for_request(self.image.client_quotas, requester, self.now)
        records, results = create_topics(self.image, topics, rng=self.rng, validate_only=validate_only,
                                         static=self.static, quota=quota)
        return ControllerReply(results, self.commit(records), quota.throttle_ms)

    async def delete_topics(self, names, *, timeout_s=30.0, requester=None):
        self.calls.append("delete_topics")
        quota = self.mutation_quotas.for_request(self.image.client_quotas, requester, self.now)
        records, results = delete_topics(self.image, names=names, static=self.static, quota=quota)
        return ControllerReply(results, self.commit(records), quota.throttle_ms)

    async def create_partitions(self, requests, *, validate_only=False, timeout_s=30.0, requester=None):
        self.calls.append("create_partitions")
        quota = self.mutation_quotas.for_request(self.image.client_quotas, requester, self.now)
        records, results = create_partitions(self.image, requests, validate_only=validate_only, quota=quota)
        return ControllerReply(results, self.commit(records), quota.throttle_ms)

    async def alter_configs(self, resources, *, validate_only=False, timeout_s=30.0):
        self.calls.append("alter_configs")
        records, results = alter_configs(self.image, resources, validate_only)
        return ControllerReply(results, self.commit(records))

    async def alter_user_scram_credentials(self, deletions, upsertions, *, timeout_s=30.0):
        self.calls.append("alter_user_scram_credentials")
        records, results = alter_user_scram_credentials(self.image, deletions, upsertions)
        return ControllerReply(results, self.commit(records))

    async def alter_client_quotas(self, changes, *, validate_only=False, timeout_s=30.0):
        self.calls.append("alter_client_quotas")
        records, results = alter_client_quotas(self.image, changes, validate_only)
        return ControllerReply(results, self.commit(records))

    async def alter_partition(self, broker_id, broker_epoch, items, *, timeout_s=30.0):
        self.calls.append("alter_partition")
        self.alter_partition_requests.append((broker_id, broker_epoch, list(items)))
        if self.alter_partition_gate is not None:
            await self.alter_partition_gate.wait()
        records, error, results = alter_partition(self.image, broker_id, broker_epoch, items, static=self.static)
        return ControllerReply((error, results), self.commit(records))

    async def elect_leaders(self, election_type, partitions=None, *, timeout_s=30.0):
        self.calls.append("elect_leaders")
        records, results = elect_leaders(self.image, ElectionType(election_type), partitions, static=self.static)
        return ControllerReply(results, self.commit(records))

    async def alter_partition_reassignments(self, wanted, *, timeout_s=30.0):
        self.calls.append("alter_partition_reassignments")
        records, results = alter_partition_reassignments(self.image, wanted, static=self.static)
        return ControllerReply(results, self.commit(records))

    async def list_partition_reassignments(self, wanted=None, *, timeout_s=30.0):
        return ControllerReply(list_partition_reassignments(self.image, wanted))

    async def incremental_alter_configs(self, resources, *, validate_only=False, timeout_s=30.0):
        self.calls.append("incremental_alter_configs")
        records, results = incremental_alter_configs(self.image, resources, validate_only, static=self.static)
        return ControllerReply(results, self.commit(records))

    async def create_acls(self, bindings, *, timeout_s=30.0):
        self.calls.append("create_acls")
        records, results = create_acls(self.image, bindings, rng=self.rng)
        return ControllerReply(results, self.commit(records))

    async def delete_acls(self, filters, *, timeout_s=30.0):
        self.calls.append("delete_acls")
        records, results = delete_acls(self.image, filters)
        return ControllerReply(results, self.commit(records))

    async def unregister_broker(self, broker_id, *, timeout_s=30.0):
        self.calls.append("unregister_broker")
        from metadata.controller.brokers import unregister_broker
        batches, error, message = unregister_broker(self.image, broker_id, BrokerHeartbeatManager())
        last = -1
        for batch in batches:
            last = self.commit(batch)
        return ControllerReply((error, message), last)

    def controller_addresses(self):
        return {}

    async def change_voters(self, request, *, timeout_s=30.0):
        """No Raft quorum here: every voter change names an unknown voter."""
        from wire.error_codes import ErrorCode
        self.calls.append("change_voters")
        return ErrorCode.VOTER_NOT_FOUND, f"no voter {request.voter_id} in the harness"

    async def describe_quorum(self, *, timeout_s=10.0):
        """A one-voter quorum led by the first broker, at the metadata's last offset."""
        from raft.messages import DescribeQuorumResponse, ReplicaState
        self.calls.append("describe_quorum")
        leader = self.brokers[0].node_id if self.brokers else 1
        end = self.next_offset
        return DescribeQuorumResponse("", 0, 1, leader, end, [ReplicaState(leader, end, 0)], [])

    async def allocate_producer_ids(self, broker_id, broker_epoch, *, timeout_s=30.0):
        self.calls.append("allocate_producer_ids")
        from metadata.controller.producer_ids import allocate_producer_ids
        records, block = allocate_producer_ids(self.image, broker_id, broker_epoch)
        self.commit(records)
        return block.error, block.first_id, block.size


def mem_env(seed: int = 1) -> RealEnv:
    """Real clock and TCP, in-memory files (fast, and no temp dirs to clean)."""
    env = RealEnv(seed=seed)
    env.fs = MemFileSystem()
    return env


class BrokerCluster:
    """N brokers (ids 1..N) sharing one InProcessController, inside the current trio run."""

    def __init__(self, env, n: int = 1, *, data_root: str = "/data", static=None, broker_overrides=None,
                 own_disks: bool = False):
        self.env = env
        self.static = dict(static or {})
        self.data_root = data_root
        self.broker_overrides = dict(broker_overrides or {})
        self.controller = InProcessController(static=static)
        # own_disks: each broker gets its own MemFileSystem, so one of them can crash alone.
        self.disks = {i: MemFileSystem() for i in range(1, n + 1)} if own_disks else {}
        self.brokers: list[Broker] = [self._new_broker(node_id) for node_id in range(1, n + 1)]
        self._scopes: dict[int, trio.CancelScope] = {}
        self._crashed: set[Broker] = set()
        self._nursery = None

    def _new_broker(self, node_id: int) -> Broker:
        cfg = BrokerConfig(node_id=node_id, data_dirs=(f"{self.data_root}/broker-{node_id}",), port=0,
                           cluster_id="test-cluster", static=dict(self.static), **self.broker_overrides)
        env = _OwnDisk(self.env, self.disks[node_id]) if self.disks else self.env
        return Broker(env, cfg, self.controller)

    async def crash(self, node_id: int, rng: random.Random) -> Broker:
        """Power loss on one broker (own_disks): what it had not fsynced is gone; it restarts."""
        self._crashed.add(self.broker(node_id))
        self.disks[node_id].crash(rng)  # first: the stopping broker must not flush anything more
        await self.stop(node_id)
        return await self.restart(node_id)

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers)

    async def start(self, nursery) -> None:
        self._nursery = nursery
        for b in self.brokers:
            await self._start_one(b)
            self.controller.attach(b)
        for b in self.brokers:
            self.controller.register(b.node_id, "127.0.0.1", b.port)
        await self.settle()

    async def _start_one(self, broker: Broker) -> None:
        scope = trio.CancelScope()
        self._scopes[broker.node_id] = scope

        async def run_broker(task_status=trio.TASK_STATUS_IGNORED):
            with scope:
                try:
                    await broker.run(task_status=task_status)
                except BaseException:
                    if broker not in self._crashed:
                        raise
                    # Crashed under it: its last flushes hit stale file handles. A dead process
                    # raises nothing; neither does this one.
        await self._nursery.start(run_broker)

    async def stop(self, node_id: int) -> None:
        """Stop a broker's tasks (a crash, as far as the others can tell; its files stay)."""
        broker = self.broker(node_id)
        self.controller.brokers = [b for b in self.controller.brokers if b is not broker]
        self._scopes.pop(node_id).cancel()
        await trio.sleep(0)

    async def restart(self, node_id: int, *, fenced: bool = False) -> Broker:
        """A new incarnation of a stopped broker on the same data dir: it reopens its logs,
        gets the whole metadata image, and re-registers with a new broker epoch."""
        broker = self._new_broker(node_id)
        self.brokers[node_id - 1] = broker
        await self._start_one(broker)
        self.controller.attach(broker)
        self.controller.register(node_id, "127.0.0.1", broker.port, fenced=fenced)
        await self.settle()
        return broker

    async def settle(self) -> None:
        """Wait until every running broker applied the controller's latest image."""
        for b in self.controller.brokers:
            await b.replicas.wait_applied(self.controller.image.offset, trio.current_time() + 10)

    def broker(self, node_id: int) -> Broker:
        return self.brokers[node_id - 1]


class _OwnDisk:
    """The shared Env (clock, network, randomness) with a broker's own file system."""

    def __init__(self, env, fs):
        self._env = env
        self.fs = fs

    def __getattr__(self, name):
        return getattr(self._env, name)


@asynccontextmanager
async def running_cluster(n: int = 1, *, env=None, static=None, broker_overrides=None, own_disks=False):
    env = env or mem_env()
    cluster = BrokerCluster(env, n, static=static, broker_overrides=broker_overrides, own_disks=own_disks)
    async with trio.open_nursery() as nursery:
        await cluster.start(nursery)
        try:
            yield cluster
        finally:
            nursery.cancel_scope.cancel()


class RawClient:
    """A minimal Kafka client over one connection: send requests, read responses in order."""

    def __init__(self, stream):
        self.stream = stream
        self.reader = FrameReader()
        self.correlation = 0

    @classmethod
    async def connect(cls, port: int) -> "RawClient":
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def send(self, request, version: int, *, correlation_id: int | None = None) -> int:
        self.correlation += 1
        cid = self.correlation if correlation_id is None else correlation_id
        await self.stream.send_all(encode_request(request, version, cid, "raw-client"))
        return cid

    async def send_raw(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def read_frame(self, timeout: float = 10.0) -> bytes | None:
        """The next response frame, or None if the broker closed the connection."""
        with trio.fail_after(timeout):
            while True:
                frame = self.reader.next_frame()
                if frame is not None:
                    return frame
                data = await self.stream.receive_some(65536)
                if not data:
                    return None
                self.reader.feed(data)

    async def call(self, request, version: int, *, timeout: float = 10.0):
        cid = await self.send(request, version)
        frame = await self.read_frame(timeout)
        assert frame is not None, "connection closed"
        got_cid, body = decode_response(frame, request.API_KEY, version)
        assert got_cid == cid
        return body

    async def is_closed(self, timeout: float = 10.0) -> bool:
        return await self.read_frame(timeout) is None

    async def aclose(self) -> None:
        await self.stream.aclose()


class ThreadedCluster:
    """A BrokerCluster on RealEnv and real files, in a background thread (for real clients)."""

    def __init__(self, n: int = 1, *, static=None, broker_overrides=None):
        self.n = n
        self.static = static
        self.broker_overrides = broker_overrides
        self.tmp = tempfile.TemporaryDirectory(prefix="raftkafka-broker-test-")
        self.cluster: BrokerCluster | None = None
        self._ready = threading.Event()
        self._token = None
        self._cancel: trio.CancelScope | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self) -> str:
        self._thread = threading.Thread(target=self._main, daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise RuntimeError("brokers did not start")
        if self._error is not None:
            raise self._error
        return self.cluster.bootstrap

    def _main(self) -> None:
        try:
            trio.run(self._run)
        except BaseException as exc:  # surfaced to the test thread by start()
            self._error = exc
            self._ready.set()

    async def _run(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        env = RealEnv(seed=7)
        self.cluster = BrokerCluster(env, self.n, data_root=self.tmp.name, static=self.static,
                                     broker_overrides=self.broker_overrides)
        with trio.CancelScope() as scope:
            self._cancel = scope
            async with trio.open_nursery() as nursery:
                await self.cluster.start(nursery)
                self._ready.set()
                await trio.sleep_forever()

    def run_sync(self, fn):
        """Run `fn()` in the brokers' trio thread (to inspect their state safely)."""
        return trio.from_thread.run_sync(fn, trio_token=self._token)

    def stop(self) -> None:
        try:
            if self._cancel is not None and self._error is None:
                trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
            if self._thread is not None:
                self._thread.join(30)
        finally:
            self.tmp.cleanup()
        if self._error is not None:  # the brokers' run ended early: say with what
            raise RuntimeError(f"the brokers' trio run ended before stop(): {self._error!r}") from self._error
