"""Replication throttles (Kafka's ReplicationQuotaManager, KIP-73), one per direction.

Which replicas are throttled comes from the topic configs `leader.replication.throttled.replicas`
(on the broker sending: `partition:broker` entries naming this broker, or `*`) and
`follower.replication.throttled.replicas` (on the broker receiving); how fast, from the broker
configs `leader.replication.throttled.rate` / `follower.replication.throttled.rate` (bytes/s;
dynamic per broker, or as the cluster default).

As Kafka: the leader leaves a throttled partition out of a follower's Fetch answer while the
follower is not in the ISR and the leader quota is exceeded; the follower leaves a throttled
partition out of its Fetch while it is not in the ISR and its quota is exceeded. Every byte of
a throttled partition counts against the quota (in-sync replicas too), so catching-up replicas
get what is left. The rate is measured as Kafka's: bytes over the last 11 one-second samples,
the window never counted as shorter than 10 s.

Pure state over the Env's clock; the metadata image is read lazily (the throttled partition
sets are rebuilt when the image's configs change).
"""
from __future__ import annotations

import collections
from typing import Callable, Mapping

from metadata.config_definitions import BROKER_CONFIGS, TOPIC_CONFIGS, parse, resolve_broker_config
from metadata.errors import ApiError
from metadata.image import BROKER_RESOURCE, TOPIC_RESOURCE, MetadataImage

__all__ = ["RateQuota", "ReplicationThrottles", "LEADER", "FOLLOWER"]

LEADER, FOLLOWER = "leader", "follower"
SAMPLES = 11  # replication.quota.window.num
SAMPLE_S = 1.0  # replication.quota.window.size.seconds
UNLIMITED = float("inf")


class RateQuota:
    """Bytes per second over a sliding window of samples (Kafka's Rate with SampledStat)."""

    def __init__(self, clock: Callable[[], float], *, samples: int = SAMPLES, sample_s: float = SAMPLE_S):
        self.clock = clock
        self.samples, self.sample_s = samples, sample_s
        self.limit = UNLIMITED
        self._windows: collections.deque[list] = collections.deque()  # [start, bytes]

    def record(self, nbytes: int) -> None:
        now = self.clock()
        self._purge(now)
        if not self._windows or now >= self._windows[-1][0] + self.sample_s:
            self._windows.append([now, 0])
        self._windows[-1][1] += nbytes

    def rate(self) -> float:
        now = self.clock()
        self._purge(now)
        if not self._windows:
            return 0.0
        elapsed = max(now - self._windows[0][0], (self.samples - 1) * self.sample_s)
        return sum(w[1] for w in self._windows) / elapsed

    def exceeded(self) -> bool:
        return self.limit != UNLIMITED and self.rate() > self.limit

    def _purge(self, now: float) -> None:
        horizon = now - self.samples * self.sample_s
        while self._windows and self._windows[0][0] + self.sample_s <= horizon:
            self._windows.popleft()


class ReplicationThrottles:
    def __init__(self, clock: Callable[[], float], node_id: int, image: Callable[[], MetadataImage],
                 static: Mapping[str, str] | None = None):
        self.node_id = node_id
        self._image = image
        self._static = dict(static or {})
        self.quotas = {LEADER: RateQuota(clock), FOLLOWER: RateQuota(clock)}
        self._configs = None  # the image configs the sets below were built from
        self._throttled: dict[str, dict[str, bool | frozenset[int]]] = {LEADER: {}, FOLLOWER: {}}

    def throttled(self, side: str, topic: str, partition: int) -> bool:
        self._refresh()
        entry = self._throttled[side].get(topic)
        return entry is True or (entry is not None and entry is not False and partition in entry)

    def should_throttle(self, side: str, topic: str, partition: int, in_sync: bool) -> bool:
        """Leave this partition out of the fetch now (Kafka's shouldLeaderThrottle /
        shouldFollowerThrottle)."""
        return not in_sync and self.throttled(side, topic, partition) and self.quotas[side].exceeded()

    def record(self, side: str, topic: str, partition: int, nbytes: int) -> None:
        if nbytes and self.throttled(side, topic, partition):
            self.quotas[side].record(nbytes)

    def _refresh(self) -> None:
        image = self._image()
        if image.configs is self._configs:
            return
        self._configs = image.configs
        mine = image.configs.get((BROKER_RESOURCE, str(self.node_id)), {})
        for side in (LEADER, FOLLOWER):
            self.quotas[side].limit = _rate(f"{side}.replication.throttled.rate", mine,
                                            image.broker_config(None), self._static)
            name = f"{side}.replication.throttled.replicas"
            sets = {}
            for (rtype, rname), values in image.configs.items():
                if rtype == TOPIC_RESOURCE and values.get(name):
                    sets[rname] = _partitions_here(values[name], name, self.node_id)
            self._throttled[side] = sets


def _rate(name: str, mine, cluster_default, static) -> float:
    d = BROKER_CONFIGS[name]
    for resolved in resolve_broker_config(name, mine, cluster_default, static):
        try:
            value = parse(d, resolved.value)
        except ApiError:
            continue
        return UNLIMITED if value >= (1 << 63) - 1 else float(value)
    return UNLIMITED


def _partitions_here(value: str, name: str, node_id: int) -> bool | frozenset[int]:
    """True for `*`; else the partitions whose `partition:broker` entry names this broker."""
    try:
        items = parse(TOPIC_CONFIGS[name], value)
    except ApiError:
        return False
    if items == ["*"]:
        return True
    out = set()
    for item in items:
        partition, _, broker = item.partition(":")
        if int(broker) == node_id:
            out.add(int(partition))
    return frozenset(out)
