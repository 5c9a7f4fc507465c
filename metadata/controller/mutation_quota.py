"""controller_mutation_rate (KIP-599) on the active controller, as Kafka's
ControllerMutationQuotaManager: partitions created by CreateTopics / CreatePartitions and
removed by DeleteTopics, counted against the quota of the client that asked (the user and
client-id the forwarding broker carries in the request), with Kafka's precedence
(metadata.client_quotas.resolve).

Each entity has a token bucket holding `(samples - 1) * window` seconds' worth of the quota
(10 s by default), refilled at the quota rate; a mutation takes one token per partition and
may take the bucket below zero. A request's `RequestQuota` records its topics one by one:

- strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic whose turn
  comes while the bucket is in debt is refused with THROTTLING_QUOTA_EXCEEDED and changes
  nothing; the throttle is the time the debt takes to refill;
- permissive (older versions): every topic is recorded, and the throttle is the debt's
  refill time after the last one.

The buckets live in this controller's memory only, as Kafka's: a new active controller
starts with full buckets. Sans-IO: time (seconds) is passed in.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from metadata.client_quotas import CONTROLLER_MUTATION_RATE, Entity, resolve
from wire.error_codes import ErrorCode

__all__ = ["MutationRequester", "MutationQuotas", "RequestQuota", "TokenBucket", "BURST_S",
           "THROTTLING_MESSAGE"]

BURST_S = 10.0  # (quota.window.num - 1) x quota.window.size.seconds
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
    __slots__ = ("tokens", "last_s")

    def __init__(self):
        self.tokens: float | None = None  # full at the first use, whatever the quota then
        self.last_s = 0.0

    def measure(self, quota: float, now_s: float) -> float:
        burst = BURST_S * quota
        if self.tokens is None:
            self.tokens = burst
        else:
            self.tokens = min(burst, self.tokens + quota * max(now_s - self.last_s, 0.0))
        self.last_s = now_s
        return self.tokens

    def take(self, quota: float, permits: float, now_s: float) -> float:
        self.tokens = min(BURST_S * quota, self.measure(quota, now_s) - permits)
        return self.tokens


class RequestQuota:
    """One request's view of its entity's bucket (Kafka's Strict/PermissiveControllerMutationQuota)."""

    def __init__(self, bucket: TokenBucket | None, bound: float | None, strict: bool, now_s: float):
        self._bucket = bucket
        self._bound = bound
        self._strict = strict
        self._now_s = now_s
        self.throttle_ms = 0

    def admit(self, permits: int) -> ErrorCode | None:
        """Record `permits` partitions; THROTTLING_QUOTA_EXCEEDED when refused (strict only)."""
        if self._bucket is None or self._bound is None:
            return None
        if self._strict and self._bucket.measure(self._bound, self._now_s) < 0:
            self.throttle_ms = self._debt_ms(self._bucket.tokens)
            return ErrorCode.THROTTLING_QUOTA_EXCEEDED
        tokens = self._bucket.take(self._bound, permits, self._now_s)
        if not self._strict and tokens < 0:
            self.throttle_ms = self._debt_ms(tokens)
        return None

    def _debt_ms(self, tokens: float) -> int:
        if self._bound <= 0:  # a zero quota: every mutation waits a whole burst
            return int(BURST_S * 1000)
        return int(round(-tokens / self._bound * 1000.0))


class MutationQuotas:
    def __init__(self):
        self._buckets: dict[tuple[str, str], TokenBucket] = {}

    def for_request(self, quotas: Mapping[Entity, Mapping[str, float]], who: MutationRequester | None,
                    now_s: float) -> RequestQuota:
        if who is None:  # not from a client (a test, a tool on the controller itself)
            return RequestQuota(None, None, False, now_s)
        resolved = resolve(quotas, who.user, who.client_id, CONTROLLER_MUTATION_RATE)
        if resolved.bound is None:
            return RequestQuota(None, None, who.strict, now_s)
        for idle in [t for t, b in self._buckets.items() if now_s - b.last_s >= IDLE_EXPIRY_S]:
            del self._buckets[idle]
        bucket = self._buckets.setdefault(resolved.tags, TokenBucket())
        return RequestQuota(bucket, resolved.bound, who.strict, now_s)
