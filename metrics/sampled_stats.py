"""Kafka's sampled statistics (org.apache.kafka.common.metrics.stats), sans-IO: time in ms
is passed in, nothing is read from a clock.

`SampledRate` is Kafka's `Rate` over a `WindowedSum` (as since Kafka 3.8, apache/kafka
#15889): windows of `window_ms`, opened only by a record; a record goes into the current
window, or opens the next one once the current one is `window_ms` old, reusing the oldest
of `samples + 1` (the extra one is a window that started before the measured span but still
overlaps it). When measured, a window whose last record is `samples * window_ms` old is
reset. The rate is the sum of the retained windows over the time since the oldest one
started, counted as at least `samples - 1` full windows, so a new entity is not measured
over a sliver of time (Rate.windowSize).

Windows are kept by their last record, not their start: a long-throttled client records about
one request per window, and dropping windows by their start would take many of its bytes out
of the rate at once (a spike down, which lets it send a burst).

`SampledAvg` is Kafka's `Avg` over the same windows (throttle-time metrics).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

__all__ = ["QuotaWindow", "SampledRate", "SampledAvg"]


@dataclass(frozen=True, slots=True)
class QuotaWindow:
    samples: int = 11  # quota.window.num
    window_ms: float = 1000.0  # quota.window.size.seconds

    @classmethod
    def of_settings(cls, settings: Mapping[str, object]) -> "QuotaWindow":
        """`quota.window.num` and `quota.window.size.seconds` of a node's settings (which the
        node validates when it starts: at least 2, and 1)."""
        def setting(name: str, default: int, least: int) -> int:
            try:
                return max(int(str(settings.get(name, default)).strip()), least)
            except ValueError:
                return default

        return cls(samples=setting("quota.window.num", 11, 2),
                   window_ms=1000.0 * setting("quota.window.size.seconds", 1, 1))

    @property
    def burst_s(self) -> float:
        """The most of its quota a new entity may use at once: samples - 1 windows, in seconds."""
        return (self.samples - 1) * self.window_ms / 1000.0


class _Sample:
    __slots__ = ("start_ms", "last_ms", "value", "count")

    def __init__(self, start_ms: float):
        self.reset(start_ms)

    def reset(self, now_ms: float) -> None:
        self.start_ms = now_ms
        self.last_ms = now_ms
        self.value = 0.0
        self.count = 0


class _SampledStat:
    __slots__ = ("window", "samples", "current")

    def __init__(self, window: QuotaWindow):
        self.window = window
        self.samples: list[_Sample] = []
        self.current = 0

    def record(self, value: float, now_ms: float) -> None:
        sample = self._current(now_ms)
        if now_ms - sample.start_ms >= self.window.window_ms:
            sample = self._advance(now_ms)
        sample.value += value
        sample.count += 1
        sample.last_ms = now_ms

    def _current(self, now_ms: float) -> _Sample:
        if not self.samples:
            self.samples.append(_Sample(now_ms))
        return self.samples[self.current]

    def _advance(self, now_ms: float) -> _Sample:
        self.current = (self.current + 1) % (self.window.samples + 1)
        if self.current >= len(self.samples):
            self.samples.append(_Sample(now_ms))
        else:
            self.samples[self.current].reset(now_ms)
        return self.samples[self.current]

    def purge(self, now_ms: float) -> None:
        expire = self.window.samples * self.window.window_ms
        for sample in self.samples:
            if now_ms - sample.last_ms >= expire:
                sample.reset(now_ms)

    def oldest_start(self, now_ms: float) -> float:
        if not self.samples:
            self.samples.append(_Sample(now_ms))
        return min(s.start_ms for s in self.samples)


class SampledRate(_SampledStat):
    """Units recorded per second (bytes/s, or request-time percent)."""
    __slots__ = ()

    def window_size_ms(self, now_ms: float) -> float:
        """Kafka's Rate.windowSize: the time the retained samples span, at least samples-1 windows."""
        self.purge(now_ms)
        elapsed = now_ms - self.oldest_start(now_ms)
        full = int(elapsed // self.window.window_ms)
        minimum = self.window.samples - 1
        if full < minimum:
            elapsed += (minimum - full) * self.window.window_ms
        return max(elapsed, 1.0)

    def measure(self, now_ms: float) -> float:
        self.purge(now_ms)
        total = sum(s.value for s in self.samples)
        return total / (self.window_size_ms(now_ms) / 1000.0)


class SampledAvg(_SampledStat):
    __slots__ = ()

    def measure(self, now_ms: float) -> float:
        self.purge(now_ms)
        count = sum(s.count for s in self.samples)
        return sum(s.value for s in self.samples) / count if count else 0.0
