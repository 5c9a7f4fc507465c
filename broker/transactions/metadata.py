"""One transactional id's state on its coordinator (Kafka's TransactionMetadata).

States and their ids are Kafka's (TransactionState.java):

    Empty --AddPartitions--> Ongoing --EndTxn--> PrepareCommit --markers--> CompleteCommit
                                     \\-------> PrepareAbort  --markers--> CompleteAbort
    Complete*/Empty --InitProducerId--> Empty (epoch + 1)
    Ongoing --InitProducerId / timeout--> PrepareAbort (epoch + 1: the open producer is fenced)

    Empty/Complete* --transactional.id.expiration.ms idle--> Dead (a tombstone; forgotten)

PrepareEpochFence is read (records another writer may have written) but never entered: a
fence bumps the epoch in memory and writes PrepareAbort with it.

A change is first written to `__transaction_state` (the metadata holds it as
`pending_state` meanwhile; every other request meets CONCURRENT_TRANSACTIONS) and applied
once the record is committed.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field, replace

__all__ = ["TxnState", "TransactionMetadata", "TopicPartition", "MAX_PRODUCER_EPOCH"]

TopicPartition = tuple[str, int]
MAX_PRODUCER_EPOCH = 32_767  # Short.MaxValue: at MAX - 1 the next bump takes a new producer id


class TxnState(enum.IntEnum):
    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TxnState = TxnState.EMPTY
    partitions: frozenset[TopicPartition] = frozenset()
    txn_start_ms: int = -1
    last_update_ms: int = -1
    last_producer_id: int = -1
    last_producer_epoch: int = -1
    # Not stored: when an Ongoing transaction times out here (monotonic ms; txn_start_ms is
    # the wall-clock time it began), what is being written now, which markers are still to
    # be written.
    timeout_deadline_ms: int = -1
    pending_state: TxnState | None = None
    pending_markers: set[TopicPartition] = field(default_factory=set)

    def stored(self) -> "TransactionMetadata":
        """The persistent part (what a record holds) and the timeout deadline, detached from this object."""
        return replace(self, pending_state=None, pending_markers=set())

    def apply(self, target: "TransactionMetadata") -> None:
        """A written transition is committed: take its stored fields and timeout deadline."""
        self.producer_id = target.producer_id
        self.producer_epoch = target.producer_epoch
        self.timeout_ms = target.timeout_ms
        self.state = target.state
        self.partitions = target.partitions
        self.txn_start_ms = target.txn_start_ms
        self.timeout_deadline_ms = target.timeout_deadline_ms
        self.last_update_ms = target.last_update_ms
        self.last_producer_id = target.last_producer_id
        self.last_producer_epoch = target.last_producer_epoch
        self.pending_state = None
