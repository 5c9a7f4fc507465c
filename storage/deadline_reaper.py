"""One task that acts on many deadlines, on Env time: Kafka's expiration reaper.

Node code bounds waits in time two ways, both on Env time. One wait bounded by one deadline
(a connect, one call, a driver sleeping until its core's next deadline) uses a cancel scope
from the Env (`env.move_on_at`, `env.fail_after`). Waits too many for a scope each use this:
a broker parks thousands of fetches and sends thousands of replica requests per second, and
a consumer starts a fetch round every few milliseconds, nearly all of them over long before
their deadline; a cancel scope per wait costs trio a deadline-heap entry and its upkeep, more
than the rest of a fetch round. Here a deadline is an entry in one heap, and one task sleeps
(`env.sleep_until`) until the earliest entry still live, then expires whoever reached theirs.
The sans-IO cores keep their own deadlines as data (the Raft core's `Actions.deadline`, the
group coordinator's `KeyedTimers`) and their drivers wait on them with an Env cancel scope.

An owner adds an entry with `add(deadline, owner)` and gets its number; `owner._live(number)`
says whether that entry still counts (an answered wait, a finished request: not), and
`owner._expire()` is what happens at the deadline. A dropped entry costs nothing until it
reaches the top of the heap. Owners here: `Alarm` (one deadline at a time, calling a function:
a consumer's fetch round, a connection's request timeout through `Timer`); elsewhere the fetch
purgatory's `Watch`.
"""
from __future__ import annotations

import heapq
import math
from typing import Callable, Protocol

import trio

from storage.env import Env

__all__ = ["DeadlineReaper", "Alarm", "Timer"]


class _Owner(Protocol):
    def _live(self, number: int) -> bool: ...

    def _expire(self) -> None: ...


class DeadlineReaper:
    def __init__(self, env: Env) -> None:
        self.env = env
        self._heap: list[tuple[float, int, _Owner]] = []  # (deadline, entry number, owner)
        self._added = 0
        self._asleep_until = math.inf  # what the task sleeps until
        self._interrupt: trio.CancelScope | None = None  # around the task's sleep, while run() runs
        self.started = False  # run() ran (entries added before then would never expire)

    @property
    def running(self) -> bool:
        return self._interrupt is not None

    def add(self, deadline: float, owner: _Owner) -> int:
        """Expire `owner` at the Env-time `deadline` unless its entry is dropped first; the
        entry's number."""
        self._added += 1
        heapq.heappush(self._heap, (deadline, self._added, owner))
        if deadline < self._asleep_until and self._interrupt is not None:
            self._interrupt.cancel()  # rare (deadlines mostly share one timeout): wake to sleep less
        return self._added

    async def run(self, *, expire_all_on_exit: bool = False, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Expire live entries at their deadlines, for as long as this runs; with
        `expire_all_on_exit`, every entry still live when it ends too."""
        self.started = True
        self._interrupt = trio.CancelScope()
        task_status.started()
        try:
            while True:
                with self._interrupt:
                    while True:
                        self._asleep_until = self._next_deadline()
                        await self.env.sleep_until(self._asleep_until)
                        self._expire(self.env.now())
                self._interrupt = trio.CancelScope()
        finally:
            self._interrupt = None
            self._asleep_until = math.inf
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


class Alarm:
    """One deadline at a time on a reaper: setting it again replaces it (an assignment and a
    heap entry, no task), and `on_fire()` runs in the reaper's task when it passes."""

    __slots__ = ("_reaper", "_on_fire", "_armed")

    def __init__(self, reaper: DeadlineReaper, on_fire: Callable[[], None]):
        self._reaper = reaper
        self._on_fire = on_fire
        self._armed = 0  # the reaper's entry number of the current setting; 0 when none is

    def at(self, deadline: float) -> None:
        """Go off at `deadline` (Env time) instead of whenever it was set for."""
        if not self._reaper.started:
            raise RuntimeError("DeadlineReaper.run() was never started: the alarm could never go off")
        self._armed = 0 if deadline == math.inf else self._reaper.add(deadline, self)

    def after(self, seconds: float) -> None:
        self.at(self._reaper.env.now() + seconds)

    def disarm(self) -> None:
        self._armed = 0

    def _live(self, number: int) -> bool:
        return self._armed == number

    def _expire(self) -> None:
        self._armed = 0
        self._on_fire()


class Timer:
    """A connection's request timeout: its requests run under `scope`; `arm(timeout)` as a
    request starts cancels the scope unless `disarm()` comes first (Kafka's NetworkClient
    likewise checks in-flight requests from its poll loop, not with a timer per request)."""

    __slots__ = ("scope", "_alarm")

    def __init__(self, reaper: DeadlineReaper):
        self.scope = trio.CancelScope()
        self._alarm = Alarm(reaper, self.scope.cancel)

    def arm(self, timeout: float) -> None:
        self._alarm.after(timeout)

    def disarm(self) -> None:
        self._alarm.disarm()
