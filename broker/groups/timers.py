"""Keyed deadlines for a sans-IO core: schedule, reschedule, cancel, pop what is due.

A heap with lazy deletion; ties fire in scheduling order so a run is a pure
function of its inputs.
"""
from __future__ import annotations

import heapq
from typing import Hashable

__all__ = ["KeyedTimers"]


class KeyedTimers:
    def __init__(self) -> None:
        self._deadline: dict[Hashable, tuple[int, int]] = {}  # key -> (deadline, seq)
        self._heap: list[tuple[int, int, Hashable]] = []
        self._seq = 0

    def __contains__(self, key: Hashable) -> bool:
        return key in self._deadline

    def __len__(self) -> int:
        return len(self._deadline)

    def schedule(self, key: Hashable, deadline: int) -> None:
        """Set (or move) the deadline of `key`."""
        self._seq += 1
        self._deadline[key] = (deadline, self._seq)
        heapq.heappush(self._heap, (deadline, self._seq, key))

    def cancel(self, key: Hashable) -> None:
        self._deadline.pop(key, None)

    def deadline_of(self, key: Hashable) -> int | None:
        entry = self._deadline.get(key)
        return None if entry is None else entry[0]

    def _live(self, item: tuple[int, int, Hashable]) -> bool:
        return self._deadline.get(item[2]) == (item[0], item[1])

    def next_deadline(self) -> int | None:
        while self._heap and not self._live(self._heap[0]):
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: int) -> Hashable | None:
        """The earliest key whose deadline is <= now (removed), or None."""
        deadline = self.next_deadline()
        if deadline is None or deadline > now:
            return None
        _, _, key = heapq.heappop(self._heap)
        del self._deadline[key]
        return key
