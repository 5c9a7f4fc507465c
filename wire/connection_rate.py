"""Connection creation rate (KIP-612) measured as Kafka's quota `Rate` does, sans-IO.

A `CreationRate` counts new connections in `samples` windows of `window_s` seconds
(`quota.window.num`, default 11, and `quota.window.size.seconds`, default 1). The rate is
the count over the elapsed time since the oldest window began, where the elapsed time is
never taken shorter than `samples - 1` whole windows, so a quiet listener absorbs a burst
of `quota × (samples - 1) × window_s` connections before it throttles, as Kafka's does.

`record(now)` counts one connection and answers how long the caller must wait before the
rate is back within the quota (Kafka's QuotaUtils.throttleTime: the time after which
`count / elapsed` equals the quota), 0 when it is within. Every time is the caller's (the
Env's clock), so the same sequence of calls always gives the same answers.
"""
from __future__ import annotations

import collections

__all__ = ["CreationRate", "QUOTA_WINDOW_NUM", "QUOTA_WINDOW_SIZE_S"]

QUOTA_WINDOW_NUM = 11  # quota.window.num
QUOTA_WINDOW_SIZE_S = 1.0  # quota.window.size.seconds


class CreationRate:
    """New connections per second against one quota."""

    __slots__ = ("quota", "samples", "window_s", "_windows")

    def __init__(self, quota: float, samples: int = QUOTA_WINDOW_NUM, window_s: float = QUOTA_WINDOW_SIZE_S):
        if quota <= 0 or samples < 2 or window_s <= 0:
            raise ValueError("a creation rate needs a positive quota, at least 2 windows and a positive window")
        self.quota = quota
        self.samples = samples
        self.window_s = window_s
        self._windows: collections.deque[list] = collections.deque()  # [start, count], oldest first

    def _purge(self, now: float) -> None:
        while self._windows and now - self._windows[0][0] >= self.samples * self.window_s:
            self._windows.popleft()

    def _elapsed(self, now: float) -> float:
        oldest = self._windows[0][0] if self._windows else now
        return max(now - oldest, (self.samples - 1) * self.window_s)

    def rate(self, now: float) -> float:
        self._purge(now)
        return sum(count for _, count in self._windows) / self._elapsed(now)

    def record(self, now: float) -> float:
        """Count one connection at `now`; the seconds until the rate is within the quota again."""
        self._purge(now)
        if self._windows and now - self._windows[-1][0] < self.window_s:
            self._windows[-1][1] += 1
        else:
            self._windows.append([now, 1])
        return self.throttle_s(now)

    def unrecord(self, now: float) -> None:
        """Take back the latest connection (a refused one does not count, as Kafka's per-ip quota)."""
        if self._windows:
            self._windows[-1][1] -= 1
            if self._windows[-1][1] <= 0:
                self._windows.pop()

    def throttle_s(self, now: float) -> float:
        self._purge(now)
        total = sum(count for _, count in self._windows)
        elapsed = self._elapsed(now)
        if total / elapsed <= self.quota:
            return 0.0
        # Bounded by the whole measured span: by then every counted connection has aged out.
        return min(total / self.quota - elapsed, self.samples * self.window_s)
