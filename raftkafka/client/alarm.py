"""A timeout that is almost always beaten, made cheap: one task that sleeps on the Env.

`with trio.move_on_after(t): await event.wait()` enters and leaves a cancel scope
per wait, which costs more than a whole schedule point. The consumer waits like
that once per fetch round, and the round nearly always ends by its Fetch coming
back, not by the timeout. An `Alarm` is one task asleep in `env.sleep_until`
(in the simulation a clock timer, no cancel scope): setting it later, as each
new round does, costs an assignment, and the task, once it wakes at the old
deadline, just sleeps on to the new one. Only setting it earlier than the task
sleeps interrupts the sleep (a cancel scope then).

    alarm = Alarm(env, on_fire)            # on_fire() runs in the alarm's task
    nursery.start_soon(alarm.run)
    alarm.at(env.now() + 0.3)              # replaces any earlier setting
"""
from __future__ import annotations

import math

import trio

from storage.env import Env

__all__ = ["Alarm"]


class Alarm:
    def __init__(self, env: Env, on_fire):
        self.env = env
        self._on_fire = on_fire
        self._deadline = math.inf  # when to go off
        self._asleep_until = math.inf  # what the task sleeps until now
        self._interrupt: trio.CancelScope | None = None

    def at(self, deadline: float) -> None:
        """Go off at `deadline` (Env time) instead of whenever it was set for."""
        self._deadline = deadline
        if deadline < self._asleep_until and self._interrupt is not None:
            self._interrupt.cancel()  # it would sleep past the deadline: wake it to sleep less

    async def run(self) -> None:
        while True:
            with trio.CancelScope() as self._interrupt:
                while True:
                    self._asleep_until = self._deadline
                    await self.env.sleep_until(self._asleep_until)
                    if self.env.now() >= self._deadline:
                        self._deadline = math.inf
                        self._on_fire()
