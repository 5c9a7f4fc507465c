"""The replica manager: opens, updates and deletes this broker's partitions as metadata changes.

A metadata publisher (Kafka's ReplicaManager.applyDelta). `publish` is called
synchronously by the metadata loader; it only queues the delta's local replica
changes, and the `run` task applies them in order (opening a log is async I/O).
Requests that race a just-published change wait with `wait_applied`.

Per delta, in order: deleted partitions (logs removed, fetchers woken), topic
config changes (pushed into the logs' LogConfig), then new and changed replicas
— opened as leader or follower with the registration's leader epoch. A log is
opened under the image's topic id (storage.log.partition_metadata): a directory
left by an older topic of the same name (deleted and re-created while this
broker was down or fenced) is set aside and an empty log re-fetches the new
topic. On the first delta, logs on disk that the image does not place here, or
whose recorded topic id is not the image's, are strays (Kafka's
findStrayReplicas): they are set aside as `...-stray`, never deleted, so an
image that lacks them by mistake costs no data. Logs are deleted only on a
deletion or reassignment away that this broker applies from the metadata log.

Replication hangs off this: after each applied delta the replica fetchers are
told the full set of partitions this broker follows (`fetchers.sync`), and
`run_isr_expiration` periodically asks every leader partition to drop
followers that fell behind (ISR/HW logic lives in broker.partition/isr).

A failed log dir (broker.log_dir_failure_handler) takes its partitions offline for
good: `handle_log_dir_failure` drops them (requests get KAFKA_STORAGE_ERROR,
their fetchers stop) and later metadata never reopens them.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

import trio

from broker.partition import Partition, ReplicationSettings
from broker.topic_log_config import log_config_for
from metadata.controller.dynamic_configs import effective_topic_value
from metadata.delta import LocalReplicaChanges, MetadataDelta
from metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage
from storage.env import Env
from storage.log import LogManager
from storage.log.log_dir_failure import DescriptorsExhaustedError

__all__ = ["ReplicaManager"]

REOPEN_RETRY_S = 1.0  # a log that could not be opened for want of file descriptors is tried again
log = logging.getLogger(__name__)
Key = tuple[str, int]


@dataclass
class _Pending:
    changes: LocalReplicaChanges
    config_topics: list[str] | None  # None = every topic (a broker-level default changed)
    image: MetadataImage
    first: bool


class ReplicaManager:
    name = "replica-manager"

    def __init__(self, env: Env, node_id: int, log_manager: LogManager, *, static=None, on_change=None,
                 replication: ReplicationSettings | None = None, fetchers=None):
        self.env = env
        self.node_id = node_id
        self.replication = replication or ReplicationSettings()
        self.fetchers = fetchers  # broker.replica_fetcher.ReplicaFetcherManager (None: no replication)
        self.log_manager = log_manager
        self.static = dict(static or {})
        self.on_change = on_change  # called with (topic, partition) on appends and role changes
        self.partitions: dict[Key, Partition] = {}
        self.offline: dict[Key, str] = {}  # partitions whose log could not be opened
        self._unopened: set[Key] = set()  # ... for want of file descriptors: retried
        self._image: MetadataImage | None = None  # the last image applied
        self.applied_offset = -1
        self._queue: list[_Pending] = []
        self._wake = trio.Event()
        self._applied = trio.Event()
        self._published_once = False

    # -- publisher ---------------------------------------------------------------
    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        config_topics: list[str] | None = []
        for rtype, rname in delta.changed_config_resources():
            if rtype == BROKER_RESOURCE:
                config_topics = None
                break
            if rtype == TOPIC_RESOURCE:
                config_topics.append(rname)
        if delta.features_changed():
            config_topics = None  # eligible leader replicas on or off: every HW floor changes
        self._queue.append(_Pending(delta.local_changes(self.node_id), config_topics, image,
                                    first=not self._published_once))
        self._published_once = True
        self._wake.set()

    # -- the apply task -----------------------------------------------------------
    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        while True:
            with self.env.move_on_after(REOPEN_RETRY_S if self._unopened else float("inf")):
                await self._wake.wait()
            self._wake = trio.Event()
            await self.apply_pending()
            await self._retry_unopened()

    async def _retry_unopened(self) -> None:
        """Open again the logs that failed for want of file descriptors (never a disk failure)."""
        image = self._image
        for key in sorted(self._unopened):
            self._unopened.discard(key)
            topic = image.topics_by_name.get(key[0]) if image is not None else None
            registration = topic.partitions.get(key[1]) if topic is not None else None
            if registration is not None and self.node_id in registration.replicas and key not in self.partitions:
                await self._open_or_update(key, registration, image)

    async def apply_pending(self) -> None:
        while self._queue:
            pending = self._queue.pop(0)
            await self._apply(pending)
            self._image = pending.image
            self._sync_fetchers()
            self.applied_offset = pending.image.offset
            self._applied.set()
            self._applied = trio.Event()

    async def wait_applied(self, offset: int, deadline: float) -> bool:
        with self.env.move_on_at(deadline):
            while self.applied_offset < offset:
                await self._applied.wait()
        return self.applied_offset >= offset

    def get(self, topic: str, partition: int) -> Partition | None:
        return self.partitions.get((topic, partition))

    # -- replication ----------------------------------------------------------------
    def _sync_fetchers(self) -> None:
        if self.fetchers is not None:
            self.fetchers.sync({k: p for k, p in self.partitions.items() if not p.is_leader})

    def handle_log_dir_failure(self, data_dir: str, reason: str) -> list[Key]:
        """Kafka's handleLogDirFailure: every partition in `data_dir` goes offline (no
        longer served, no longer fetched); returns them."""
        lost = [key for key in sorted(self.partitions) if self.log_manager.data_dir_of(*key) == data_dir]
        for key in lost:
            del self.partitions[key]
            self.offline[key] = reason
            self._changed(key)  # parked fetches and acks=all waits re-check and find it gone
        self._sync_fetchers()
        return lost

    def shrink_isrs(self) -> int:
        """One pass of Kafka's isr-expiration task; returns how many partitions shrank."""
        return sum(1 for key in sorted(self.partitions) if self.partitions[key].maybe_shrink_isr())

    def follower_connection_closed(self, replica_id: int) -> int:
        """A follower's fetch connection closed: shrink the ISRs it is in; returns how many."""
        return sum(1 for key in sorted(self.partitions)
                   if self.partitions[key].on_follower_connection_closed(replica_id))

    async def run_isr_expiration(self) -> None:
        """Every half lag period, as Kafka schedules it."""
        while True:
            await self.env.sleep(self.replication.lag_time_s / 2)
            try:
                self.shrink_isrs()
            except Exception:  # must not stop the broker; the next pass retries
                log.exception("ISR expiration pass failed")

    @property
    def under_replicated_count(self) -> int:
        return sum(1 for p in self.partitions.values() if p.under_replicated)

    async def _apply(self, p: _Pending) -> None:
        changes, image = p.changes, p.image
        for key in sorted(changes.deletes):
            await self._delete(key)
        if p.first or p.config_topics is None:
            # The first image after a start as well: the logs opened from disk took the broker defaults.
            topics = sorted({t for t, _ in self.partitions} | {t for (t, _), _ in self.log_manager.all_logs()})
        else:
            topics = sorted(set(p.config_topics))
        for topic in topics:
            if topic in image.topics_by_name:
                self.log_manager.set_topic_config(topic, log_config_for(image, topic, self.static, self.node_id))
        if p.first:
            await self._set_aside_strays(image)
        replicas = {**changes.followers, **changes.leaders, **changes.elected_leaders}
        await self._create_new_logs(sorted(replicas), image)
        for key in sorted(replicas):
            await self._open_or_update(key, replicas[key], image)
        changed_topics = set(topics)
        for key in sorted(self.partitions):
            if key[0] in changed_topics and key not in replicas:
                partition = self.partitions[key]
                partition.hw_min_isr = self._hw_min_isr(image, key[0], partition.registration.replicas)

    async def _create_new_logs(self, keys: list[Key], image: MetadataImage) -> None:
        """Open the logs of brand-new replicas in one concurrent batch (a new 1000-partition topic
        otherwise waits on thousands of fsyncs one by one); failures are retried, and reported,
        one at a time by _open_or_update."""
        configs: dict[str, object] = {}
        wanted = []
        for topic, index in keys:
            if (topic, index) in self.partitions or topic not in image.topics_by_name:
                continue
            if self.log_manager.get_log(topic, index) is not None:
                continue
            if topic not in configs:
                configs[topic] = log_config_for(image, topic, self.static, self.node_id)
            wanted.append((topic, index, configs[topic], image.topics_by_name[topic].topic_id))
        if len(wanted) > 1:
            try:
                await self.log_manager.create_logs(wanted)
            except Exception:  # e.g. a data dir that cannot be synced: the one-by-one path reports it
                log.exception("creating %d new logs at once failed", len(wanted))

    async def _open_or_update(self, key, registration, image: MetadataImage) -> None:
        topic, index = key
        topic_image = image.topics_by_name.get(topic)
        if topic_image is None:
            return
        current = self.partitions.get(key)
        if current is not None and current.topic_id != topic_image.topic_id:
            await self._delete(key)  # same name, new topic: the old log must not leak into it
            current = None
        if current is not None:
            current.hw_min_isr = self._hw_min_isr(image, topic, registration.replicas)  # before a new role
            current.update(registration)
            return
        if self.log_manager.is_offline(topic, index):
            return  # its log dir failed: offline until the broker restarts
        try:
            config = log_config_for(image, topic, self.static, self.node_id)
            plog = await self.log_manager.get_or_create_log(topic, index, config, topic_image.topic_id)
        except Exception as exc:  # a storage failure takes this partition offline, not the broker
            if isinstance(exc, DescriptorsExhaustedError):
                log.error("cannot open log for %s-%d now: %s; retrying in %.0f s", topic, index, exc, REOPEN_RETRY_S)
                self._unopened.add(key)
            else:
                log.exception("cannot open log for %s-%d", topic, index)
            self.offline[key] = f"{type(exc).__name__}: {exc}"
            return
        self.offline.pop(key, None)
        self.partitions[key] = Partition(topic, index, topic_image.topic_id, plog, registration,
                                         self.node_id, on_change=self.on_change, replication=self.replication,
                                         hw_min_isr=self._hw_min_isr(image, topic, registration.replicas))
        self._changed(key)

    def _hw_min_isr(self, image: MetadataImage, topic: str, replicas) -> int:
        """KIP-966's strict min ISR: with eligible leader replicas on, the HW waits for
        min(min.insync.replicas, RF) ISR members."""
        if not image.elr_enabled() or topic not in image.topics_by_name:
            return 1
        min_isr = effective_topic_value(image, topic, "min.insync.replicas", self.static)
        return max(1, min(int(min_isr), len(replicas)))

    async def _delete(self, key: Key) -> None:
        self.partitions.pop(key, None)
        self.offline.pop(key, None)
        try:
            await self.log_manager.delete_log(*key)
        except Exception:
            log.exception("cannot delete log for %s-%d", *key)
        self._changed(key)

    async def _set_aside_strays(self, image: MetadataImage) -> None:
        for (topic, index), _ in self.log_manager.all_logs():
            topic_image = image.topics_by_name.get(topic)
            reg = None if topic_image is None else topic_image.partitions.get(index)
            on_disk = self.log_manager.topic_id_of(topic, index)
            if reg is None or self.node_id not in reg.replicas or on_disk not in (None, topic_image.topic_id):
                try:
                    await self.log_manager.set_aside_stray(topic, index)
                except Exception:  # a storage failure takes the dir offline, not the broker
                    log.exception("cannot set aside stray log %s-%d", topic, index)

    def _changed(self, key: Key) -> None:
        if self.on_change is not None:
            self.on_change(key)
