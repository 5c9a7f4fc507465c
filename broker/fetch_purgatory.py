"""Long-poll Fetch waiters, woken only by changes to the partitions they watch.

A Fetch that cannot be answered yet (fewer than `min_bytes` available) parks
here until an append (or HW move, or leadership change) touches one of its
partitions, or its deadline passes; then it re-reads. Waking is per partition:
an append to one partition never wakes fetches waiting on others.
"""
from __future__ import annotations

from typing import Iterable

import trio

__all__ = ["FetchPurgatory"]

Key = tuple[str, int]


class _Waiter:
    __slots__ = ("event",)

    def __init__(self) -> None:
        self.event = trio.Event()


class FetchPurgatory:
    def __init__(self) -> None:
        # Waiters per partition in arrival order (a dict, not a set: wake-up order must not
        # depend on object ids, or a simulation run would not be a function of its seed).
        self._watchers: dict[Key, dict[_Waiter, None]] = {}

    @property
    def waiting(self) -> int:
        return len({w for ws in self._watchers.values() for w in ws})

    def notify(self, key: Key) -> None:
        """Something changed in partition `key`: wake everyone watching it."""
        waiters = self._watchers.pop(key, None)
        if waiters:
            for w in waiters:
                w.event.set()

    async def wait(self, keys: Iterable[Key], deadline: float) -> bool:
        """Sleep until a watched partition changes (True) or the trio-clock deadline (False)."""
        keys = sorted(set(keys))
        waiter = _Waiter()
        for key in keys:
            self._watchers.setdefault(key, {})[waiter] = None
        try:
            with trio.move_on_at(deadline):
                await waiter.event.wait()
            return waiter.event.is_set()
        finally:
            for key in keys:
                ws = self._watchers.get(key)
                if ws is not None:
                    ws.pop(waiter, None)
                    if not ws:
                        del self._watchers[key]
