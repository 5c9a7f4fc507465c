"""What a client knows about the cluster: brokers, topic partitions, leaders, connections.

`Cluster` bootstraps from a list of `host:port` strings, keeps a metadata cache
for the topics its owner cares about (or all topics), refreshes it on demand
(coalescing concurrent refreshes) and when it is older than `metadata_max_age`,
and pools one `BrokerConnection` per broker. Everything it does goes through the
Env, so the same code runs over TCP and inside the simulation.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import trio

from raftkafka.client.security import PLAINTEXT_CLIENT, ClientSecurity
from raftkafka.client.connection import BrokerConnection
from raftkafka.client.errors import ClientClosedError, KafkaConnectionError, KafkaError, KafkaTimeoutError, error_for
from storage.env import Env
from wire.error_codes import ErrorCode
from wire.protocol import MetadataRequest
from wire.protocol.message import Message


__all__ = ["Cluster", "BrokerInfo", "PartitionInfo", "TopicInfo", "parse_bootstrap"]


def parse_bootstrap(servers: str | list[str] | tuple[str, ...]) -> list[tuple[str, int]]:
    """`"h1:9092,h2:9092"` or a list of `host:port` → [(host, port)]; `[::1]:9092` works too."""
    items = servers.split(",") if isinstance(servers, str) else list(servers)
    out = []
    for item in items:
        item = item.strip()
        if not item:
            continue
        host, sep, port = item.rpartition(":")
        if not sep or not port.isdigit():
            raise ValueError(f"bootstrap server {item!r} is not host:port")
        out.append((host.strip("[]") or "localhost", int(port)))
    if not out:
        raise ValueError("no bootstrap servers given")
    return out


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    partition: int
    leader: int  # -1 = none
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    error: int = 0
    leader_epoch: int = -1  # -1: the broker did not say (Metadata before v7)
    # KIP-966 eligible leader replicas; None: not asked with DescribeTopicPartitions (Metadata has none)
    elr: tuple[int, ...] | None = None
    last_known_elr: tuple[int, ...] | None = None


@dataclass(slots=True)
class TopicInfo:
    name: str
    error: int = 0
    is_internal: bool = False
    partitions: dict[int, PartitionInfo] = field(default_factory=dict)
    topic_id: object | None = None  # the topic's uuid.UUID; None: not known (Metadata before v10)
    _available: tuple[int, list[int]] | None = field(default=None, repr=False, compare=False)

    def available(self) -> list[int]:
        """Partitions with a leader, sorted. The producer asks on every send: computed once per
        state of `partitions` (a metadata answer fills it once; computed per send, it would be half
        of our producer's CPU on a 1000-partition topic)."""
        key = id(self.partitions), len(self.partitions)
        if self._available is None or self._available[0] != key:
            self._available = key, [p for p, info in sorted(self.partitions.items()) if info.leader >= 0]
        return self._available[1]


class Cluster:
    def __init__(self, env: Env, nursery: trio.Nursery, bootstrap_servers, *, client_id: str = "raftkafka",
                 request_timeout: float = 30.0, retry_backoff: float = 0.1, metadata_max_age: float = 300.0,
                 allow_auto_topic_creation: bool = False, security: ClientSecurity = PLAINTEXT_CLIENT):
        self.env = env
        self.security = security
        self.client_id = client_id
        self.request_timeout = request_timeout
        self.retry_backoff = retry_backoff
        self.metadata_max_age = metadata_max_age
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.bootstrap = parse_bootstrap(bootstrap_servers)
        self.brokers: dict[int, BrokerInfo] = {}
        self.topics: dict[str, TopicInfo] = {}
        self.cluster_id: str | None = None
        self.controller_id: int = -1
        self.wanted_topics: set[str] = set()
        self.want_all_topics = False
        self.last_refresh = float("-inf")
        self._nursery = nursery
        self._connections: dict[tuple[str, int], BrokerConnection] = {}
        self._connecting: dict[tuple[str, int], trio.Event] = {}
        self._refreshing: trio.Event | None = None
        self._refresh_error: Exception | None = None
        self._next_bootstrap = 0
        self._older_answers: dict[tuple[str, int], int] = {}  # refreshes in a row that went back in epoch
        self._closed = False

    # ------------------------------------------------------------------ connections

    async def connect(self, host: str, port: int, node_id: int = -1) -> BrokerConnection:
        """The pooled connection to host:port, opened on first use (one opener at a time)."""
        key = (host, port)
        while True:
            if self._closed:
                raise ClientClosedError("client closed")
            conn = self._connections.get(key)
            if conn is not None and not conn.closed:
                return conn
            waiting = self._connecting.get(key)
            if waiting is None:
                break
            await waiting.wait()
        done = self._connecting[key] = trio.Event()
        try:
            conn = await BrokerConnection.open(self.env, self._nursery, host, port, node_id=node_id,
                                               client_id=self.client_id, request_timeout=self.request_timeout,
                                               security=self.security)
            self._connections[key] = conn
            return conn
        finally:
            del self._connecting[key]
            done.set()

    async def connection(self, node_id: int) -> BrokerConnection:
        broker = self.brokers.get(node_id)
        if broker is None:
            await self.refresh()
            broker = self.brokers.get(node_id)
            if broker is None:
                raise KafkaConnectionError(f"broker {node_id} is not in the cluster metadata")
        return await self.connect(broker.host, broker.port, node_id)

    def ready_connection(self, node_id: int) -> BrokerConnection | None:
        """The pooled connection to `node_id` if it is open now (no awaiting), else None."""
        broker = self.brokers.get(node_id)
        if broker is None or self._closed:
            return None
        conn = self._connections.get((broker.host, broker.port))
        return conn if conn is not None and not conn.closed else None

    async def any_connection(self) -> BrokerConnection:
        """A connection to some broker: known brokers first, then the bootstrap list, round robin."""
        candidates = [(b.host, b.port, b.node_id) for _, b in sorted(self.brokers.items())]
        candidates += [(h, p, -1) for h, p in self.bootstrap]
        last_error: Exception | None = None
        for i in range(len(candidates)):
            host, port, node_id = candidates[(self._next_bootstrap + i) % len(candidates)]
            try:
                conn = await self.connect(host, port, node_id)
                self._next_bootstrap = (self._next_bootstrap + i) % len(candidates)
                return conn
            except KafkaConnectionError as exc:
                last_error = exc
        self._next_bootstrap += 1
        raise KafkaConnectionError(f"no broker reachable (last error: {last_error})")

    async def request_any(self, body: Message, **kwargs) -> Message:
        return await (await self.any_connection()).request(body, **kwargs)

    async def send(self, node_id: int, body: Message, **kwargs) -> Message:
        return await (await self.connection(node_id)).request(body, **kwargs)

    # ------------------------------------------------------------------ metadata

    def add_topics(self, topics) -> bool:
        """Track more topics; True if any was new (the caller may want a refresh)."""
        new = set(topics) - self.wanted_topics
        self.wanted_topics |= new
        return bool(new)

    def stale(self) -> bool:
        return self.env.now() - self.last_refresh >= self.metadata_max_age

    async def refresh(self, topics=None) -> None:
        """Fetch metadata for the tracked topics (plus `topics`); concurrent callers share one request."""
        if topics:
            self.add_topics(topics)
        if self._refreshing is not None:
            event = self._refreshing
            await event.wait()
            if self._refresh_error is not None:
                raise self._refresh_error
            return
        self._refreshing = trio.Event()
        self._refresh_error = None
        try:
            await self._refresh_once()
        except KafkaError as exc:
            self._refresh_error = exc
            raise
        finally:
            event, self._refreshing = self._refreshing, None
            event.set()

    async def _refresh_once(self) -> None:
        names = None if self.want_all_topics else [
            MetadataRequest.MetadataRequestTopic(name=t) for t in sorted(self.wanted_topics)]
        request = MetadataRequest(topics=names, allow_auto_topic_creation=self.allow_auto_topic_creation)
        deadline = self.env.now() + self.request_timeout
        while True:
            try:
                response = await self.request_any(request)
                break
            except KafkaConnectionError:
                if self.env.now() >= deadline:
                    raise KafkaTimeoutError("metadata refresh: no broker answered") from None
                await self.env.sleep(self.retry_backoff)
        self._apply(response)

    def _apply(self, response) -> None:
        self.brokers = {b.node_id: BrokerInfo(b.node_id, b.host, b.port, b.rack) for b in response.brokers}
        self.cluster_id = response.cluster_id
        self.controller_id = response.controller_id
        previous = self.topics
        topics = {} if self.want_all_topics else dict(self.topics)
        for t in response.topics:
            topic_id = getattr(t, "topic_id", None)
            info = TopicInfo(t.name, t.error_code, t.is_internal,
                             topic_id=topic_id if topic_id and topic_id.int else None)
            known = previous.get(t.name)
            for p in t.partitions:
                partition = PartitionInfo(p.partition_index, p.leader_id, tuple(p.replica_nodes),
                                          tuple(p.isr_nodes), p.error_code, p.leader_epoch)
                seen = known.partitions.get(p.partition_index) if known is not None and not t.error_code else None
                key = (t.name, p.partition_index)
                if seen is not None and partition.leader_epoch < seen.leader_epoch \
                        and self._older_answers.get(key, 0) < len(self.brokers):
                    # KIP-320: this broker's view is older than one we had (it lags the metadata
                    # log, or was paused while leadership moved on): keep the newer leader and
                    # ask another broker next. Without topic ids (Metadata v10) a topic deleted
                    # and re-created restarts its epochs: when every broker agrees, accept it.
                    self._older_answers[key] = self._older_answers.get(key, 0) + 1
                    self._next_bootstrap += 1
                    partition = seen
                else:
                    self._older_answers.pop(key, None)
                info.partitions[p.partition_index] = partition
            topics[t.name] = info
        self.topics = topics
        self.last_refresh = self.env.now()

    def cached_topic(self, name: str, now: float) -> TopicInfo | None:
        """Metadata for `name` if it is known, usable and fresh at `now`: the common case, on
        every send (no sets built, no awaits); None when `topic()` must look."""
        info = self.topics.get(name)
        if info is not None and info.partitions and not info.error and name in self.wanted_topics \
                and now - self.last_refresh < self.metadata_max_age:
            return info
        return None

    async def topic(self, name: str, *, wait: float | None = None) -> TopicInfo:
        """Metadata for `name`, refreshing until it has partitions or `wait` seconds pass.

        Raises `BrokerResponseError(UNKNOWN_TOPIC_OR_PARTITION)` when it still does not exist.
        """
        info = self.cached_topic(name, self.env.now())
        if info is not None:
            return info
        deadline = self.env.now() + (self.request_timeout if wait is None else wait)
        if self.add_topics([name]) or name not in self.topics or self.stale():
            await self.refresh()
        while True:
            info = self.topics.get(name)
            if info is not None and not info.error and info.partitions:
                return info
            code = info.error if info is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            retriable = ErrorCode.of(code).retriable or code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            if not retriable or self.env.now() + self.retry_backoff > deadline:
                raise error_for(code or ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, context=f"topic {name!r}")
            await self.env.sleep(self.retry_backoff)
            await self.refresh()

    def leader(self, topic: str, partition: int) -> int:
        info = self.topics.get(topic)
        if info is None:
            return -1
        p = info.partitions.get(partition)
        return p.leader if p is not None else -1

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The leader epoch our metadata has for the partition (-1: unknown)."""
        info = self.topics.get(topic)
        p = None if info is None else info.partitions.get(partition)
        return p.leader_epoch if p is not None else -1

    def topic_id(self, topic: str):
        """The topic's id (a uuid.UUID) as Metadata gave it; None if not known."""
        info = self.topics.get(topic)
        return None if info is None else info.topic_id

    def take_leader_hints(self, hints: dict) -> list:
        """KIP-951: take the new leaders a refused request's answer named ({(topic, partition):
        hint with leader_id, leader_epoch, endpoint}) where they are newer than our metadata and
        we know (or the hint carries) the leader's endpoint. The partitions taken, whose next
        request goes to the new leader without a Metadata round."""
        taken = []
        for (topic, index), hint in hints.items():
            info = self.topics.get(topic)
            p = None if info is None else info.partitions.get(index)
            if p is None or hint.leader_epoch <= p.leader_epoch:
                continue
            if hint.leader_id not in self.brokers:
                if hint.endpoint is None:
                    continue
                host, port, rack = hint.endpoint
                self.brokers[hint.leader_id] = BrokerInfo(hint.leader_id, host, port, rack)
            info.partitions[index] = dataclasses.replace(p, leader=hint.leader_id, leader_epoch=hint.leader_epoch)
            info._available = None
            taken.append((topic, index))
        return taken

    # ------------------------------------------------------------------ closing

    async def aclose(self) -> None:
        self._closed = True
        for _, conn in sorted(self._connections.items()):
            await conn.aclose()
        self._connections.clear()
