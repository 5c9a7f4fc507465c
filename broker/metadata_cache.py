"""The broker's view of cluster metadata: a publisher holding the latest image.

Answers what Metadata, DescribeCluster and the data-path handlers need to
know: which brokers are alive and where they listen, who leads a partition.
Handlers that changed metadata through the controller wait here until the
published image has reached the commit offset.

Metadata answers list a broker for FENCED_LISTED_S after this broker saw it
fenced (it leads nothing then and counts as offline in every partition). A
dead broker's partitions move to their new leaders in the same record that
fences it; librdkafka (2.10+) drops a broker missing from an answer at once,
and one dropped while its partitions are moving away strands them on its
internal queue until the next leader query, a second later. Listed a little
longer, the broker is dropped after its partitions have moved (as after
Kafka's controlled shutdown, which moves the leaders before the fencing).
"""
from __future__ import annotations

from dataclasses import dataclass

import trio

from broker.connection_context import current_security
from metadata.delta import MetadataDelta
from metadata.image import EMPTY_IMAGE, MetadataImage, TopicImage
from metadata.partition import PartitionRegistration
from storage.env import Env

__all__ = ["MetadataCache", "BrokerEndpoint", "FENCED_LISTED_S"]

FENCED_LISTED_S = 3.0  # librdkafka asks for leaders it misses once a second


@dataclass(frozen=True)
class BrokerEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None


class MetadataCache:
    name = "metadata-cache"

    def __init__(self, env: Env, node_id: int, listener_name: str = "PLAINTEXT"):
        self.env = env
        self.node_id = node_id
        self.listener_name = listener_name
        self.image: MetadataImage = EMPTY_IMAGE
        self._changed = trio.Event()
        self._fenced_at: dict[int, float] = {}  # broker -> when this broker saw it fenced

    # -- publisher ------------------------------------------------------------
    def publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        now = self.env.now()
        for broker_id in delta.changed_brokers():
            before, after = self.image.brokers.get(broker_id), image.brokers.get(broker_id)
            if after is not None and after.fenced and before is not None and not before.fenced:
                self._fenced_at[broker_id] = now
            elif after is None or not after.fenced:
                self._fenced_at.pop(broker_id, None)
        self.image = image
        self._changed.set()
        self._changed = trio.Event()

    async def wait_for_offset(self, offset: int, deadline: float) -> bool:
        """Wait (until the Env-time `deadline`) for an image at or past `offset`."""
        with self.env.move_on_at(deadline):
            while self.image.offset < offset:
                await self._changed.wait()
        return self.image.offset >= offset

    async def wait_until(self, predicate, deadline: float) -> bool:
        with self.env.move_on_at(deadline):
            while not predicate(self.image):
                await self._changed.wait()
        return predicate(self.image)

    # -- lookups --------------------------------------------------------------
    def topic(self, name: str) -> TopicImage | None:
        return self.image.topics_by_name.get(name)

    def partition(self, topic: str, partition: int) -> PartitionRegistration | None:
        t = self.image.topics_by_name.get(topic)
        return None if t is None else t.partitions.get(partition)

    def alive_brokers(self) -> list[BrokerEndpoint]:
        """Unfenced brokers with an endpoint on the listener the request came in on (ours
        outside a connection), by id: a client sees the endpoints it can reach, as in Kafka."""
        return self._endpoints(self.image.unfenced_brokers())

    def listed_brokers(self) -> list[BrokerEndpoint]:
        """Metadata's broker list: the alive brokers and those fenced in the last
        FENCED_LISTED_S (see the module doc)."""
        since = self.env.now() - FENCED_LISTED_S
        for broker_id in [b for b, at in self._fenced_at.items() if at < since]:
            del self._fenced_at[broker_id]
        return self._endpoints(sorted({*self.image.unfenced_brokers(), *self._fenced_at}))

    def _endpoints(self, broker_ids) -> list[BrokerEndpoint]:
        security = current_security()
        listener = security.listener if security is not None else self.listener_name
        out = []
        for broker_id in broker_ids:
            reg = self.image.brokers.get(broker_id)
            for ep in () if reg is None else reg.endpoints:
                if ep.name == listener:
                    out.append(BrokerEndpoint(broker_id, ep.host, ep.port, reg.rack))
                    break
        return out

    def is_alive(self, broker_id: int) -> bool:
        reg = self.image.brokers.get(broker_id)
        return reg is not None and not reg.fenced

    def controller_id(self) -> int:
        """What clients see as "the controller": a live broker that forwards admin requests
        (in KRaft the real controllers are not client-reachable). Prefer ourselves."""
        alive = [b.node_id for b in self.alive_brokers()]
        if self.node_id in alive or not alive:
            return self.node_id if alive else -1
        return alive[0]
