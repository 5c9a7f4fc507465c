"""How long a request's handler runs on the event loop: what request_percentage measures.

Kafka charges a request the time its request handler and network threads spend on it. Here
one event loop serves every request, so a handler is timed only while it runs: each stretch
between two of its suspensions (an `await` that lets other tasks run: waiting for data or
acks in the fetch purgatory, for the controller, for a disk sync, for the network) is
measured with the Env's clock and added up. Waiting is not handling, and neither is the time
other connections' requests run meanwhile. In a simulation the clock does not move while a
task runs, so handling takes no time there.

    timer = RunTime(env.now)
    response = await timer.run(handler.handle(broker, header, request))
    timer.seconds
"""
from __future__ import annotations

import types
from typing import Callable, Coroutine

__all__ = ["RunTime"]


class RunTime:
    __slots__ = ("_clock", "seconds")

    def __init__(self, clock: Callable[[], float]):
        self._clock = clock
        self.seconds = 0.0

    @types.coroutine
    def run(self, coro: Coroutine):
        """Await `coro` (as `yield from` does), adding the time each of its steps runs to `seconds`."""
        clock = self._clock
        value, error = None, None
        while True:
            started = clock()
            try:
                yielded = coro.send(value) if error is None else coro.throw(error)
            except StopIteration as done:
                return done.value
            finally:
                self.seconds += clock() - started
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:  # a cancellation (or any error) delivered to the suspended step
                value, error = None, e
