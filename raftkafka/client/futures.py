"""What `Producer.send` returns: a one-shot result for one record."""
from __future__ import annotations

from typing import NamedTuple

import trio

__all__ = ["RecordMetadata", "RecordFuture"]


class RecordMetadata(NamedTuple):  # a tuple: one is made per record, at C speed
    topic: str
    partition: int
    offset: int  # -1 when unknown (acks=0)
    timestamp: int  # ms: the create time, or the broker's LogAppendTime


class RecordFuture:
    """`await future` (or `await future.wait()`) gives `RecordMetadata` or raises the
    delivery error; `done()` / `result()` / `exception()` inspect it without waiting."""

    __slots__ = ("topic", "partition", "_done", "_event", "_result", "_error", "_callbacks")

    def __init__(self, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self._done = False
        # Made only when someone waits: a producer sending 100k records/s mostly never awaits
        # each future, and a trio.Event per record was a noticeable share of send().
        self._event: trio.Event | None = None
        self._result: RecordMetadata | None = None
        self._error: BaseException | None = None
        self._callbacks = None  # None, one callable, or a list of them (most records get one or none)

    def done(self) -> bool:
        return self._done

    def result(self) -> RecordMetadata:
        if not self.done():
            raise RuntimeError("record not delivered yet")
        if self._error is not None:
            raise self._error
        return self._result

    def exception(self) -> BaseException | None:
        return self._error

    def add_callback(self, fn) -> None:
        """`fn(future)` runs when the result is known (at once if it already is)."""
        if self._done:
            fn(self)
        elif self._callbacks is None:
            self._callbacks = fn
        elif type(self._callbacks) is list:
            self._callbacks.append(fn)
        else:
            self._callbacks = [self._callbacks, fn]

    async def wait(self) -> RecordMetadata:
        if not self._done:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()
        return self.result()

    def __await__(self):
        return self.wait().__await__()

    def _set(self, result: RecordMetadata | None, error: BaseException | None) -> None:
        if self._done:
            return
        self._result, self._error = result, error
        self._done = True
        if self._event is not None:
            self._event.set()
        callbacks = self._callbacks
        if callbacks is not None:
            self._callbacks = None
            if type(callbacks) is list:
                for fn in callbacks:
                    fn(self)
            else:
                callbacks(self)
