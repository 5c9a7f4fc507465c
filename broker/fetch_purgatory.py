"""Long-poll Fetch waiters, woken only by changes to the partitions they watch.

A Fetch that cannot be answered yet (fewer than `min_bytes` available) parks
here until an append (or HW move, or leadership change) touches one of its
partitions, or its deadline passes; then it re-reads. Waking is per partition:
an append to one partition never wakes fetches waiting on others.

A `Watch` is a registration that outlives one wake-up and says *which*
partitions fired: a follower's fetch over 1000 partitions, woken by a change
that brings it nothing (a high watermark moved, say), parks again at the cost
of the partitions that fired, not of all 1000 (re-registering and re-reading
them all made a busy RF=3 broker quadratic in its partition count).

Deadlines (Env time): while `FetchPurgatory.run()` (Kafka's expiration reaper,
storage.deadline_reaper) runs, a waiter's deadline is an entry in its heap, not a
cancel scope of its own: one task sleeps until the earliest deadline still waited
for and wakes whoever reached theirs. Most parked fetches are answered long before
their deadline, and a deadlined cancel scope per wait would cost the scheduler more
than the rest of a fetch. Without the reaper (a purgatory on its own) a wait uses an
Env cancel scope.
"""
from __future__ import annotations

import math
from typing import Callable, Iterable

import trio
from trio.lowlevel import Abort, checkpoint, current_task, reschedule, wait_task_rescheduled

from storage.deadline_reaper import DeadlineReaper
from storage.env import Env

__all__ = ["FetchPurgatory", "Watch"]

Key = tuple[str, int]


class Watch:
    """Registered on `keys` until `close()`; `wait()` returns the keys that fired since.

    The parked task is rescheduled directly (no Event per wake-up): a busy broker parks
    and wakes thousands of fetches per second. With `wake_on`, a change is first shown
    to it, in the notifier: a change it says brings nothing (a moved HW to a follower
    waiting for records, an append below the HW to a consumer) is noted among the fired
    keys but does not wake the task, which saves a task switch per such change."""

    __slots__ = ("_purgatory", "_keys", "_wake_on", "_task", "_park", "_fired", "_due", "_closed")

    def __init__(self, purgatory: "FetchPurgatory", keys: Iterable[Key],
                 wake_on: Callable[[Key], bool] | None = None):
        self._purgatory = purgatory
        self._keys = list(dict.fromkeys(keys))  # unique; their order never shows in a wake-up's
        self._wake_on = wake_on  # must not raise: it runs inside whatever made the change
        self._task = None  # the task parked in wait(), if any
        self._park = 0  # the reaper's entry number of the current parking
        self._fired: dict[Key, None] = {}  # in notification order
        self._due = False  # a change worth waking for fired since take_fired()
        self._closed = False
        for key in self._keys:
            purgatory._add(key, self)

    def _fire(self, key: Key) -> None:
        self._fired[key] = None
        if self._wake_on is not None and not self._wake_on(key):
            self._purgatory._add(key, self)  # notify() dropped us from it: keep watching
            return
        self._due = True
        task = self._task
        if task is not None:
            self._task = None
            reschedule(task)

    def _abort(self, _raise_cancel) -> Abort:
        self._task = None  # cancelled: _fire and the reaper must not reschedule it
        return Abort.SUCCEEDED

    async def wait(self, deadline: float) -> list[Key]:
        """The partitions that changed (in notification order), or [] at the Env-time deadline.
        Those partitions are watched again before this returns."""
        await self.wait_fired(deadline)
        return self.take_fired()

    async def wait_fired(self, deadline: float = math.inf) -> bool:
        """Park until a watched partition changes in a way `wake_on` accepts (True; at once
        if one did) or the Env-time `deadline` passes (False)."""
        if self._due:
            return True
        purgatory = self._purgatory
        if deadline <= purgatory.env.now():
            await checkpoint()
            return self._due
        self._task = current_task()
        if deadline != math.inf:
            if not purgatory._reaper.running:
                with purgatory.env.move_on_at(deadline):
                    await wait_task_rescheduled(self._abort)
                return self._due
            self._park = purgatory._reaper.add(deadline, self)
        await wait_task_rescheduled(self._abort)  # _fire, the reaper, or a cancellation
        return self._due

    def _live(self, park: int) -> bool:
        """The reaper's entry `park` still counts: that parking is still waiting."""
        return self._task is not None and self._park == park

    def _expire(self) -> None:
        task, self._task = self._task, None
        reschedule(task)

    def take_fired(self) -> list[Key]:
        """The partitions that changed since the last call, waking or not; they are watched again."""
        fired, self._fired, self._due = list(self._fired), {}, False
        if not self._closed:
            for key in fired:  # notify() dropped us from these (or _fire re-added us)
                self._purgatory._add(key, self)
        return fired

    def close(self) -> None:
        self._closed = True
        for key in self._keys:
            self._purgatory._discard(key, self)


class FetchPurgatory:
    def __init__(self, env: Env) -> None:
        self.env = env
        # Watches per partition in arrival order (a dict, not a set: wake-up order must not
        # depend on object ids, or a simulation run would not be a function of its seed).
        self._watchers: dict[Key, dict[Watch, None]] = {}
        self._reaper = DeadlineReaper(env)  # the waiters' deadlines, while run() runs

    @property
    def waiting(self) -> int:
        return len({w for ws in self._watchers.values() for w in ws})

    def notify(self, key: Key) -> None:
        """Something changed in partition `key`: wake everyone watching it."""
        watches = self._watchers.pop(key, None)
        if watches:
            for w in watches:
                w._fire(key)

    def watch(self, keys: Iterable[Key], wake_on: Callable[[Key], bool] | None = None) -> Watch:
        """A registration for many wake-ups; the caller must `close()` it. `wake_on(key)`,
        if given, says whether a change to `key` is worth waking the waiter for."""
        return Watch(self, keys, wake_on)

    async def wait(self, keys: Iterable[Key], deadline: float) -> bool:
        """Sleep until a watched partition changes (True) or the Env-time deadline (False)."""
        watch = Watch(self, keys)
        try:
            return await watch.wait_fired(deadline)
        finally:
            watch.close()

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:
        """The expiration reaper: wake parked waiters at their deadlines, for as long as it runs.
        When it ends, nobody may be left waiting for a deadline no one will serve."""
        await self._reaper.run(expire_all_on_exit=True, task_status=task_status)

    def _add(self, key: Key, watch: Watch) -> None:
        self._watchers.setdefault(key, {})[watch] = None

    def _discard(self, key: Key, watch: Watch) -> None:
        ws = self._watchers.get(key)
        if ws is not None:
            ws.pop(watch, None)
            if not ws:
                del self._watchers[key]
