"""Time in a sans-IO coordinator core: `Now`, the two clocks read at one moment, and
`KeyedTimers`, keyed deadlines (schedule, reschedule, cancel, pop what is due).

As in Kafka, every deadline (session and rebalance timeouts, transaction timeouts, the
periodic checks, retries) is on the monotonic clock, which never steps, and every
timestamp that is stored or shown (commit, state change, transaction start, last update)
is wall-clock time. A wall clock stepped by NTP or an operator then moves no timer.

KeyedTimers is a heap with lazy deletion; ties fire in scheduling order so a run is a
pure function of its inputs.
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass
from typing import Hashable

__all__ = ["KeyedTimers", "Now"]


@dataclass(frozen=True, slots=True)
class Now:
    """One moment on both clocks; the driver reads them (from its Env) and passes this in."""
    monotonic_ms: int  # deadlines: what KeyedTimers holds and fires on
    wall_ms: int       # timestamps in records and answers


class KeyedTimers:
    """Deadlines on the monotonic clock only: set as a delay from a `Now`, due by its monotonic_ms."""

    def __init__(self) -> None:
        self._deadline: dict[Hashable, tuple[int, int]] = {}  # key -> (deadline, seq)
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0

    def __contains__(self, key: Hashable) -> bool:
        return key in self._deadline

    def __len__(self) -> int:
        return len(self._deadline)

    def schedule(self, key: Hashable, now: Now, delay_ms: int) -> None:
        """Set (or move) `key` to fire `delay_ms` after `now`."""
        deadline = now.monotonic_ms + delay_ms
        self._seq += 1
        self._deadline[key] = (deadline, self._seq)
        heapq.heappush(self._heap, (deadline, self._seq, key))

    def cancel(self, key: Hashable) -> None:
        self._deadline.pop(key, None)

    def _live(self, item: tuple[int, int, Hashable]) -> bool:
        return self._deadline.get(item[2]) == (item[0], item[1])

    def next_deadline(self) -> int | None:
        """The earliest deadline (monotonic ms), or None."""
        while self._heap and not self._live(self._heap[0]):
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: Now) -> Hashable | None:
        """The earliest key whose deadline is <= now (removed), or None."""
        deadline = self.next_deadline()
        if deadline is None or deadline > now.monotonic_ms:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._deadline[key]
        return key
