"""The broker role: Kafka-protocol server, replica manager and metadata cache, assembled.

    broker = Broker(env, BrokerConfig(node_id=1, data_dirs=(...)), controller_channel)
    loader.install(broker)                  # a metadata publisher: publish(delta, image)
    port = await nursery.start(broker.run)  # serves until cancelled, then closes the logs

`run` starts the partition logs (unless the node already did), the replica
manager's apply task, replication (the replica fetchers, the AlterPartition
sender, the ISR expiration task), the log manager's retention/compaction and
flush tasks, and the listener; `task_status.started(port)` reports the bound port.

A log-dir failure halts the broker (broker.log_dir_failure_handler): `run` raises
LogDirHalt and, unlike a cancellation (a controlled shutdown), leaves the logs
as they are — no flush, no checkpoints, no clean-shutdown marker.
"""
from __future__ import annotations

import logging
from typing import Callable

import trio

from broker.alter_partition_manager import AlterPartitionManager
from broker.broker_config import BrokerConfig
from broker.controller_channel import ControllerChannel, ControllerUnavailableError, CreatableTopic
from broker.fetch_purgatory import FetchPurgatory
from broker.fetch_session import FetchSessionCache
from broker.group_driver import GroupDriver
from broker.handlers import advertised_versions
from broker.handlers.metadata import topic_name_error
from broker.log_dir_failure_handler import HALT_GRACE_S, LogDirHalt, halt_on_log_dir_failure
from broker.metadata_cache import MetadataCache
from broker.metrics import BrokerMetrics
from broker.quotas.enforcement import ClientQuotas
from broker.partition import Partition, ReplicationSettings
from broker.producer_state_hooks import ProducerStates
from broker.replication_throttle import ReplicationThrottles
from broker.replica_fetcher import FetcherSettings, ReplicaFetcherManager
from broker.replica_manager import ReplicaManager
from broker.server import KafkaServer
from broker.topic_log_config import log_config_for
from broker.txn_driver import TxnDriver
from metadata.controller.dynamic_configs import effective_broker_value
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage
from metrics.registry import MetricsRegistry
from metrics.sampled_stats import QuotaWindow
from storage.env import Env
from storage.log import LogError, LogManager
from storage.log.log_dir_failure import KafkaStorageError
from wire.errors import CorruptRecordError
from wire.error_codes import ErrorCode

__all__ = ["Broker", "ListenerError", "LogDirHalt"]

log = logging.getLogger(__name__)


class ListenerError(OSError):
    """The Kafka listener could not be bound (a configuration problem), as opposed to a
    storage error while the logs were recovered (a full disk, say)."""


class Broker:
    name = "broker"

    def __init__(self, env: Env, config: BrokerConfig, controller: ControllerChannel,
                 log_manager: LogManager | None = None, metrics: MetricsRegistry | None = None,
                 broker_epoch: Callable[[], int] | None = None,
                 session_lease: Callable[[], bool] | None = None):
        self.env = env
        # Whether the controller cannot have fenced us yet (the lifecycle's heartbeat lease);
        # a broker driven without a lifecycle has no controller session to lose.
        self._session_lease = session_lease
        # The epoch the controller gave this incarnation (the node passes its lifecycle's); by
        # default the one the metadata names, for brokers driven without a lifecycle.
        self._own_broker_epoch = broker_epoch
        self.config = config
        self.metrics = BrokerMetrics(metrics or MetricsRegistry())  # request, produce and fetch counters
        self.controller = controller
        self.static = dict(config.static)
        self.log_manager = log_manager or LogManager(
            env, list(config.data_dirs), default_config=log_config_for(EMPTY_IMAGE, "", self.static))
        self.metadata = MetadataCache(env, config.node_id, config.listener_name)
        self.acl_index = None  # broker.authorization's index of the image's ACLs, built on first use
        self.client_quotas = ClientQuotas(env, lambda: self.metadata.image, self.metrics.registry,
                                          QuotaWindow.of_settings(self.static))
        self.purgatory = FetchPurgatory(env)
        self.fetch_sessions = FetchSessionCache(  # KIP-227: incremental fetches
            env.rng, max_slots=self._static_int("max.incremental.fetch.session.cache.slots", 1000))
        self.alter_partitions = AlterPartitionManager(env, config.node_id, controller, self._broker_epoch)
        # leader/follower.replication.throttled.* (the fetch handler and the replica fetchers)
        self.throttles = ReplicationThrottles(env.now, config.node_id, lambda: self.metadata.image, self.static)
        self.fetchers = ReplicaFetcherManager(env, config.node_id, self.broker_address, FetcherSettings(
            wait_max_ms=self._static_int("replica.fetch.wait.max.ms", 500),
            min_bytes=self._static_int("replica.fetch.min.bytes", 1),
            partition_max_bytes=self._static_int("replica.fetch.max.bytes", 1 << 20),
            response_max_bytes=self._static_int("replica.fetch.response.max.bytes", 10 << 20),
            backoff_s=self._static_int("replica.fetch.backoff.ms", 1000) / 1000, tls=config.inter_broker_tls,
            sasl=config.inter_broker_sasl),
            on_appended=self.metrics.replicated_in, throttles=self.throttles)
        replication = ReplicationSettings(
            clock=env.now, lag_time_s=self._static_int("replica.lag.time.max.ms", 30000) / 1000,
            alter_partitions=self.alter_partitions, is_isr_eligible=self._isr_eligible,
            first_unstable_offset=lambda partition: self.producer_states.first_unstable_offset(partition))
        self.replicas = ReplicaManager(env, config.node_id, self.log_manager, static=self.static,
                                       on_change=self.purgatory.notify, replication=replication,
                                       fetchers=self.fetchers)
        self.groups = GroupDriver(self)  # consumer-group coordinator (after replicas: it reads them)
        self.producer_states = ProducerStates(self)  # idempotent producer ids and dedupe state
        self.log_manager.stable_offset = self._stable_offset_for_cleaning
        self.transactions = TxnDriver(self)  # transaction coordinator on __transaction_state
        self.advertised_versions = advertised_versions()
        self.server = KafkaServer(self)
        self.port: int | None = None  # the first listener's bound port
        self.ports: dict[str, int] = {}  # listener name → bound port
        self._nursery: trio.Nursery | None = None
        self._auto_creating: set[str] = set()
        self.halt_grace_s = HALT_GRACE_S  # after a log-dir failure, before the halt (tests hold it)

    @property
    def node_id(self) -> int:
        return self.config.node_id

    @property
    def cluster_id(self) -> str | None:
        return self.config.cluster_id

    # -- metadata publisher -------------------------------------------------------
    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self.metadata.publish(delta, image)
        self.replicas.publish(delta, image)
        self.groups.publish(delta, image)
        self.transactions.publish(delta, image)

    # -- lifecycle ---------------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        owns_logs = not self.log_manager.started
        if owns_logs:
            try:
                await self.log_manager.startup()
            except KafkaStorageError as exc:  # a dir failed while its logs recovered
                raise LogDirHalt(exc.log_dir, exc) from exc
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await nursery.start(self.purgatory.run)  # serves the deadlines of every wait in it
                nursery.start_soon(self._halt_on_log_dir_failure)
                await nursery.start(self.replicas.run)
                await nursery.start(self.alter_partitions.run)
                await nursery.start(self.fetchers.run)
                nursery.start_soon(self.replicas.run_isr_expiration)
                await nursery.start(self.groups.run)
                await nursery.start(self.transactions.run)
                nursery.start_soon(self._retention)
                nursery.start_soon(self._cleaner)
                nursery.start_soon(self._flusher)
                for listener in self.config.served_listeners():
                    try:
                        self.ports[listener.security.name] = await nursery.start(self.server.serve, listener)
                    except OSError as e:
                        raise ListenerError(e.errno, e.strerror or str(e)) from e
                    for tls in listener.security.tls_contexts():
                        nursery.start_soon(tls.watch, self.env)
                self.port = next(iter(self.ports.values()))
                task_status.started(self.port)
        finally:
            self._nursery = None
            if owns_logs:  # after a log-dir failure this writes nothing (Kafka halts)
                with trio.CancelScope(shield=True):
                    await self.log_manager.shutdown()

    async def _halt_on_log_dir_failure(self) -> None:
        failures = self.log_manager.failures
        await failures.failed.wait()
        await halt_on_log_dir_failure(self.env, failures, self.replicas, grace_s=self.halt_grace_s)

    async def _retention(self) -> None:
        await self._background(self.log_manager.run_retention, self.config.retention_check_interval_s)

    async def _cleaner(self) -> None:
        # Kafka's cleaner runs on its own cadence, not the retention check's.
        await self._background(self.log_manager.run_cleaner, self.config.cleaner_backoff_s)

    async def _flusher(self) -> None:
        await self._background(self.log_manager.run_flusher, self.config.flush_check_interval_s)

    async def _background(self, task, interval: float) -> None:
        # A failing pass is logged and retried later; a disk error among them has also taken
        # its log dir offline, and the halt task ends the broker.
        while True:
            try:
                await task(interval)
            except KafkaStorageError as exc:
                log.error("%s failed: %s", task.__name__, exc)
                await self.env.sleep(interval)
            except Exception:
                log.exception("%s failed; retrying in %.0f s", task.__name__, interval)
                await self.env.sleep(interval)

    # -- replication plumbing ------------------------------------------------------
    def _stable_offset_for_cleaning(self, tp, plog) -> int:
        """The cleaner works below a replica's last stable offset, once its aborted transactions
        are indexed; a log no partition of ours holds is left alone."""
        partition = self.replicas.partitions.get(tp)
        if partition is None or partition.log is not plog:
            return plog.log_start_offset
        try:
            return self.producer_states.stable_offset(partition)
        except (LogError, CorruptRecordError, OSError) as exc:  # the cleaner skips it this time
            log.warning("no last stable offset for cleaning %s: %s", plog, exc)
            return plog.log_start_offset

    def _static_int(self, name: str, default: int) -> int:
        try:
            return int(str(self.static.get(name, default)).strip())
        except ValueError:
            return default

    def _broker_epoch(self) -> int:
        """Our registration's epoch (AlterPartition fencing). Never take a previous incarnation's
        from the metadata when a lifecycle is there: the controller would take our requests for
        that (maybe still live) registration's."""
        if self._own_broker_epoch is not None:
            return self._own_broker_epoch()
        reg = self.metadata.image.brokers.get(self.node_id)
        return -1 if reg is None else reg.epoch

    def holds_session_lease(self) -> bool:
        """False once the controller may have fenced us and moved our leaderships while our
        metadata still shows them (metadata.broker_lifecycle: the session lease)."""
        return self._session_lease is None or self._session_lease()

    def _isr_eligible(self, broker_id: int) -> bool:
        reg = self.metadata.image.brokers.get(broker_id)
        return reg is not None and reg.active

    def broker_address(self, broker_id: int) -> tuple[str, int] | None:
        """Where a source broker's Kafka listener is (our listener name)."""
        reg = self.metadata.image.brokers.get(broker_id)
        if reg is None:
            return None
        for ep in reg.endpoints:
            if ep.name == self.config.listener_name:
                return ep.host, ep.port
        return None

    # -- what handlers ask -----------------------------------------------------------
    async def leader_partition(self, topic: str, index: int, deadline: float) -> Partition | int:
        """This broker's leader replica of topic-index, or the Kafka error code to answer.

        If the image already names us leader but the replica manager has not applied
        that change yet, wait for it (bounded), so a request right after a topic
        creation or leader move is served rather than bounced."""
        topic_image = self.metadata.topic(topic)
        reg = None if topic_image is None else topic_image.partitions.get(index)
        if reg is None:
            return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        if self.log_manager.is_offline(topic, index):
            return ErrorCode.KAFKA_STORAGE_ERROR  # its log dir failed (the halt task is on its way)
        partition = self.replicas.get(topic, index)
        if reg.leader == self.node_id and not _serves(partition, topic_image.topic_id, reg.leader_epoch):
            limit = min(deadline, self.env.now() + self.config.replica_apply_timeout_s)
            await self.replicas.wait_applied(self.metadata.image.offset, max(limit, self.env.now()))
            partition = self.replicas.get(topic, index)
        if partition is None or partition.topic_id != topic_image.topic_id:
            if (topic, index) in self.replicas.offline:
                return ErrorCode.KAFKA_STORAGE_ERROR
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        if not partition.is_leader or reg.leader != self.node_id:
            # The image is the newest truth: a leadership moved away but not yet applied here
            # must not take writes (they would be truncated by the new leader's epoch).
            return ErrorCode.NOT_LEADER_OR_FOLLOWER
        return partition

    def auto_create_topics(self, names: list[str], *, allowed: bool) -> dict[str, int]:
        """Metadata's auto topic creation: error code per name for the response now
        (LEADER_NOT_AVAILABLE while being created); creation runs in the background."""
        image = self.metadata.image
        if not allowed or not effective_broker_value(image, "auto.create.topics.enable", self.static):
            return {}
        out: dict[str, int] = {}
        wanted = []
        for name in names:
            error = topic_name_error(name)
            if error is not None:
                out[name] = error
                continue
            out[name] = ErrorCode.LEADER_NOT_AVAILABLE
            if name not in self._auto_creating:
                wanted.append(name)
        if wanted and self._nursery is not None:
            self._auto_creating.update(wanted)
            self._nursery.start_soon(self._auto_create, wanted)
        return out

    async def _auto_create(self, names: list[str]) -> None:
        try:
            reply = await self.controller.create_topics([CreatableTopic(n) for n in names])
            for result in reply.results:
                if result.error not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
                    log.info("auto-creating topic %s failed: %s %s", result.name, result.error.name, result.message)
        except ControllerUnavailableError as exc:  # the client's next Metadata request asks again
            log.warning("auto-creating topics %s failed: %s", names, exc)
        except Exception:
            log.exception("auto-creating topics %s failed", names)
        finally:
            self._auto_creating.difference_update(names)


def _serves(partition: Partition | None, topic_id, leader_epoch: int) -> bool:
    return (partition is not None and partition.topic_id == topic_id and partition.is_leader
            and partition.leader_epoch >= leader_epoch)
