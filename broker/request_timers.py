"""Timeouts for streams of sequential requests, served by one task.

A replica fetcher sends a request every few milliseconds, each bounded by a
timeout of tens of seconds. trio's way, a deadline on a cancel scope (a
`trio.fail_after` per request, or moving one scope's deadline per request),
costs the scheduler a deadline-heap entry per request: more than the rest of
a fetch round. Here a connection's requests run under one cancel scope; a
request arms its `Timer` with an entry in one heap and disarms it with an
attribute write, and one task (`RequestTimers.run`) sleeps until the earliest
deadline still armed and cancels that connection's scope when it passes.
Kafka's NetworkClient likewise checks its in-flight requests' timeouts from
its poll loop, not with a timer per request.
"""
from __future__ import annotations

import heapq
import math

import trio

__all__ = ["RequestTimers", "Timer"]


class Timer:
    """One connection's: the cancel scope its requests run under, and the request armed on it."""

    __slots__ = ("scope", "_timers", "_armed")

    def __init__(self, timers: "RequestTimers"):
        self.scope = trio.CancelScope()
        self._timers = timers
        self._armed = 0  # the arming number of the request in flight; 0 when none is

    def arm(self, timeout: float) -> None:
        """A request starts: cancel `scope` unless it ends (`disarm`) within `timeout` seconds."""
        self._armed = self._timers._arm(self, trio.current_time() + timeout)

    def disarm(self) -> None:
        self._armed = 0


class RequestTimers:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timer]] = []  # (deadline, arming number, timer)
        self._armings = 0
        self._sleep: trio.CancelScope | None = None  # the task's sleep, while run() runs
        self._started = False

    def timer(self) -> Timer:
        return Timer(self)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Cancel each armed timer's scope at its deadline, for as long as this runs."""
        self._sleep = trio.CancelScope()
        self._started = True
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

    def _arm(self, timer: Timer, deadline: float) -> int:
        if not self._started:
            raise RuntimeError("RequestTimers.run() was never started: a request could never time out")
        self._armings += 1
        heapq.heappush(self._heap, (deadline, self._armings, timer))
        sleep = self._sleep  # None once run() ended (shutdown: its users are being cancelled too)
        if sleep is not None and deadline < sleep.deadline:
            sleep.deadline = deadline  # rare: requests mostly share one timeout
        return self._armings

    def _next_deadline(self) -> float:
        """The earliest deadline still armed (dropping requests that ended)."""
        heap = self._heap
        while heap:
            deadline, arming, timer = heap[0]
            if timer._armed == arming:
                return deadline
            heapq.heappop(heap)
        return math.inf

    def _expire(self, now: float) -> None:
        heap = self._heap
        while heap and heap[0][0] <= now:
            _, arming, timer = heapq.heappop(heap)
            if timer._armed == arming:
                timer._armed = 0
                timer.scope.cancel()
