"""One idempotent producer's state on one partition (Kafka's ProducerStateEntry).

A producer id owns an epoch and the metadata of its last few batches
(Kafka keeps 5: the most a producer may have in flight per partition), which
is exactly what is needed to recognise a retried batch and answer with the
offsets it was first written at.

Sequence numbers are int32s that wrap from 2^31-1 back to 0.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from storage.log.txn_index import AbortedTxn  # what an ABORT marker ends (indexed per segment)

__all__ = [
    "AbortedTxn",
    "BatchMetadata",
    "ProducerEntry",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "MAX_SEQUENCE",
    "NUM_BATCHES_TO_RETAIN",
    "in_sequence",
    "sequence_distance",
]

NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
MAX_SEQUENCE = 0x7FFFFFFF
NUM_BATCHES_TO_RETAIN = 5


def in_sequence(last_seq: int, next_seq: int) -> bool:
    """`next_seq` directly follows `last_seq` (with wrap-around)."""
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == MAX_SEQUENCE)


def sequence_distance(older: int, newer: int) -> int:
    """How many steps forward from `older` to `newer` on the wrapping sequence circle."""
    return (newer - older) % (MAX_SEQUENCE + 1)


@dataclass(slots=True, frozen=True)
class BatchMetadata:
    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp: int  # the batch's max timestamp (ms), what a duplicate is answered with


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=deque)
    last_timestamp: int = -1  # ms of the newest batch; drives producer-id expiry
    current_txn_first_offset: int = -1  # first offset of its open transaction here, -1 if none
    coordinator_epoch: int = -1  # of the newest transaction marker for it here

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def bump_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            # A new epoch restarts the sequence space: earlier batches can no longer be retried.
            self.epoch = epoch
            self.batches.clear()

    def add_batch(self, epoch: int, batch: BatchMetadata, max_batches: int = NUM_BATCHES_TO_RETAIN) -> None:
        self.bump_epoch(epoch)
        self.batches.append(batch)
        while len(self.batches) > max_batches:
            self.batches.popleft()
        self.last_timestamp = max(self.last_timestamp, batch.timestamp)

    def copy(self) -> "ProducerEntry":
        return ProducerEntry(self.producer_id, self.epoch, deque(self.batches), self.last_timestamp,
                             self.current_txn_first_offset, self.coordinator_epoch)
