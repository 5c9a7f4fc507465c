"""Assemble and run one node from its config and an Env.

Every node runs one Raft replica of the metadata log (storage → core → driver →
transport) plus the quorum's client RPCs; controllers are voters, broker-only
nodes observers. What the committed log drives comes from the node's app
(raftkafka.node.metadata_roles.MetadataApp): the active controller and its RPCs on
controllers, the metadata loader and broker lifecycle on brokers. With
`controller.state.machine=recording` a controller only records committed
entries (Raft-only tests and benchmarks).
"""
from __future__ import annotations

import logging
import signal

import msgpack
import trio

from metadata.bootstrap_records import read_bootstrap_records
from metadata.data_dir_lock import lock_data_dirs
from raft.core import RaftCore
from raft.driver import RaftDriver
from raft.entry import Entry
from raft.node_rpc import QuorumService
from raft.node_storage import NodeStorage
from raft.transport import Transport
from raftkafka.node.config import ConfigError, controller_login, NodeConfig
from raftkafka.node.security_setup import all_listener_security
from storage.env import Env
from storage.meta_properties import VoterSpec, check_data_dir

__all__ = ["RecordingStateMachine", "ControllerNode", "run_node", "voter_addresses", "describe_addresses",
           "shut_down_gracefully"]

log = logging.getLogger("raftkafka.node")
CONTROLLED_SHUTDOWN_TIMEOUT_S = 10.0  # then the broker stops anyway (its leaderships fail over)
# An active controller that stops keeps serving this long for the controlled shutdowns of
# brokers told to stop at the same moment (their first heartbeat may still be on its way).
PEER_SHUTDOWN_LINGER_S = 0.2


class RecordingStateMachine:
    """Keeps every committed non-control payload, in order; its snapshot is that list.

    Diagnostic only (tests and benchmarks read it back from disk to prove that no
    committed entry was lost); the metadata controller replaces it.
    """

    def __init__(self) -> None:
        self.payloads: list[bytes] = []
        self.applied_offset = 0  # end offset of what was applied

    def restore(self, snapshot_id: tuple[int, int], data: bytes | None) -> None:
        self.payloads = list(msgpack.unpackb(data)["payloads"]) if data else []
        self.applied_offset = snapshot_id[0]

    def apply(self, entries: list[Entry], high_watermark: int) -> None:
        self.payloads.extend(e.payload for e in entries if not e.control)
        self.applied_offset = entries[-1].offset + 1

    def snapshot(self) -> bytes:
        return msgpack.packb({"offset": self.applied_offset, "payloads": self.payloads})


def voter_addresses(bootstrap: list[VoterSpec], configured: list[VoterSpec]) -> dict[int, tuple[str, int]]:
    """Voter id → controller address: the format-time set, with addresses from the config if given."""
    addresses = {v.node_id: (v.host, v.port) for v in bootstrap}
    if configured:
        if sorted(v.node_id for v in configured) != sorted(addresses):
            raise ConfigError(
                "controller.quorum.voters: ids "
                f"{sorted(v.node_id for v in configured)} differ from the voters formatted into the data dir "
                f"{sorted(addresses)}"
            )
        addresses = {v.node_id: (v.host, v.port) for v in configured}
    return addresses


def replaced_voter(meta, voters: list[VoterSpec]) -> bool:
    """KIP-853: a voter is a node id *and* a directory id. A data dir of this node id whose
    directory id is not the one the voter set names (a wiped disk, formatted again) does not
    hold that voter's log or votes: it must not vote or stand as that voter, lest a committed
    entry a majority held lose its majority. It runs as an observer (Kafka: until an operator
    removes the old voter and adds this one)."""
    return any(v.node_id == meta.node_id and v.directory_id and v.directory_id != meta.directory_id
               for v in voters)


class ControllerNode:
    """The controller role: a Raft voter (or observer) with its listener and RPCs."""

    def __init__(self, env: Env, config: NodeConfig, *, state_machine=None, app=None):
        self.env = env
        self.config = config
        # Each listener's security (TLS contexts, principal mapping): the app's if it has one.
        self.security = app.security if app is not None else all_listener_security(config)
        # `app` (raftkafka.node.metadata_roles.MetadataApp) brings its own state machine, RPCs
        # and tasks; without one the node only replicates (tests, benchmarks).
        self.app = app
        self.state_machine = app.state_machine if app is not None else state_machine or RecordingStateMachine()
        self.driver: RaftDriver | None = None
        self.transport: Transport | None = None
        self.bound_port: int | None = None
        self.replaced_voter = False  # set by preflight (see replaced_voter)
        self.service: QuorumService | None = None
        self.voter_directories: dict[int, str] = {}

    def preflight(self):
        """Check the data dir and voters (DataDirError / ConfigError) before anything starts."""
        meta, bootstrap = check_data_dir(self.env.fs, self.config.metadata_log_dir, node_id=self.config.node_id)
        read_bootstrap_records(self.env.fs, self.config.metadata_log_dir)  # a damaged file stops us here
        self.replaced_voter = replaced_voter(meta, [*bootstrap, *self.config.voters])
        self.voter_directories = {v.node_id: v.directory_id for v in [*bootstrap, *self.config.voters]
                                  if v.directory_id}
        if self.replaced_voter:
            log.warning("node %d: this data dir (directory id %s) is not the one voter %d was formatted with; "
                        "running as an observer until the voter set names it", meta.node_id, meta.directory_id,
                        meta.node_id)
        return meta, voter_addresses(bootstrap, self.config.voters)

    def _voters_changed(self, addresses: dict, endpoints: dict) -> None:
        """The voter set in the log changed: peers, relays and controller clients follow it."""
        addresses.clear()
        addresses.update(endpoints)
        if self.service is not None:
            self.service.recheck_own_endpoint()
        if self.transport is not None:
            for node_id, (host, port) in sorted(endpoints.items()):
                self.transport.set_peer(node_id, host, port)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        meta, addresses = self.preflight()
        # Before anything reads the dirs: no other process may use them (data_dir_lock).
        locks = lock_data_dirs(self.env.fs, self.config.log_dirs)
        if self.app is not None and self.app.broker is not None:
            self.app.broker.locks = locks
        try:
            await self._run(meta, addresses, task_status)
        finally:
            locks.close()

    async def _run(self, meta, addresses, task_status) -> None:
        env, config = self.env, self.config
        storage = NodeStorage(env.fs, config.metadata_log_dir, segment_bytes=config.metadata_segment_bytes)
        # Only a controller may vote, once the voter set (static, or the latest in the log) names
        # its id and directory (KIP-853); a wiped voter's new directory keeps it an observer.
        # Any controller may become a voter by a change in the log: its damaged log is refused,
        # never cut (only a broker's is fetched again).
        may_vote = "controller" in config.roles
        state, raft_log = await storage.load(refetch_damaged=not may_vote)
        core = RaftCore(
            node_id=config.node_id,
            voters=sorted(addresses),
            cluster_id=meta.cluster_id,
            config=config.raft_config(),
            state=state,
            log=raft_log,
            now=env.now(),
            rng=env.rng,
            observer=not may_vote,
            directory_id=meta.directory_id,
            voter_directories=self.voter_directories,
            voter_addresses=addresses,
        )
        addresses = dict(addresses)  # the latest voter set's endpoints, updated in place below
        self.driver = driver = RaftDriver(
            env, core, storage, self.state_machine,
            send=lambda dst, msg: self.transport.send(dst, msg),
            append_linger=config.append_linger_ms / 1000,
            snapshot_interval_bytes=config.snapshot_interval_bytes,
            on_voters_changed=lambda endpoints: self._voters_changed(addresses, endpoints),
        )
        controller_security = self.security[config.controller_connect_listener.name]
        login = controller_login(config)
        app = self.app
        # Opaque appends only where the log is not the cluster's metadata (Raft-only runs).
        self.service = service = QuorumService(
            env, driver, cluster_id=meta.cluster_id, node_id=config.node_id, addresses=addresses,
            diagnostic_append=app is None, tls=controller_security.client_tls, login=login)

        async def client_handler(request, connection=None):
            reply = None if app is None else await app.handle(request, connection)
            return reply if reply is not None else await service.handle(request)

        def epoch_and_leader():
            st = core.status()
            return st.epoch, st.leader_id

        self.transport = Transport(
            env,
            node_id=config.node_id,
            cluster_id=meta.cluster_id,
            peers=addresses,
            inbox=driver.inbox_send if app is None else app.wrap_inbox(driver.inbox_send),
            client_handler=client_handler,
            on_client_closed=None if app is None else app.connection_closed,
            on_link_lost=driver.link_lost,
            on_connect_refused=driver.connect_refused,
            status=epoch_and_leader,
            limits=config.connection_limits(),
            security=controller_security,
            login=login,
        )
        listener = config.controller_listener
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(service.run)
                try:
                    self.bound_port = await nursery.start(
                        self.transport.run, listener and listener.host, listener and listener.port)
                except* OSError as group:
                    e = group.exceptions[0]
                    raise ConfigError(
                        f"listeners: cannot listen on {listener.host}:{listener.port}: {getattr(e, 'strerror', e) or e}"
                    ) from None
                if listener is not None:  # what a voter asks the voter set to record for it
                    advertised = config.advertised(listener, self.bound_port)
                    core.own_endpoint = (advertised.host, advertised.port)
                    service.recheck_own_endpoint()
                log.info(
                    "node %d started: cluster %s, voters %s, log %s..%s, epoch %d",
                    config.node_id, meta.cluster_id, sorted(addresses),
                    raft_log.start_offset, raft_log.end_offset, state.epoch,
                )
                nursery.start_soon(driver.run)
                if app is not None:
                    await nursery.start(app.run, driver, meta.cluster_id, addresses)
                task_status.started(self.bound_port)
        finally:
            storage.close()


def describe_addresses(config: NodeConfig, node: "ControllerNode") -> str:
    """`node 1 (broker,controller) serving Kafka clients on PLAINTEXT://127.0.0.1:9092, controllers on ...`"""
    parts = []
    app = node.app
    kafka = app.broker.kafka if app is not None and app.broker is not None else None
    if kafka is not None:
        served = ", ".join(f"{l.name}://{l.host}:{kafka.ports.get(l.name, l.port)}" for l in config.client_listeners)
        parts.append(f"Kafka clients on {served}")
    listener = config.controller_listener
    if listener is not None:
        parts.append(f"controllers on {listener.name}://{listener.host}:{node.bound_port}")
    who = f"node {config.node_id} ({','.join(config.roles)})"
    return f"{who} serving " + ", ".join(parts) if parts else f"{who} started"


async def run_node(env: Env, config: NodeConfig, *, announce=print, ready=None) -> None:
    """Run until SIGTERM/SIGINT. Raises ConfigError / DataDirError before anything starts.

    `announce(line)` gets the one line saying where the node serves; `ready(node)` (if
    given) is called once it does."""
    from raftkafka.node.metadata_roles import MetadataApp
    from raftkafka.node.metrics_http import MetricsServer
    from raftkafka.node.group_lag import GroupLagTracker
    from raftkafka.node.metrics_wiring import register_broker_gauges, register_group_lag, register_node_gauges
    from metrics.registry import MetricsRegistry

    if "broker" in config.roles and config.broker_listener is None:
        raise ConfigError("listeners: a broker needs a client listener, e.g. PLAINTEXT://127.0.0.1:9092")
    registry = MetricsRegistry()
    app = MetadataApp(env, config, kafka_broker=True, metrics=registry) if config.state_machine == "metadata" else None
    if app is None and "broker" in config.roles:
        raise ConfigError("controller.state.machine: 'recording' runs the controller role only")
    node = ControllerNode(env, config, app=app)
    node.preflight()
    register_node_gauges(registry, node)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            await nursery.start(node.run)
            if app is not None and app.broker is not None and app.broker.kafka is not None:
                kafka = app.broker.kafka
                register_broker_gauges(registry, kafka)
                if config.metrics_port >= 0:  # its ListOffsets rounds serve the scrapes alone
                    host = config.broker_listener.host
                    if host in ("", "0.0.0.0", "::"):
                        host = "127.0.0.1"  # a wildcard listener: reach it on loopback
                    lag = GroupLagTracker(env, kafka, f"{host}:{kafka.port}")
                    register_group_lag(registry, lag.committed, lag.end_offset)
                    nursery.start_soon(lag.run)
            if config.metrics_port >= 0:
                try:
                    metrics_port = await nursery.start(MetricsServer(env, registry).serve, config.metrics_host,
                                                       config.metrics_port)
                except* OSError as group:
                    e = group.exceptions[0]
                    raise ConfigError(f"metrics.port: cannot listen on {config.metrics_host}:{config.metrics_port}: "
                                      f"{getattr(e, 'strerror', e) or e}") from None
                log.info("metrics on http://%s:%d/metrics", config.metrics_host, metrics_port)
            nursery.start_soon(_announce_when_serving, node, announce, ready)
            async for signum in signals:
                log.info("signal %d: shutting down", signum)
                await shut_down_gracefully(node)
                nursery.cancel_scope.cancel()
                break


async def _announce_when_serving(node: "ControllerNode", announce, ready) -> None:
    """A broker serves clients once unfenced (before that, connections wait): say so then."""
    broker = node.app.broker if node.app is not None else None
    if broker is not None and not broker.lifecycle.unfenced.is_set():
        log.info("waiting for the controller quorum to unfence broker %d", node.config.node_id)
        await broker.lifecycle.unfenced.wait()
    announce(describe_addresses(node.config, node), flush=True)
    if ready is not None:
        ready(node)


async def _serve_peer_shutdowns(node: "ControllerNode") -> None:
    """The active controller stops only once no other broker is in controlled shutdown (for
    PEER_SHUTDOWN_LINGER_S at least, at most CONTROLLED_SHUTDOWN_TIMEOUT_S). When every node of
    a cluster stops at once (`dev`'s Ctrl-C), a controller that left at once took its vote with
    it: the next node to leave took the majority, and the last broker's controlled shutdown
    waited out its whole timeout for a controller no quorum could elect."""
    service = node.app.controller.service if node.app is not None and node.app.controller is not None else None
    if service is None or not service.active:
        return
    env, own = node.env, node.config.node_id
    linger_until, give_up_at = env.now() + PEER_SHUTDOWN_LINGER_S, env.now() + CONTROLLED_SHUTDOWN_TIMEOUT_S
    while service.active and env.now() < give_up_at:
        image = service.image
        stopping = image is not None and any(
            reg.in_controlled_shutdown and not reg.fenced for broker, reg in image.brokers.items() if broker != own)
        if not stopping and env.now() >= linger_until:
            return
        await env.sleep(0.02)


async def shut_down_gracefully(node: "ControllerNode") -> bool | None:
    """Kafka's controlled shutdown: leadership moves away, then Raft leadership; the caller
    then stops the node (cancelling the broker flushes and closes its logs and writes the
    clean-shutdown marker). Whether the broker's controlled shutdown completed (None: no
    registered broker here)."""
    app = node.app
    broker = app and app.broker
    done = None
    if broker is not None and broker.lifecycle is not None and broker.lifecycle.registered.is_set():
        done = await broker.lifecycle.controlled_shutdown(timeout=CONTROLLED_SHUTDOWN_TIMEOUT_S)
        log.info("controlled shutdown %s", "complete" if done else "timed out")
    await _serve_peer_shutdowns(node)
    # A leader hands over first, so the others need not wait out a timeout.
    with node.env.move_on_after(1.0):
        await node.driver.resign()
        await node.env.sleep(0.05)  # let the transport write the EndQuorumEpoch
    return done
