"""One quota type's bookkeeping, as Kafka's ClientQuotaManager (sans-IO: time is passed in).

`record(quotas, user, client_id, value, now_ms)` adds `value` (bytes, request-time percent)
to the rate of the entity the precedence names (metadata.client_quotas
.resolve: its metric tags), then answers the throttle time in ms, 0 within the quota:

- a rate quota (bytes, request percentage) is exceeded when the measured rate is above the
  bound; the throttle is the time the excess takes to drain at the bound over the current
  measuring window, `(rate - bound) / bound * window_size` (Kafka's QuotaUtils.throttleTime),
  bounded by `max_throttle_ms` where Kafka bounds it (request_percentage: one window).

(controller_mutation_rate is the active controller's: metadata.controller.mutation_quota.)

The quota itself is read from the image at each record, so a change committed to the
metadata log applies to the next request, measured with the samples already taken. An
entity idle for an hour is forgotten (Kafka's inactive-sensor expiry).
"""
from __future__ import annotations

from typing import Mapping, NamedTuple

from metadata.client_quotas import Entity, Resolved, resolve
from metrics.sampled_stats import QuotaWindow, SampledAvg, SampledRate

__all__ = ["QuotaManager", "EntityStats"]

IDLE_EXPIRY_MS = 3_600_000.0
_SWEEP_EVERY_MS = 60_000.0


class _EntityState:
    __slots__ = ("rate", "throttle", "last_ms", "bound")

    def __init__(self, window: QuotaWindow):
        self.rate = SampledRate(window)
        self.throttle = SampledAvg(window)
        self.last_ms = 0.0
        self.bound: float | None = None


class EntityStats(NamedTuple):
    """One measured entity, for metrics: its tags ("" for a shared part), rate, throttle, bound."""
    user: str
    client_id: str
    rate: float
    throttle_ms: float  # average over the retained windows of the throttles it was given
    bound: float | None


class QuotaManager:
    def __init__(self, key: str, window: QuotaWindow = QuotaWindow(), *, max_throttle_ms: float | None = None):
        self.key = key
        self.window = window
        self.max_throttle_ms = max_throttle_ms
        self._entities: dict[tuple[str, str], _EntityState] = {}
        self._swept_ms = 0.0

    def resolve(self, quotas: Mapping[Entity, Mapping[str, float]], user: str, client_id: str) -> Resolved:
        """The quota (user, client_id) gets for this key, and whose rate is measured against it."""
        return resolve(quotas, user, client_id, self.key)

    def record(self, quotas: Mapping[Entity, Mapping[str, float]], user: str, client_id: str, value: float,
               now_ms: float) -> int:
        resolved = self.resolve(quotas, user, client_id)
        state = self._state(resolved.tags, now_ms)
        state.bound = resolved.bound
        state.rate.record(value, now_ms)
        if resolved.bound is None:
            return 0
        throttle = self._throttle_ms(state, resolved.bound, now_ms)
        if throttle > 0:
            state.throttle.record(throttle, now_ms)
        return throttle

    def unrecord(self, quotas: Mapping[Entity, Mapping[str, float]], user: str, client_id: str, value: float,
                 now_ms: float) -> None:
        """Take back a recorded `value` that was not delivered after all (Kafka's unrecordQuotaSensor:
        a throttled Fetch is answered without its records)."""
        tags = self.resolve(quotas, user, client_id).tags
        self._state(tags, now_ms).rate.record(-value, now_ms)

    def _throttle_ms(self, state: _EntityState, bound: float, now_ms: float) -> int:
        rate = state.rate.measure(now_ms)
        if rate <= bound:
            return 0
        if bound > 0:
            throttle = (rate - bound) / bound * state.rate.window_size_ms(now_ms)
        else:  # a zero quota: throttle a whole measuring span
            throttle = self.window.samples * self.window.window_ms
        if self.max_throttle_ms is not None:
            throttle = min(throttle, self.max_throttle_ms)
        return int(round(throttle))

    def _state(self, tags: tuple[str, str], now_ms: float) -> _EntityState:
        if now_ms - self._swept_ms >= _SWEEP_EVERY_MS:
            self._swept_ms = now_ms
            for idle in [t for t, s in self._entities.items() if now_ms - s.last_ms >= IDLE_EXPIRY_MS]:
                del self._entities[idle]
        state = self._entities.get(tags)
        if state is None:
            state = self._entities[tags] = _EntityState(self.window)
        state.last_ms = now_ms
        return state

    def stats(self, now_ms: float) -> list[EntityStats]:
        return [EntityStats(user, client, s.rate.measure(now_ms), s.throttle.measure(now_ms), s.bound)
                for (user, client), s in sorted(self._entities.items())]
