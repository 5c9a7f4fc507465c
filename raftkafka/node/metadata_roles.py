"""What the metadata layer adds to a node's Raft replica, per role.

A node runs one Raft replica of the metadata log (raftkafka.node.ControllerNode). Its
"app" decides what the committed log drives:

- controller role: `ControllerRole` — the ControllerStateMachine (committed image,
  snapshots) and the ControllerService with its RPCs on the controller listener;
- broker role: `BrokerRole` — a MetadataFollower + MetadataLoader (publishers are plugged
  in with `add_publisher`), the Kafka-protocol `broker.Broker` on the node's client
  listener (started, logs recovered and port bound, before the broker registers, so the
  registered endpoint is the real one; it gets metadata once that holds its registration),
  and the BrokerLifecycle (registration, heartbeats, controlled shutdown). On a broker-only
  node the follower is the Raft state machine of an observer; on a combined node the
  controller's state machine feeds it the decoded batches. With `kafka_broker=False`
  (metadata-layer tests and benchmarks) the broker role runs the metadata side only.

An app offers: `state_machine`, `wrap_inbox(inbox)`, `handle(request)` (None = not mine)
and `run(driver, cluster_id, voters, task_status=...)`.
"""
from __future__ import annotations

import logging

import trio

from broker.broker import Broker, ListenerError
from broker.broker_config import BrokerConfig, BrokerListener
from metadata.authorizer import AuthorizerSettings
from metadata.bootstrap_records import read_bootstrap_records
from metadata.broker_lifecycle import AfterOwnRegistration, BrokerLifecycle
from metadata.controller.client import ControllerClient, ControllerConnection
from metadata.controller.requests import ControllerRequests
from metadata.controller.service import ControllerService
from metadata.controller.state_machine import ControllerStateMachine, SnapshotSchedule
from metadata.data_dir_lock import DataDirLocks
from metadata.incarnation_record import (
    claim_previous_epoch, forget_incarnation, pending_incarnation, record_incarnation,
)
from metadata.loader import MetadataLoader, MetadataPublisher
from metadata.metadata_follower import LeaderHighWatermarkTap, MetadataFollower
from metadata.records import Endpoint
from metrics.registry import MetricsRegistry
from raft.quorum_state import Role
from raftkafka.node.config import ConfigError, NodeConfig, controller_login, listener_login
from raftkafka.node.security_setup import all_listener_security
from storage.env import Env
from storage.listener_security import ListenerSecurity

__all__ = ["ControllerRole", "BrokerRole", "MetadataApp"]

log = logging.getLogger("raftkafka.node")


def _schedule(env: Env, config: NodeConfig) -> SnapshotSchedule:
    return SnapshotSchedule(env.now, max_records=config.snapshot_interval_records,
                            max_interval=config.snapshot_interval_ms / 1000)


def broker_config(config: NodeConfig, cluster_id: str,
                  security: dict[str, ListenerSecurity] | None = None) -> BrokerConfig:
    """The Kafka broker's settings from the node's: its client listeners and static configs."""
    security = security or all_listener_security(config)
    listener = config.broker_listener
    inter_broker = config.inter_broker_listener or listener
    static = config.broker_static
    extra = {}
    if "socket.request.max.bytes" in static:
        extra["max_frame_size"] = int(static["socket.request.max.bytes"])
    if "log.retention.check.interval.ms" in static:
        extra["retention_check_interval_s"] = int(static["log.retention.check.interval.ms"]) / 1000
    extra["connection_limits"] = config.connection_limits()
    if "log.cleaner.backoff.ms" in static:
        extra["cleaner_backoff_s"] = int(static["log.cleaner.backoff.ms"]) / 1000
    return BrokerConfig(
        node_id=config.node_id, data_dirs=tuple(config.log_dirs), host=listener.host, port=listener.port,
        listener_name=inter_broker.name, rack=config.broker_rack or None, cluster_id=cluster_id,
        static=dict(static),
        listeners=tuple(BrokerListener(l.host, l.port, security[l.name]) for l in config.client_listeners),
        super_users=config.super_users, inter_broker_tls=security[inter_broker.name].client_tls,
        inter_broker_sasl=listener_login(config, inter_broker, "sasl.mechanism.inter.broker.protocol"),
        authorizer=AuthorizerSettings(
            enabled=bool(config.authorizer_class_name), super_users=frozenset(map(str, config.super_users)),
            allow_if_no_acl=config.allow_everyone_if_no_acl_found), **extra)


# Kafka's SecurityProtocol ids, as registered endpoints carry them.
_PROTOCOL_IDS = {"PLAINTEXT": 0, "SSL": 1, "SASL_PLAINTEXT": 2, "SASL_SSL": 3}


def describe_recovery(log_manager) -> str:
    """One line on how the partition logs came up (operators and the recovery tests read it)."""
    logs = log_manager.all_logs()
    dirs = sorted(log_manager.had_clean_shutdown)
    if not logs:
        return f"logs loaded: no partition logs in {', '.join(dirs)}"
    if all(log_manager.had_clean_shutdown.values()):
        return f"logs loaded: clean shutdown marker found in {', '.join(dirs)}; skipped the recovery scan ({len(logs)} logs)"
    stats = [log.recovery_stats for _, log in logs]
    return (f"logs recovered after an unclean shutdown of {', '.join(dirs)}: {len(logs)} logs, "
            f"{sum(s.segments_recovered for s in stats)} segments scanned "
            f"({sum(s.bytes_scanned for s in stats)} bytes), "
            f"{sum(s.bytes_truncated for s in stats)} bytes truncated")


class BrokerRole:
    def __init__(self, env: Env, config: NodeConfig, *, kafka_broker: bool = False,
                 metrics: MetricsRegistry | None = None, security: dict[str, ListenerSecurity] | None = None):
        self.env = env
        self.config = config
        self.security = security or all_listener_security(config)
        self.kafka_broker = kafka_broker
        self.metrics = metrics
        self.loader = MetadataLoader()
        self.follower = MetadataFollower(self.loader, schedule=_schedule(env, config))
        self.connection: ControllerConnection | None = None
        self.lifecycle: BrokerLifecycle | None = None
        self.controller: ControllerClient | None = None  # the channel for forwarded admin ops
        self.kafka: Broker | None = None  # the Kafka-protocol broker, once running
        self.locks = DataDirLocks([], None)  # its log dirs' locks, taken by the node at start
        self.started = trio.Event()

    def add_publisher(self, publisher: MetadataPublisher) -> None:
        """Plug in a consumer of metadata (replica manager, metadata cache, ...)."""
        self.follower.add_publisher(publisher)

    def endpoints(self) -> list[Endpoint]:
        """What we register: each client listener as advertised (with its bound port)."""
        out = []
        for listener in self.config.client_listeners:
            bound = self.kafka.ports.get(listener.name) if self.kafka is not None else None
            adv = self.config.advertised(listener, bound)
            out.append(Endpoint(adv.name, adv.host, adv.port, _PROTOCOL_IDS[listener.security_protocol]))
        return out

    async def run(self, driver, cluster_id: str, voters: dict[int, tuple[str, int]], *,
                  task_status=trio.TASK_STATUS_IGNORED) -> None:
        config = self.config
        if self.follower.schedule is not None:  # broker-only: the follower is the state machine
            self.follower.schedule.attach(driver)
        controller_tls = self.security[config.controller_connect_listener.name].client_tls
        self.connection = ControllerConnection(self.env, voters, cluster_id=cluster_id, tls=controller_tls,
                                               login=controller_login(config))
        # Forwarded admin requests name this broker's registration (metadata.controller.gate).
        self.controller = ControllerClient(
            self.connection, forwarder=lambda: (config.node_id, self.lifecycle.broker_epoch))
        self.lifecycle = BrokerLifecycle(
            self.env, self.connection, broker_id=config.node_id,
            metadata_offset=lambda: self.follower.metadata_offset,
            rack=config.broker_rack or None,
            heartbeat_interval=config.broker_heartbeat_interval_ms / 1000,
            session_timeout=config.broker_session_timeout_ms / 1000)
        async with trio.open_nursery() as nursery:
            await nursery.start(self.connection.run)
            if self.kafka_broker:
                kafka = Broker(self.env, broker_config(config, cluster_id, self.security), self.controller,
                               metrics=self.metrics, broker_epoch=lambda: self.lifecycle.broker_epoch,
                               session_lease=self.lifecycle.holds_session_lease)
                self._hold_clients_until_unfenced(kafka)
                # A recovery that cuts acknowledged records withdraws the clean-restart claim at
                # once: a crash before this start registers must not leave it to the next one.
                data_dirs = list(kafka.log_manager.data_dirs)
                kafka.log_manager.on_data_loss = lambda: forget_incarnation(self.env.fs, data_dirs)
                # The node locked the dirs before reading them (assembly): what they prove.
                self.lifecycle.previous_incarnation_id = self.locks.previous_incarnation
                self.locks.name(self.lifecycle.incarnation_id)
                try:
                    await nursery.start(kafka.run)  # recovers the logs, binds the listener
                except* ListenerError as group:  # a storage error (ENOSPC, ...) stays what it is
                    e = group.exceptions[0]
                    listener = config.broker_listener
                    raise ConfigError(f"listeners: cannot listen on {listener.host}:{listener.port}: "
                                      f"{getattr(e, 'strerror', e) or e}") from None
                log.info(describe_recovery(kafka.log_manager))
                self._remember_incarnations(kafka)
                await self._record_registering(data_dirs)
                self.kafka = kafka
                # Partitions are served from metadata that holds this incarnation's registration.
                self.add_publisher(AfterOwnRegistration(
                    self.loader, kafka, broker_id=config.node_id,
                    incarnation_id=self.lifecycle.incarnation_id))
            self.lifecycle.endpoints = tuple(self.endpoints())  # with the bound port
            nursery.start_soon(self.lifecycle.run)
            self.started.set()
            task_status.started()

    def _remember_incarnations(self, kafka: Broker) -> None:
        """Register as a clean restart when the previous incarnation lost no data (KIP-966),
        and record each new broker epoch for the next start."""
        dirs = list(kafka.log_manager.data_dirs)
        clean = kafka.log_manager.had_clean_shutdown
        # A log that recovery had to cut below a whole batch lost records we may have
        # acknowledged (bit rot): unclean, whatever the boot id says. A torn last write (a crash
        # mid-append) loses nothing that was acknowledged and keeps the same-boot rule.
        cut = any(log.recovery_stats.whole_batches_lost for _, log in kafka.log_manager.all_logs())
        claim = claim_previous_epoch(self.env.fs, dirs, clean_shutdown=bool(clean) and all(clean.values()),
                                     lost_batches=cut)
        self.lifecycle.previous_broker_epoch = claim
        pending = pending_incarnation(self.env.fs, dirs) if claim >= 0 else None
        if pending is not None:
            # The previous incarnation may have been registered (a newer epoch than `claim`)
            # and died before the answer: as that incarnation we get that epoch back, where a
            # new one would be taken out of the ELRs for claiming a stale epoch (seed 3317).
            self.lifecycle.incarnation_id = pending
            self.locks.name(pending)
        self.lifecycle.on_registered = lambda epoch: record_incarnation(self.env.fs, dirs, epoch)

    async def _record_registering(self, dirs: list[str]) -> None:
        """Before a clean start registers: note which incarnation carries the claim, so the next
        start can take its place if this one dies with its registration unanswered."""
        if self.lifecycle.previous_broker_epoch < 0:
            return
        try:
            await record_incarnation(self.env.fs, dirs, self.lifecycle.previous_broker_epoch,
                                     registering=self.lifecycle.incarnation_id)
        except OSError as e:  # then a death before the answer makes the next start unclean
            log.warning("broker %d: cannot record its registration: %s", self.config.node_id, e)

    def _hold_clients_until_unfenced(self, kafka: Broker) -> None:
        """As Kafka: the listener is bound at once (its port is registered) but requests are
        processed only once the controller has unfenced us, so no client ever sees this
        broker without its own registration in the metadata. Connections wait, not fail."""
        serve_connection = kafka.server.handle_connection

        async def handle_connection(stream, security=None, sasl=None) -> None:
            await self.lifecycle.unfenced.wait()
            await serve_connection(stream, security, sasl)

        kafka.server.handle_connection = handle_connection


class ControllerRole:
    def __init__(self, env: Env, config: NodeConfig, *, follower: MetadataFollower | None = None,
                 metrics: MetricsRegistry | None = None):
        self.env = env
        self.config = config
        self.follower = follower
        self.metrics = metrics
        self.schedule = _schedule(env, config)
        self.state_machine = ControllerStateMachine(schedule=self.schedule, follower=follower)
        if follower is not None:
            follower.schedule = None  # the controller's snapshots cover both
        self.service: ControllerService | None = None
        self.requests: ControllerRequests | None = None

    async def run(self, driver, cluster_id: str, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        self.schedule.attach(driver)
        if self.follower is not None:
            self.follower.is_leader = lambda: driver.status().role is Role.LEADER
        self.service = ControllerService(
            self.env, node_id=self.config.node_id, driver=driver, state_machine=self.state_machine,
            static=self.config.broker_static,  # num.partitions, default.replication.factor, ...
            session_timeout=self.config.broker_session_timeout_ms / 1000,
            close_grace=self.config.broker_connection_close_grace_ms / 1000,
            bootstrap_records=read_bootstrap_records(self.env.fs, self.config.metadata_log_dir))
        self.requests = ControllerRequests(self.service, rng=self.env.rng, cluster_id=cluster_id,
                                           metrics=self.metrics)
        await self.service.run(task_status=task_status)

    async def handle(self, request, connection=None):
        return None if self.requests is None else await self.requests.handle(request, connection)

    def connection_closed(self, connection) -> None:
        if self.service is not None:
            self.service.connection_closed(connection)


class MetadataApp:
    """The app of one node: its controller role, its broker role, or both."""

    def __init__(self, env: Env, config: NodeConfig, *, kafka_broker: bool = False,
                 metrics: MetricsRegistry | None = None):
        self.security = all_listener_security(config)  # ConfigError (one line) if a TLS file is unusable
        self.broker = (BrokerRole(env, config, kafka_broker=kafka_broker, metrics=metrics, security=self.security)
                       if "broker" in config.roles else None)
        self.controller = (ControllerRole(env, config, follower=self.broker and self.broker.follower,
                                          metrics=metrics)
                           if "controller" in config.roles else None)
        self.state_machine = (self.controller.state_machine if self.controller is not None
                              else self.broker.follower)

    def wrap_inbox(self, inbox):
        if self.broker is None:
            return inbox
        return LeaderHighWatermarkTap(inbox, self.broker.follower)

    async def handle(self, request, connection=None):
        return None if self.controller is None else await self.controller.handle(request, connection)

    def connection_closed(self, connection) -> None:
        if self.controller is not None:
            self.controller.connection_closed(connection)

    async def run(self, driver, cluster_id: str, voters: dict[int, tuple[str, int]], *,
                  task_status=trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            if self.controller is not None:
                await nursery.start(self.controller.run, driver, cluster_id)
            if self.broker is not None:
                await nursery.start(self.broker.run, driver, cluster_id, voters)
            task_status.started()
