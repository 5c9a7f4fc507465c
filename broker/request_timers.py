"""Timeouts for streams of sequential requests, served by one task.

A replica fetcher sends a request every few milliseconds, each bounded by a
timeout of tens of seconds. trio's way, a deadline on a cancel scope (a
`trio.fail_after` per request, or moving one scope's deadline per request),
costs the scheduler a deadline-heap entry per request: more than the rest of
a fetch round. Here a connection's requests run under one cancel scope; a
request arms its `Timer` with an entry in a `DeadlineReaper` and disarms it with
an attribute write, and the reaper's task cancels that connection's scope when
an armed deadline passes. Kafka's NetworkClient likewise checks its in-flight
requests' timeouts from its poll loop, not with a timer per request.
"""
from __future__ import annotations

import trio

from broker.deadline_reaper import DeadlineReaper

__all__ = ["RequestTimers", "Timer"]


class Timer:
    """One connection's: the cancel scope its requests run under, and the request armed on it."""

    __slots__ = ("scope", "_timers", "_armed")

    def __init__(self, timers: "RequestTimers"):
        self.scope = trio.CancelScope()
        self._timers = timers
        self._armed = 0  # the reaper's entry number of the request in flight; 0 when none is

    def arm(self, timeout: float) -> None:
        """A request starts: cancel `scope` unless it ends (`disarm`) within `timeout` seconds."""
        self._armed = self._timers._arm(self, trio.current_time() + timeout)

    def disarm(self) -> None:
        self._armed = 0

    def _live(self, number: int) -> bool:
        return self._armed == number

    def _expire(self) -> None:
        self._armed = 0
        self.scope.cancel()


class RequestTimers:
    def __init__(self) -> None:
        self._reaper = DeadlineReaper()
        self._started = False

    def timer(self) -> Timer:
        return Timer(self)

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """Cancel each armed timer's scope at its deadline, for as long as this runs."""
        self._started = True
        await self._reaper.run(task_status=task_status)

    def _arm(self, timer: Timer, deadline: float) -> int:
        if not self._started:
            raise RuntimeError("RequestTimers.run() was never started: a request could never time out")
        return self._reaper.add(deadline, timer)
