"""Per-partition idempotent-producer state (Kafka's ProducerStateManager), sans-IO.

The produce path on the leader, holding the partition's append lock:

    verdict = state.check(header)             # pure: nothing changes
    if verdict.duplicate: answer with verdict.duplicate.first_offset (a retry; append nothing)
    elif verdict.error:   answer with verdict.error
    else: info = log.append(batch); state.record(header, info.first_offset)

Followers and recovery use `apply` (no validation: the leader already decided)
and `rebuild`, which replays batch headers read back from the log. The state
as of an offset is saved with `to_bytes()` next to the segments
(storage/log/producer_state_snapshot.py) so recovery replays only the tail;
`truncate_to` reloads from such a snapshot plus the surviving log.

Transactions: a producer's first transactional batch opens its transaction here (its
offset bounds the last stable offset); the coordinator's COMMIT/ABORT marker closes it,
and an aborted one becomes an `AbortedTxn`, queued in `newly_aborted` for the caller to
write to the log's aborted transaction index (storage.log.txn_index: what read_committed
fetches list and the cleaner drops). Log entries replayed are batch headers, or
(header, commit[, coordinator epoch]) for transaction markers (commit: True COMMIT, False
ABORT). A marker from an older coordinator epoch than the producer last saw is refused
(TRANSACTION_COORDINATOR_FENCED): a deposed coordinator cannot close a transaction again.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable, Union

from broker.producer_state.entry import (
    NO_PRODUCER_EPOCH,
    AbortedTxn,
    NUM_BATCHES_TO_RETAIN,
    BatchMetadata,
    ProducerEntry,
    in_sequence,
    sequence_distance,
)
from broker.producer_state.snapshot_codec import decode_snapshot, encode_snapshot
from wire.batch_header import BatchHeader
from wire.error_codes import ErrorCode

__all__ = ["ProducerStateManager", "ProducerCheck", "AbortedTxn", "LogEntry", "DEFAULT_PRODUCER_ID_EXPIRATION_MS"]

DEFAULT_PRODUCER_ID_EXPIRATION_MS = 86_400_000  # producer.id.expiration.ms: 1 day
_HALF_SEQUENCE_SPACE = 1 << 30


# A batch header, or (header, commit[, coordinator epoch]) for a transaction marker.
LogEntry = Union[BatchHeader, tuple[BatchHeader, bool], tuple[BatchHeader, bool, int]]


def _split(entry: LogEntry) -> tuple[BatchHeader, bool | None, int]:
    if isinstance(entry, BatchHeader):
        return entry, None, -1
    return (*entry, -1) if len(entry) == 2 else entry


@dataclass(slots=True, frozen=True)
class ProducerCheck:
    """The verdict on one batch: accept, a retried duplicate, or an error."""

    error: ErrorCode = ErrorCode.NONE
    duplicate: BatchMetadata | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.NONE and self.duplicate is None


_ACCEPT = ProducerCheck()


class ProducerStateManager:
    def __init__(self, *, producer_id_expiration_ms: int = DEFAULT_PRODUCER_ID_EXPIRATION_MS,
                 max_batches: int = NUM_BATCHES_TO_RETAIN):
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.max_batches = max_batches
        self.producers: dict[int, ProducerEntry] = {}
        # Every batch below this offset has been applied (the offset a snapshot describes).
        self.end_offset = 0
        self.ongoing: dict[int, int] = {}  # producer id -> first offset of its open transaction
        # Transactions aborted since the caller last drained this (ascending by marker offset).
        self.newly_aborted: list[AbortedTxn] = []
        # (first offset, marker offset) of finished transactions whose marker may not be
        # replicated yet: they bound the LSO until the high watermark passes the marker.
        self._finished: deque[tuple[int, int]] = deque()

    # ------------------------------------------------------------------ leader path

    def check(self, header: BatchHeader) -> ProducerCheck:
        """Validate a client batch against the state; changes nothing."""
        producer_id = header.producer_id
        if producer_id < 0:
            return _ACCEPT  # not idempotent
        if header.base_sequence < 0:
            return ProducerCheck(ErrorCode.INVALID_RECORD, message=f"producer {producer_id} sent no sequence number")
        epoch, first_seq, last_seq = header.producer_epoch, header.base_sequence, header.last_sequence
        entry = self.producers.get(producer_id)
        if entry is not None and entry.current_txn_first_offset >= 0 and not header.is_transactional:
            return ProducerCheck(ErrorCode.INVALID_TXN_STATE,
                                 message=f"producer {producer_id} wrote a non-transactional batch inside a transaction")
        if entry is None:
            if first_seq != 0:
                # The state expired (or never existed here): a gap cannot be told from a loss.
                return ProducerCheck(ErrorCode.UNKNOWN_PRODUCER_ID,
                                     message=f"no state for producer {producer_id}, first sequence {first_seq} is not 0")
            return _ACCEPT
        duplicate = entry.find_duplicate(epoch, first_seq, last_seq)
        if duplicate is not None:
            return ProducerCheck(duplicate=duplicate)
        if epoch < entry.epoch:
            return ProducerCheck(ErrorCode.INVALID_PRODUCER_EPOCH,
                                 message=f"producer {producer_id} epoch {epoch} is older than {entry.epoch}")
        if epoch > entry.epoch or entry.epoch == NO_PRODUCER_EPOCH:
            if first_seq != 0 and entry.epoch != NO_PRODUCER_EPOCH:
                return ProducerCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     message=f"producer {producer_id} new epoch {epoch} must start at sequence 0, got {first_seq}")
            return _ACCEPT
        if not entry.batches or in_sequence(entry.last_seq, first_seq):
            return _ACCEPT
        if self._is_stale(entry, last_seq):
            # Older than anything we still remember: written long ago, so not lost.
            return ProducerCheck(ErrorCode.DUPLICATE_SEQUENCE_NUMBER,
                                 message=f"producer {producer_id} batch {first_seq}..{last_seq} is older than the retained batches")
        return ProducerCheck(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                             message=f"producer {producer_id} expected sequence {(entry.last_seq + 1) & 0x7FFFFFFF}, got {first_seq}")

    @staticmethod
    def _is_stale(entry: ProducerEntry, last_seq: int) -> bool:
        """The batch ends before the first retained batch starts (on the wrapping circle)."""
        behind = sequence_distance(last_seq, entry.first_seq)
        return 0 < behind < _HALF_SEQUENCE_SPACE

    def record(self, header: BatchHeader, first_offset: int, timestamp: int | None = None) -> None:
        """The accepted batch now sits at `first_offset`; remember it."""
        self.apply(header, first_offset, timestamp)

    def check_and_record(self, header: BatchHeader, first_offset: int, timestamp: int | None = None) -> ProducerCheck:
        """`check`, then `record` if accepted — for callers whose append cannot fail in between."""
        verdict = self.check(header)
        if verdict.ok:
            self.record(header, first_offset, timestamp)
        return verdict

    # ------------------------------------------------------------------ replication / recovery

    def check_marker(self, header: BatchHeader, coordinator_epoch: int) -> ProducerCheck:
        """A coordinator's marker: refused when older than the producer's epoch, or than the
        coordinator epoch of the last marker for the producer."""
        entry = self.producers.get(header.producer_id)
        if entry is not None and header.producer_epoch < entry.epoch:
            return ProducerCheck(ErrorCode.INVALID_PRODUCER_EPOCH,
                                 message=f"marker epoch {header.producer_epoch} is older than {entry.epoch}")
        if entry is not None and coordinator_epoch < entry.coordinator_epoch:
            return ProducerCheck(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                                 message=f"coordinator epoch {coordinator_epoch} is older than {entry.coordinator_epoch}")
        return _ACCEPT

    def apply(self, header: BatchHeader, first_offset: int | None = None, timestamp: int | None = None,
              commit: bool | None = None, coordinator_epoch: int = -1) -> None:
        """Record a batch without validating it (it is already in the log); `commit` says what a
        transaction marker is (None for any other batch), written by which coordinator epoch."""
        base = header.base_offset if first_offset is None else first_offset
        last_offset = base + header.last_offset_delta
        self.end_offset = max(self.end_offset, last_offset + 1)
        if header.producer_id < 0:
            return
        ts = header.max_timestamp if timestamp is None else timestamp
        if header.is_control:
            if header.is_transactional and commit is not None:
                self._end_transaction(header, last_offset, commit, coordinator_epoch, ts)
            return
        if header.base_sequence < 0:
            return
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id)
        batch = BatchMetadata(header.base_sequence, header.last_sequence, base, last_offset, ts)
        entry.add_batch(header.producer_epoch, batch, self.max_batches)
        if header.is_transactional and entry.current_txn_first_offset < 0:
            entry.current_txn_first_offset = base
            self.ongoing[header.producer_id] = base

    def _end_transaction(self, header: BatchHeader, marker_offset: int, commit: bool, coordinator_epoch: int,
                         timestamp: int) -> None:
        entry = self.producers.get(header.producer_id)
        if entry is None:
            entry = self.producers[header.producer_id] = ProducerEntry(header.producer_id)
        if header.producer_epoch > entry.epoch:
            entry.bump_epoch(header.producer_epoch)
        entry.coordinator_epoch = max(entry.coordinator_epoch, coordinator_epoch)
        entry.last_timestamp = max(entry.last_timestamp, timestamp)
        first = entry.current_txn_first_offset
        if first < 0:
            return  # nothing open here (a marker written again after a coordinator failover)
        entry.current_txn_first_offset = -1
        self.ongoing.pop(header.producer_id, None)
        if not commit:
            # Kafka's lastStableOffset(completedTxn): no transaction aborted later starts below it.
            stable = min(self.ongoing.values(), default=marker_offset + 1)
            self.newly_aborted.append(AbortedTxn(header.producer_id, first, marker_offset, stable))
        self._finished.append((first, marker_offset))

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of a transaction that is open, or whose marker is not below the HW."""
        finished = self._finished
        while finished and finished[0][1] < high_watermark:
            finished.popleft()
        firsts = list(self.ongoing.values())
        firsts.extend(first for first, _ in finished)
        return min(firsts, default=None)

    def rebuild(self, entries: Iterable[LogEntry]) -> None:
        """Replay log entries; those below `end_offset` are already applied."""
        for item in entries:
            header, commit, coordinator_epoch = _split(item)
            if header.next_offset <= self.end_offset:
                continue
            self.apply(header, commit=commit, coordinator_epoch=coordinator_epoch)

    def truncate_to(self, offset: int, snapshot: tuple[int, bytes] | None,
                    headers: Iterable[LogEntry]) -> None:
        """The log was cut at `offset`: reload from the newest snapshot at or below it, replay the rest.

        `snapshot` is (offset, blob) as ProducerSnapshots.latest(up_to=offset) returns it;
        `headers` the log's batch headers from the snapshot offset on (later ones are ignored).
        """
        self.producers = {}
        self.end_offset = 0
        self.ongoing, self.newly_aborted, self._finished = {}, [], deque()
        if snapshot is not None and snapshot[0] <= offset:
            self.load_snapshot(*snapshot)
        self.rebuild(h for h in headers if _split(h)[0].base_offset < offset)
        self.end_offset = offset  # the headers covered the whole surviving log

    # ------------------------------------------------------------------ snapshots and expiry

    def to_bytes(self) -> bytes:
        return encode_snapshot([self.producers[pid] for pid in sorted(self.producers)])

    def load_snapshot(self, offset: int, blob: bytes) -> None:
        """Replace the state with a snapshot taken at `offset`. Raises DecodeError on bad bytes."""
        entries, aborted = decode_snapshot(blob)
        self.producers = {e.producer_id: e for e in entries}
        self.ongoing = {e.producer_id: e.current_txn_first_offset for e in entries if e.current_txn_first_offset >= 0}
        self.newly_aborted = list(aborted)  # a snapshot written before the per-segment index
        self._finished = deque()
        self.end_offset = offset

    def remove_expired(self, now_ms: int) -> list[int]:
        """Forget producers idle for producer.id.expiration.ms; returns their ids."""
        expired = [pid for pid in sorted(self.producers)
                   if now_ms - self.producers[pid].last_timestamp >= self.producer_id_expiration_ms
                   and pid not in self.ongoing]
        for pid in expired:
            del self.producers[pid]
        return expired

    def last_entry(self, producer_id: int) -> ProducerEntry | None:
        return self.producers.get(producer_id)
