"""controller_mutation_rate (KIP-599) on the active controller, as Kafka's
ControllerMutationQuotaManager: partitions created by CreateTopics / CreatePartitions and
removed by DeleteTopics, counted against the quota of the client that asked (the user and
client-id the forwarding broker carries in the request), with Kafka's precedence
(metadata.client_quotas.resolve).

Each entity has a token bucket holding `(quota.window.num - 1) * quota.window.size.seconds`
seconds' worth of the quota (10 s by default), refilled at the quota rate; a mutation takes one token per partition and
may take the bucket below zero. A request's `RequestQuota` records its topics one by one:

- strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic whose turn
  comes while the bucket is in debt is refused with THROTTLING_QUOTA_EXCEEDED and changes
  nothing; the throttle is the time the debt takes to refill;
- permissive (older versions): every topic is recorded, and the throttle is the debt's
  refill time after the last one.

The buckets live in this controller's memory only, as Kafka's: a new active controller
starts with full buckets. Each entity's admitted partitions are also measured as a rate over
the quota windows, and each throttled request's throttle as an average (Kafka's
ControllerMutation `mutation-rate` and `throttle-time`): `MutationQuotas.stats` for metrics.
Sans-IO: time (seconds) is passed in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, NamedTuple

from metadata.client_quotas import CONTROLLER_MUTATION_RATE, Entity, resolve
from metrics.sampled_stats import QuotaWindow, SampledAvg, SampledRate
from wire.error_codes import ErrorCode

__all__ = ["MutationRequester", "MutationQuotas", "MutationStats", "RequestQuota", "TokenBucket",
           "THROTTLING_MESSAGE"]

IDLE_EXPIRY_S = 3600.0  # an entity idle this long is forgotten (Kafka's inactive-sensor expiry)
THROTTLING_MESSAGE = "The throttling quota has been exceeded."


@dataclass(frozen=True, slots=True)
class MutationRequester:
    """Who asks for a mutation, as the forwarding broker saw it."""
    user: str = "ANONYMOUS"
    client_id: str = ""
    strict: bool = False  # the request's version answers THROTTLING_QUOTA_EXCEEDED


class TokenBucket:
    """KIP-599's bucket; starts full. `take` may leave it below zero (the debt is the throttle)."""
    __slots__ = ("burst_s", "tokens", "last_s")

    def __init__(self, burst_s: float = QuotaWindow().burst_s):
        self.burst_s = burst_s  # it holds this many seconds of the quota
        self.tokens: float | None = None  # full at the first use, whatever the quota then
        self.last_s = 0.0

    def measure(self, quota: float, now_s: float) -> float:
        self.tokens = self.tokens_at(quota, now_s)
        self.last_s = now_s
        return self.tokens

    def tokens_at(self, quota: float, now_s: float) -> float:
        """The tokens at `now_s`, without using the bucket (a metrics scrape)."""
        burst = self.burst_s * quota
        if self.tokens is None:
            return burst
        return min(burst, self.tokens + quota * max(now_s - self.last_s, 0.0))

    def take(self, quota: float, permits: float, now_s: float) -> float:
        self.tokens = min(self.burst_s * quota, self.measure(quota, now_s) - permits)
        return self.tokens


class MutationStats(NamedTuple):
    """One entity, for metrics: its tags ("" for a shared part), admitted partitions per second,
    tokens left, average throttle of its throttled requests (ms), quota."""
    user: str
    client_id: str
    rate: float
    tokens: float
    throttle_ms: float
    bound: float


class _Entity:
    __slots__ = ("bucket", "rate", "throttle", "bound")

    def __init__(self, bound: float, window: QuotaWindow):
        self.bucket = TokenBucket(window.burst_s)
        self.rate = SampledRate(window)
        self.throttle = SampledAvg(window)
        self.bound = bound


class RequestQuota:
    """One request's view of its entity's bucket (Kafka's Strict/PermissiveControllerMutationQuota).
    `finish()` once its topics are done: its throttle, recorded for the entity's metrics."""

    def __init__(self, entity: _Entity | None, strict: bool, now_s: float):
        self._entity = entity  # None: no quota applies
        self._strict = strict
        self._now_s = now_s
        self.throttle_ms = 0

    def admit(self, permits: int) -> ErrorCode | None:
        """Record `permits` partitions; THROTTLING_QUOTA_EXCEEDED when refused (strict only)."""
        entity = self._entity
        if entity is None:
            return None
        if self._strict and entity.bucket.measure(entity.bound, self._now_s) < 0:
            self.throttle_ms = self._debt_ms(entity.bucket.tokens)
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        tokens = entity.bucket.take(entity.bound, permits, self._now_s)
        entity.rate.record(permits, self._now_s * 1000.0)
        if not self._strict and tokens < 0:
            self.throttle_ms = self._debt_ms(tokens)
        return None

    def finish(self) -> int:
        if self._entity is not None and self.throttle_ms > 0:
            self._entity.throttle.record(self.throttle_ms, self._now_s * 1000.0)
        return self.throttle_ms

    def _debt_ms(self, tokens: float) -> int:
        bound = self._entity.bound
        if bound <= 0:  # a zero quota: every mutation waits a whole burst
            return int(self._entity.bucket.burst_s * 1000)
        return int(round(-tokens / bound * 1000.0))


class MutationQuotas:
    def __init__(self, window: QuotaWindow = QuotaWindow()):
        self.window = window  # quota.window.num / quota.window.size.seconds
        self._entities: dict[tuple[str, str], _Entity] = {}

    def for_request(self, quotas: Mapping[Entity, Mapping[str, float]], who: MutationRequester | None,
                    now_s: float) -> RequestQuota:
        if who is None:  # not from a client (a test, a tool on the controller itself)
            return RequestQuota(None, False, now_s)
        resolved = resolve(quotas, who.user, who.client_id, CONTROLLER_MUTATION_RATE)
        if resolved.bound is None:
            return RequestQuota(None, who.strict, now_s)
        for idle in [t for t, e in self._entities.items() if now_s - e.bucket.last_s >= IDLE_EXPIRY_S]:
            del self._entities[idle]
        entity = self._entities.get(resolved.tags)
        if entity is None:
            entity = self._entities[resolved.tags] = _Entity(resolved.bound, self.window)
        entity.bound = resolved.bound
        return RequestQuota(entity, who.strict, now_s)

    def stats(self, now_s: float) -> list[MutationStats]:
        now_ms = now_s * 1000.0
        return [MutationStats(user, client, e.rate.measure(now_ms), e.bucket.tokens_at(e.bound, now_s),
                              e.throttle.measure(now_ms), e.bound)
                for (user, client), e in sorted(self._entities.items())]
