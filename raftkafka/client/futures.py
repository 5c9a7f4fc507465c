"""What `Producer.send` returns: a one-shot result for one record.

A produced batch has one `BatchOutcome`, and each of its records' `RecordFuture`s is a
view of it (the outcome and the record's index): answering a batch sets one object,
not one per record, and only futures someone listens to cost anything then.
`Producer.send_values` returns a `BlockFuture`: one outcome for a whole block of records.
"""
from __future__ import annotations

from typing import NamedTuple

import trio

__all__ = ["RecordMetadata", "RecordFuture", "BatchOutcome", "BlockFuture"]


class RecordMetadata(NamedTuple):  # a tuple: made in C
    topic: str
    partition: int
    offset: int  # -1 when unknown (acks=0)
    timestamp: int  # ms: the create time, or the broker's LogAppendTime


class BatchOutcome:
    """The answer for one batch of a partition, shared by its records' futures."""

    __slots__ = ("topic", "partition", "done", "error", "base_offset", "log_append_time", "records",
                 "_event", "_listeners", "_unordered")

    def __init__(self, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self.done = False
        self.error: BaseException | None = None
        self.base_offset = -1  # -1: unknown (acks=0)
        self.log_append_time = -1
        self.records: list[tuple] | None = None  # the batch's records, whose create times are theirs
        self._event: trio.Event | None = None  # made only when someone waits
        self._listeners: list | None = None  # target, fn, target, fn, ...: fn(target) once done
        self._unordered = False

    def metadata(self, index: int) -> RecordMetadata:
        offset = self.base_offset + index if self.base_offset >= 0 else -1
        timestamp = self.log_append_time if self.log_append_time >= 0 else self.records[index][3]
        return RecordMetadata(self.topic, self.partition, offset, timestamp)

    def listen(self, target, fn) -> None:
        """`fn(target)` once the batch is answered (the caller checked it is not yet)."""
        listeners = self._listeners
        if listeners is None:
            self._listeners = [target, fn]
            return
        if type(target) is RecordFuture and type(listeners[-2]) is RecordFuture \
                and target._index < listeners[-2]._index:
            self._unordered = True  # callbacks run in record order, as Kafka's do
        listeners.append(target)
        listeners.append(fn)

    async def wait(self) -> None:
        if not self.done:
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()

    def complete(self, base_offset: int, log_append_time: int, records: list[tuple] | None) -> None:
        """Written at `base_offset`; `records`, (key, value, headers, timestamp ms) tuples, give the
        create times unless the broker set `log_append_time`."""
        self._finish(None, base_offset, log_append_time, records)

    def fail(self, error: BaseException) -> None:
        self._finish(error, -1, -1, None)

    def _finish(self, error, base_offset: int, log_append_time: int, records) -> None:
        if self.done:
            return
        self.error, self.base_offset, self.log_append_time, self.records = \
            error, base_offset, log_append_time, records
        self.done = True
        if self._event is not None:
            self._event.set()
        listeners, self._listeners = self._listeners, None
        if listeners is not None:
            pairs = iter(listeners)
            pairs = zip(pairs, pairs)
            if self._unordered:
                pairs = sorted(pairs, key=_record_order)
            for target, fn in pairs:
                fn(target)


def _record_order(pair) -> int:
    target = pair[0]
    return target._index if type(target) is RecordFuture else -1


class RecordFuture:
    """`await future` (or `await future.wait()`) gives `RecordMetadata` or raises the
    delivery error; `done()` / `result()` / `exception()` inspect it without waiting."""

    __slots__ = ("_outcome", "_index")

    def __init__(self, outcome: BatchOutcome, index: int):
        self._outcome = outcome
        self._index = index  # the record's place in its batch

    @property
    def topic(self) -> str:
        return self._outcome.topic

    @property
    def partition(self) -> int:
        return self._outcome.partition

    def done(self) -> bool:
        return self._outcome.done

    def result(self) -> RecordMetadata:
        outcome = self._outcome
        if not outcome.done:
            raise RuntimeError("record not delivered yet")
        if outcome.error is not None:
            raise outcome.error
        return outcome.metadata(self._index)

    def exception(self) -> BaseException | None:
        return self._outcome.error

    def add_callback(self, fn) -> None:
        """`fn(future)` runs when the result is known (at once if it already is)."""
        if self._outcome.done:
            fn(self)
        else:
            self._outcome.listen(self, fn)

    async def wait(self) -> RecordMetadata:
        await self._outcome.wait()
        return self.result()

    def __await__(self):
        return self.wait().__await__()


class BlockFuture:
    """The outcome of a block of records sent together (`Producer.send_values`): done when
    every batch holding part of it is answered; `exception()` is the first error and
    `failed` counts the records it lost. `await` gives the number of records written."""

    __slots__ = ("count", "failed", "_error", "_pending", "_event", "_callbacks")

    def __init__(self, count: int):
        self.count = count
        self.failed = 0
        self._error: BaseException | None = None
        self._pending = 0  # parts not answered yet
        self._event: trio.Event | None = None
        self._callbacks: list = []

    def _add_part(self, outcome: BatchOutcome, records: int) -> None:
        self._pending += 1
        outcome.listen((self, outcome, records), _part_done)

    def done(self) -> bool:
        return self._pending == 0

    def exception(self) -> BaseException | None:
        return self._error if self.done() else None

    def result(self) -> int:
        if not self.done():
            raise RuntimeError("block not delivered yet")
        if self._error is not None:
            raise self._error
        return self.count

    def add_callback(self, fn) -> None:
        """`fn(block)` runs once every record has its answer (at once if each has)."""
        if self.done():
            fn(self)
        else:
            self._callbacks.append(fn)

    async def wait(self) -> int:
        if not self.done():
            if self._event is None:
                self._event = trio.Event()
            await self._event.wait()
        return self.result()

    def __await__(self):
        return self.wait().__await__()


def _part_done(part) -> None:
    block, outcome, records = part
    if outcome.error is not None:
        block.failed += records
        if block._error is None:
            block._error = outcome.error
    block._pending -= 1
    if block._pending == 0:
        if block._event is not None:
            block._event.set()
        callbacks, block._callbacks = block._callbacks, []
        for fn in callbacks:
            fn(block)
