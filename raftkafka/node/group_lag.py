"""End offsets for `raftkafka_consumer_group_lag`, for every partition of every group this
node coordinates.

A group's committed offsets live with its coordinator, but the partitions it consumes are
led anywhere in the cluster. A replica hosted here gives its high watermark directly;
for the others the tracker asks their leaders with ListOffsets (latest) through our own
client, once per `interval_s`, and serves the last answer at scrape time:

    tracker = GroupLagTracker(env, broker, "127.0.0.1:9092")
    nursery.start_soon(tracker.run)
    register_group_lag(registry, tracker.committed, tracker.end_offset)

Bounded: at most `max_partitions` remote partitions per round (the rest have no series),
one request per leader per round; a round that fails (a leader away, a topic just
deleted) keeps the previous answers, is logged, and the next round tries again.
"""
from __future__ import annotations

import logging

import trio

from raftkafka.client.cluster import Cluster
from raftkafka.client.errors import KafkaError
from raftkafka.client.offsets import LATEST, list_offsets

__all__ = ["GroupLagTracker"]

log = logging.getLogger(__name__)

Key = tuple[str, int]


class GroupLagTracker:
    def __init__(self, env, broker, bootstrap: str, *, interval_s: float = 5.0,
                 max_partitions: int = 10_000):
        self.env = env
        self.broker = broker
        self.bootstrap = bootstrap
        self.interval_s = interval_s
        self.max_partitions = max_partitions
        self.remote: dict[Key, int] = {}  # last known end of partitions not hosted here
        self.rounds = 0

    def committed(self) -> list[tuple[str, str, int, int]]:
        """(group, topic, partition, offset) of the groups whose offsets partitions we lead."""
        groups = self.broker.groups.coordinator.groups
        return [(group_id, topic, partition, meta.offset)
                for group_id in sorted(groups)
                for (topic, partition), meta in sorted(groups[group_id].offsets.items())]

    def end_offset(self, topic: str, partition: int) -> int | None:
        replica = self.broker.replicas.get(topic, partition)
        if replica is not None:
            return replica.high_watermark  # a follower's is at most one fetch behind the leader's
        return self.remote.get((topic, partition))

    def _remote_wanted(self) -> list[Key]:
        """Committed partitions that exist, have a leader and are not hosted here."""
        wanted = set()
        for _, topic, partition, _ in self.committed():
            if self.broker.replicas.get(topic, partition) is not None:
                continue
            reg = self.broker.metadata.partition(topic, partition)
            if reg is not None and reg.leader >= 0:
                wanted.add((topic, partition))
        return sorted(wanted)[:self.max_partitions]

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            cluster = Cluster(self.env, nursery, self.bootstrap, client_id=f"raftkafka-lag-{self.broker.node_id}",
                              request_timeout=max(1.0, self.interval_s))
            try:
                while True:
                    await self._round(cluster)
                    await self.env.sleep(self.interval_s)
            finally:
                with trio.CancelScope(shield=True):
                    await cluster.aclose()

    async def _round(self, cluster: Cluster) -> None:
        wanted = self._remote_wanted()
        self.rounds += 1
        if not wanted:
            self.remote = {}
            return
        try:
            answers = await list_offsets(cluster, {key: LATEST for key in wanted})
        except (KafkaError, OSError, trio.BrokenResourceError) as exc:
            log.info("consumer lag: end offsets of %d partitions not fetched this round: %s", len(wanted), exc)
            self.remote = {key: self.remote[key] for key in wanted if key in self.remote}
            return
        self.remote = {key: answers[key][0] for key in wanted if key in answers}
