"""The producer's record accumulator: per-partition batches, sans-IO.

Records are appended to the last open batch of their partition; a batch
closes when the next record would push it past `batch_size`, counting each
record's exact encoded size there (its length, offset delta and timestamp
delta as the varints they become) and the batch header, as Kafka's producer
does: a 16 KiB batch holds 148 records of 100 bytes. A partition is
*ready* to send when its first batch is full, older than `linger`, or a flush
is under way, and it is not *muted*. A partition is muted while `max_in_flight`
of its batches are drained and unanswered: several batches of a partition may be
in flight (pipelined on the leader's connection), which is what keeps a busy
partition from waiting a round trip per batch. Retried batches go back to the
front of their queue, with a backoff time; batches with sequence numbers (the
idempotent producer) in sequence order, so a resend keeps the records in order.
Without idempotence a retry may reorder records, as Kafka documents for
max.in.flight > 1.

A batch keeps its records as (key, value, headers, timestamp) tuples (no
object of our own per record), its answer in one `BatchOutcome` that the
records' futures look at, and `encode` builds the batch in one pass once the
producer id and sequence are known. `append` reads no clock unless it opens a
batch, and `append_values` adds a block of values a batch at a time.
"""
from __future__ import annotations

from bisect import bisect_right
from collections import deque
from dataclasses import dataclass, field
from itertools import accumulate, repeat

from raftkafka.client.futures import BatchOutcome
from wire.records import Compression, seal_batch
from wire.records_fast import encode_records

__all__ = ["ProducerBatch", "RecordAccumulator", "RECORD_OVERHEAD", "POSITION_BOUND", "fixed_size",
           "length_size", "varint_size", "value_sizes"]

TopicPartition = tuple[str, int]
RECORD_OVERHEAD = 21  # length, attributes, deltas and lengths as varints: a generous bound
POSITION_BOUND = 20  # a record's length, offset delta and timestamp delta: at most 5 + 5 + 10 varint bytes
_BATCH_OVERHEAD = 61


def varint_size(value: int) -> int:
    """Bytes of `value` as a zigzag varint."""
    zigzag = value << 1 if value >= 0 else (-value << 1) - 1
    return max(1, (zigzag.bit_length() + 6) // 7)


def length_size(data: bytes | None) -> int:
    """Bytes of a record's key or value field: the length varint and the data (-1 for null)."""
    if data is None:
        return 1
    n = len(data)
    return n + (1 if n < 64 else 2 if n < 8192 else varint_size(n))


def fixed_size(key: bytes | None, value: bytes | None, headers=()) -> int:
    """A record's encoded bytes that do not depend on its place in a batch: attributes, key,
    value, headers (all but its length and its offset and timestamp deltas)."""
    size = 2 + length_size(key) + length_size(value)  # attributes and the header count (< 64)
    if headers:  # most records have none: no iterator made for them
        size += varint_size(len(headers)) - 1
        for header_key, header_value in headers:
            size += length_size(header_key.encode("utf-8")) + length_size(header_value)
    return size


def value_sizes(values: list[bytes]) -> list[int]:
    """The running sum of a bound of the encoded sizes of records with these values and no key or
    headers (`RECORD_OVERHEAD` each for length, attributes, deltas and the value's length)."""
    return list(accumulate(map(RECORD_OVERHEAD.__add__, map(len, values))))  # in C


@dataclass(eq=False)
class ProducerBatch:
    topic: str
    partition: int
    created: float
    records: list[tuple] = field(default_factory=list)  # (key, value, headers, timestamp ms)
    outcome: BatchOutcome = None
    size: int = _BATCH_OVERHEAD
    attempts: int = 0
    retry_at: float = 0.0
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    transactional: bool = False
    in_flight: bool = False  # drained and not yet answered
    _payload: bytes | None = None

    def __post_init__(self):
        if self.outcome is None:
            self.outcome = BatchOutcome(self.topic, self.partition)

    @property
    def count(self) -> int:
        return len(self.records)

    def encode(self, compression: Compression, level: int | None = None) -> bytes:
        """The batch bytes; built once, so a retry resends exactly what was sent first."""
        if self._payload is None:
            records = self.records
            base_timestamp = records[0][3]
            self._payload = seal_batch(
                encode_records(records, base_timestamp), len(records), last_offset_delta=len(records) - 1,
                base_timestamp=base_timestamp, max_timestamp=max([r[3] for r in records]),
                compression=compression, compression_level=level,
                producer_id=self.producer_id, producer_epoch=self.producer_epoch,
                base_sequence=self.base_sequence, transactional=self.transactional)
        return self._payload

    def reset_identity(self) -> None:
        """Forget producer id and sequence (a new producer id re-sequences the batch)."""
        self.producer_id = self.producer_epoch = self.base_sequence = -1
        self._payload = None


class RecordAccumulator:
    def __init__(self, batch_size: int, linger: float, max_in_flight: int = 1):
        if max_in_flight < 1:
            raise ValueError(f"max_in_flight must be at least 1, not {max_in_flight}")
        self.batch_size = batch_size
        self.linger = linger
        self.max_in_flight = max_in_flight
        self._queues: dict[TopicPartition, deque[ProducerBatch]] = {}
        self._in_flight: dict[TopicPartition, int] = {}  # drained, not yet answered (absent = 0)
        self.buffered_bytes = 0

    def append(self, tp: TopicPartition, record: tuple, fixed: int, now: float | None = None) -> ProducerBatch | None:
        """Add `record`, a (key, value, headers, timestamp ms) tuple of `fixed_size` `fixed`, to
        the partition's open batch and return that batch. Without `now` only an open batch with
        room takes it (None: there is none; call again with the time, which opens one)."""
        queue = self._queues.get(tp)
        batch = queue[-1] if queue else None
        # The record's exact size at the end of this batch, inline: this runs for every record `send` queues.
        if batch is not None and batch._payload is None and not batch.attempts:
            records = batch.records
            index, stamp = len(records), record[3] - records[0][3]
            body = fixed + (1 if index < 64 else 2 if index < 8192 else 3 if index < 1048576 else varint_size(index)) \
                + (1 if 0 <= stamp < 64 else 2 if 0 <= stamp < 8192 else varint_size(stamp))
            size = body + (1 if body < 64 else 2 if body < 8192 else varint_size(body))
            if batch.size + size <= self.batch_size:
                records.append(record)
                batch.size += size
                self.buffered_bytes += size
                return batch
        if now is None:
            return None
        batch = self._open(tp, now)
        batch.records.append(record)
        size = fixed + 2 + (1 if fixed < 62 else 2 if fixed < 8190 else varint_size(fixed + 2))  # deltas 0
        batch.size += size
        self.buffered_bytes += size
        return batch

    def append_values(self, tp: TopicPartition, values: list, start: int, limit: int, sizes: list[int],
                      timestamp: int, now: float) -> tuple[ProducerBatch, int]:
        """Add records with the values from values[start:limit] (no key, no headers) to the
        partition's open batch, or a new one, as far as they fit; `sizes[i]` is `value_sizes`'
        bound of values[:i + 1]. (That batch, the index after the last value it took.)"""
        base = sizes[start - 1] if start else 0
        queue = self._queues.get(tp)
        batch = queue[-1] if queue else None
        if batch is None or not self._takes(batch, sizes[start] - base):
            batch = self._open(tp, now)
        stop = max(start + 1, bisect_right(sizes, base + self.batch_size - batch.size, start, limit))
        batch.records.extend(zip(repeat(None), values[start:stop], repeat(()), repeat(timestamp)))
        size = sizes[stop - 1] - base
        batch.size += size
        self.buffered_bytes += size
        return batch, stop

    def _takes(self, batch: ProducerBatch, size: int) -> bool:
        """Whether a partition's last batch takes another record of `size`: not sent yet, and room."""
        return batch._payload is None and not batch.attempts and batch.size + size <= self.batch_size

    def _open(self, tp: TopicPartition, now: float) -> ProducerBatch:
        queue = self._queues.get(tp)
        if queue is None:
            queue = self._queues[tp] = deque()
        batch = ProducerBatch(tp[0], tp[1], now)
        queue.append(batch)
        return batch

    def send_now(self, batch: ProducerBatch) -> bool:
        """Whether the partition of `batch`, just opened or filled, is ready without lingering:
        the batch is full, or an earlier one waits."""
        return batch.size >= self.batch_size or len(self._queues[(batch.topic, batch.partition)]) > 1

    def ready(self, now: float, flushing: bool) -> tuple[list[TopicPartition], float]:
        """Partitions with a batch to send now (sorted), and the earliest time another may become ready."""
        # Runs on every wake of the sender: iterate, and sort only what is ready (sorting every
        # queue of a 1000-partition topic each time was a visible share of our producer's CPU).
        ready, next_time = [], float("inf")
        for tp, queue in self._queues.items():
            if not queue or self._in_flight.get(tp, 0) >= self.max_in_flight:
                continue
            first = queue[0]
            if first.attempts:
                due = first.retry_at
            elif flushing or len(queue) > 1 or first.size >= self.batch_size:
                due = now
            else:
                due = first.created + self.linger
            if due <= now:
                ready.append(tp)
            else:
                next_time = min(next_time, due)
        ready.sort()
        return ready, next_time

    def drain(self, tp: TopicPartition) -> ProducerBatch:
        queue = self._queues[tp]
        batch = queue.popleft()
        if not queue:
            del self._queues[tp]  # only partitions with something queued are visited
        self._in_flight[tp] = self._in_flight.get(tp, 0) + 1
        batch.in_flight = True
        return batch

    def reenqueue(self, batch: ProducerBatch, retry_at: float) -> None:
        batch.retry_at = retry_at
        queue = self._queues.setdefault((batch.topic, batch.partition), deque())
        at = 0
        if batch.base_sequence >= 0:  # several may come back: retries go out in sequence order
            while at < len(queue) and queue[at].attempts and 0 <= queue[at].base_sequence < batch.base_sequence:
                at += 1
        queue.insert(at, batch)
        self._landed(batch)

    def finished(self, batch: ProducerBatch) -> None:
        """The batch got its final answer (success or failure)."""
        self._landed(batch)
        self.buffered_bytes -= batch.size - _BATCH_OVERHEAD

    def _landed(self, batch: ProducerBatch) -> None:
        """An answer (or a retry decision) for a drained batch; a no-op for one never drained."""
        if not batch.in_flight:
            return
        batch.in_flight = False
        tp = (batch.topic, batch.partition)
        left = self._in_flight.get(tp, 0) - 1
        if left > 0:
            self._in_flight[tp] = left
        else:
            self._in_flight.pop(tp, None)

    def expire(self, now: float, delivery_timeout: float) -> list[ProducerBatch]:
        """Remove and return queued (not in-flight) batches older than the delivery timeout."""
        expired = []
        for tp, queue in self._queues.items():  # sorted below, once something expired
            while queue and now - queue[0].created >= delivery_timeout:
                expired.append(queue.popleft())
        expired.sort(key=lambda b: (b.topic, b.partition))  # stable: a partition's batches keep their order
        return expired

    def remove_sent(self, producer_id: int) -> list[ProducerBatch]:
        """Remove and return queued batches already sent under `producer_id` (retries wait at
        the front of their queue)."""
        removed = []
        for tp in sorted(self._queues):
            queue = self._queues[tp]
            while queue and queue[0].attempts and queue[0].producer_id == producer_id:
                removed.append(queue.popleft())
        return removed

    def has_queued(self) -> bool:
        return bool(self._queues)  # only partitions with something queued have a queue

    def queued_batches(self) -> int:
        return sum(len(q) for q in self._queues.values())

    def drop_all(self) -> list[ProducerBatch]:
        batches = [b for tp in sorted(self._queues) for b in self._queues[tp]]
        self._queues.clear()
        return batches
