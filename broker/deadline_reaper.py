"""One task that acts on many deadlines: Kafka's expiration reaper.

trio's way to bound a wait, a deadline on a cancel scope, costs the scheduler a
deadline-heap entry and its upkeep per wait; a broker parks thousands of fetches
and sends thousands of replica requests per second, nearly all of them over long
before their deadline. Here a deadline is an entry in one heap, and one task
sleeps until the earliest entry still live, then expires whoever reached theirs.

An owner (a parked fetch's `Watch`, a connection's request `Timer`) adds an entry
with `add(deadline, owner)` and gets its number; `owner._live(number)` says
whether that entry still counts (an answered wait, a finished request: not),
and `owner._expire()` is what happens at the deadline. A dropped entry costs
nothing until it reaches the top of the heap.
"""
from __future__ import annotations

import heapq
import math
from typing import Protocol

import trio

__all__ = ["DeadlineReaper"]


class _Owner(Protocol):
    def _live(self, number: int) -> bool: ...

    def _expire(self) -> None: ...


class DeadlineReaper:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Owner]] = []  # (deadline, entry number, owner)
        self._added = 0
        self._sleep: trio.CancelScope | None = None  # the task's sleep, while run() runs

    @property
    def running(self) -> bool:
        return self._sleep is not None

    def add(self, deadline: float, owner: _Owner) -> int:
        """Expire `owner` at the trio-clock `deadline` unless its entry is dropped first; the
        entry's number."""
        self._added += 1
        heapq.heappush(self._heap, (deadline, self._added, owner))
        sleep = self._sleep  # None once run() ended (shutdown: the owners are being cancelled too)
        if sleep is not None and deadline < sleep.deadline:
            sleep.deadline = deadline  # rare: deadlines mostly share one timeout
        return self._added

    async def run(self, *, expire_all_on_exit: bool = False, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Expire live entries at their deadlines, for as long as this runs; with
        `expire_all_on_exit`, every entry still live when it ends too."""
        self._sleep = trio.CancelScope()
        task_status.started()
        try:
            while True:
                with self._sleep:
                    self._sleep.deadline = self._next_deadline()
                    await trio.sleep_forever()
                self._sleep = trio.CancelScope()
                self._expire(trio.current_time())
        finally:
            self._sleep = None
            if expire_all_on_exit:
                self._expire(math.inf)

    def _next_deadline(self) -> float:
        """The earliest deadline still live (dropping the entries that are not)."""
        heap = self._heap
        while heap:
            deadline, number, owner = heap[0]
            if owner._live(number):
                return deadline
            heapq.heappop(heap)
        return math.inf

    def _expire(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, number, owner = heapq.heappop(heap)
            if owner._live(number):
                owner._expire()
