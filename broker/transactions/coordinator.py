"""The transaction coordinator core (Kafka's TransactionCoordinator + TransactionStateManager),
sans-IO: one instance per broker, owning the transactional ids whose `__transaction_state`
partition this broker leads. Every call takes `now` (broker.groups.timers.Now: deadlines
on its monotonic clock, the timestamps it writes on its wall clock) and returns a TxnOutput.

    init_producer_id   a new id (epoch 0) or an epoch bump; an Ongoing transaction is
                       fenced (epoch + 1) and aborted, and the caller retries
                       (CONCURRENT_TRANSACTIONS), as Kafka does
    add_partitions     Empty/Complete* -> Ongoing; more partitions into an Ongoing one
    verify_partitions  KIP-890 part 1: whether partitions are in the open transaction
    end_txn            Ongoing -> PrepareCommit/PrepareAbort (answered once written), then
                       markers to every partition, then CompleteCommit/CompleteAbort
    tick               aborts transactions open longer than their timeout (fencing the
                       producer, as Kafka does; by the monotonic clock); forgets ids idle
                       past their expiration (by last_update_ms, the wall clock, as Kafka)
    load_partition     replays records; transactions found in Prepare* get their markers

Producer ids come from the caller (the controller's blocks): `needs_producer_id` says
when a request will want a fresh one.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Iterable

from broker.groups.coordinator import PartitionStatus
from broker.groups.hashing import partition_for_group
from broker.groups.timers import KeyedTimers, Now
from broker.transactions.log_records import decode_key, decode_value, encode_key, encode_value
from broker.transactions.metadata import MAX_PRODUCER_EPOCH, TopicPartition, TransactionMetadata, TxnState
from broker.transactions.results import MarkerRequest, TxnOutput, TxnResult
from broker.groups.results import PendingAppend
from wire.error_codes import ErrorCode
from wire.errors import DecodeError

__all__ = ["TransactionCoordinator", "TxnConfig"]

_ABORT_TIMER = ("abort_timed_out",)
_EXPIRY_TIMER = ("expire_ids",)
_IDLE = (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT)
_PREPARE = {TxnState.PREPARE_COMMIT: True, TxnState.PREPARE_ABORT: False}
_COMPLETE = {True: TxnState.COMPLETE_COMMIT, False: TxnState.COMPLETE_ABORT}


@dataclass(frozen=True)
class TxnConfig:
    num_partitions: int = 50                 # transaction.state.log.num.partitions
    max_timeout_ms: int = 900_000            # transaction.max.timeout.ms
    abort_check_interval_ms: int = 10_000    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    id_expiration_ms: int = 604_800_000      # transactional.id.expiration.ms (7 days)
    expiry_check_interval_ms: int = 3_600_000  # transaction.remove.expired.transaction.cleanup.interval.ms


def _append_error(error: ErrorCode) -> ErrorCode:
    """What a client is told when its record could not be written (Kafka's mapping)."""
    if error in (ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.NOT_ENOUGH_REPLICAS,
                 ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.REQUEST_TIMED_OUT):
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    if error in (ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.KAFKA_STORAGE_ERROR):
        return ErrorCode.NOT_COORDINATOR
    if error in (ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE):
        return ErrorCode.UNKNOWN_SERVER_ERROR
    return error


class TransactionCoordinator:
    def __init__(self, config: TxnConfig | None = None):
        self.config = config or TxnConfig()
        self.txns: dict[str, TransactionMetadata] = {}
        self.partitions: dict[int, PartitionStatus] = {}
        self.timers = KeyedTimers()
        self._appends: dict[int, tuple[int, Callable[[ErrorCode, TxnOutput, Now], None]]] = {}
        self._next_append_id = 1

    # ------------------------------------------------------------------ routing

    def partition_for(self, transactional_id: str) -> int:
        return partition_for_group(transactional_id, self.config.num_partitions)

    def route_error(self, transactional_id: str) -> ErrorCode:
        if not transactional_id:
            return ErrorCode.INVALID_REQUEST
        status = self.partitions.get(self.partition_for(transactional_id))
        if status is None:
            return ErrorCode.NOT_COORDINATOR
        if status is PartitionStatus.LOADING:
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
        return ErrorCode.NONE

    def needs_producer_id(self, transactional_id: str) -> bool:
        txn = self.txns.get(transactional_id)
        return txn is None or txn.producer_epoch >= MAX_PRODUCER_EPOCH - 1

    # ------------------------------------------------------------------ writes

    def _write(self, txn: TransactionMetadata, target: TransactionMetadata,
               on_done: Callable[[ErrorCode, TxnOutput, Now], None], out: TxnOutput) -> None:
        """Write `target` as the id's new state; `on_done(error, out, now)` once committed or failed
        (`target` is applied first when committed). A Dead target is written as a tombstone and
        forgets the id once committed."""
        txn.pending_state = target.state
        append_id = self._next_append_id
        self._next_append_id += 1
        partition = self.partition_for(txn.transactional_id)

        def done(error: ErrorCode, out: TxnOutput, now: Now) -> None:
            if self.txns.get(txn.transactional_id) is not txn:
                on_done(ErrorCode.NOT_COORDINATOR, out, now)  # unloaded meanwhile
                return
            if error == ErrorCode.NONE:
                txn.apply(target)
                if target.state is TxnState.DEAD:
                    del self.txns[txn.transactional_id]
            else:
                txn.pending_state = None
                if txn.producer_epoch < 0:  # a new id whose first record never made it
                    del self.txns[txn.transactional_id]
            on_done(_append_error(error), out, now)

        self._appends[append_id] = (partition, done)
        value = None if target.state is TxnState.DEAD else encode_value(target.stored())
        out.appends.append(PendingAppend(append_id, partition, [(encode_key(txn.transactional_id), value)]))

    def append_done(self, append_id: int, error: ErrorCode, now: Now) -> TxnOutput:
        out = TxnOutput()
        entry = self._appends.pop(append_id, None)
        if entry is not None:
            entry[1](ErrorCode(error), out, now)
        return out

    # ------------------------------------------------------------------ InitProducerId

    def init_producer_id(self, token, transactional_id: str, timeout_ms: int, new_producer_id: int | None,
                         now: Now) -> TxnOutput:
        out = TxnOutput()

        def answer(error, pid=-1, epoch=-1):
            out.complete(token, TxnResult(ErrorCode(error), pid, epoch))
            return out

        error = self.route_error(transactional_id)
        if error != ErrorCode.NONE:
            return answer(error)
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return answer(ErrorCode.INVALID_TRANSACTION_TIMEOUT)
        txn = self.txns.get(transactional_id)
        if txn is None:
            if new_producer_id is None:
                return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
            txn = self.txns[transactional_id] = TransactionMetadata(
                transactional_id, new_producer_id, -1, timeout_ms, TxnState.EMPTY, last_update_ms=now.wall_ms)
        if txn.pending_state is not None or txn.state in (
                TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT, TxnState.PREPARE_EPOCH_FENCE, TxnState.DEAD):
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.state is TxnState.ONGOING:
            # A new incarnation of the producer: fence the old one and abort what it left open.
            self._fence_and_abort(txn, now, out)
            return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
        if txn.producer_epoch >= MAX_PRODUCER_EPOCH - 1:
            if new_producer_id is None:
                return answer(ErrorCode.CONCURRENT_TRANSACTIONS)
            pid, epoch = new_producer_id, 0
        else:
            pid, epoch = txn.producer_id, txn.producer_epoch + 1
        target = replace(txn.stored(), producer_id=pid, producer_epoch=epoch, timeout_ms=timeout_ms,
                         state=TxnState.EMPTY, partitions=frozenset(), txn_start_ms=-1, last_update_ms=now.wall_ms,
                         last_producer_id=txn.producer_id, last_producer_epoch=txn.producer_epoch)

        def written(error: ErrorCode, out: TxnOutput, now: Now) -> None:
            if error == ErrorCode.NONE:
                out.complete(token, TxnResult(error, pid, epoch))
            else:
                out.complete(token, TxnResult(error))

        self._write(txn, target, written, out)
        return out

    # ------------------------------------------------------------------ AddPartitionsToTxn / AddOffsetsToTxn

    def _check_producer(self, transactional_id: str, producer_id: int, epoch: int) -> tuple[ErrorCode, object]:
        error = self.route_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        txn = self.txns.get(transactional_id)
        if txn is None or txn.producer_id != producer_id:
            return ErrorCode.INVALID_PRODUCER_ID_MAPPING, None
        if txn.producer_epoch != epoch:
            return ErrorCode.PRODUCER_FENCED, None
        return ErrorCode.NONE, txn

    def add_partitions(self, token, transactional_id: str, producer_id: int, epoch: int,
                       partitions: Iterable[TopicPartition], now: Now) -> TxnOutput:
        """Answer: TxnResult (one error for every partition)."""
        out = TxnOutput()
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if error == ErrorCode.NONE:
            if txn.pending_state is not None or txn.state in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
                error = ErrorCode.CONCURRENT_TRANSACTIONS
            elif txn.state in (TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
                error = ErrorCode.INVALID_TXN_STATE
        if error != ErrorCode.NONE:
            out.complete(token, TxnResult(error))
            return out
        wanted = frozenset(partitions)
        if txn.state is TxnState.ONGOING and wanted <= txn.partitions:
            out.complete(token, TxnResult(ErrorCode.NONE))
            return out
        target = replace(txn.stored(), state=TxnState.ONGOING, partitions=txn.partitions | wanted,
                         last_update_ms=now.wall_ms)
        if txn.state is not TxnState.ONGOING:  # a new transaction starts
            target.txn_start_ms = now.wall_ms
            target.timeout_deadline_ms = now.monotonic_ms + txn.timeout_ms
        self._write(txn, target, lambda err, out, now: out.complete(token, TxnResult(err)), out)
        return out

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: Iterable[TopicPartition]) -> dict[TopicPartition, ErrorCode]:
        """KIP-890: is each partition part of the producer's open transaction? (INVALID_TXN_STATE
        when not: a write there would hang outside any transaction)."""
        partitions = list(partitions)
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if error != ErrorCode.NONE:
            return {tp: error for tp in partitions}
        ongoing = txn.state is TxnState.ONGOING
        return {tp: ErrorCode.NONE if ongoing and tp in txn.partitions else ErrorCode.INVALID_TXN_STATE
                for tp in partitions}

    # ------------------------------------------------------------------ EndTxn

    def end_txn(self, token, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                now: Now) -> TxnOutput:
        out = TxnOutput()
        error, txn = self._check_producer(transactional_id, producer_id, epoch)
        if error == ErrorCode.NONE:
            error = self._end_error(txn, commit)
        if error is not None:
            out.complete(token, TxnResult(error))
            return out
        self._prepare_end(txn, commit, now, out, lambda err, out: out.complete(token, TxnResult(err)))
        return out

    @staticmethod
    def _end_error(txn: TransactionMetadata, commit: bool) -> ErrorCode | None:
        """Kafka's answer to an EndTxn in the current state; None: go ahead."""
        if txn.pending_state is not None:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        state = txn.state
        if state is TxnState.ONGOING:
            return None
        if state is _COMPLETE[commit]:
            return ErrorCode.NONE  # a retry of an EndTxn that already finished
        if state in _PREPARE and _PREPARE[state] == commit:
            return ErrorCode.CONCURRENT_TRANSACTIONS
        return ErrorCode.INVALID_TXN_STATE

    def _prepare_end(self, txn: TransactionMetadata, commit: bool, now: Now, out: TxnOutput,
                     answer: Callable[[ErrorCode, TxnOutput], None]) -> None:
        target = replace(txn.stored(), state=TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT,
                         last_update_ms=now.wall_ms)

        def written(error: ErrorCode, out: TxnOutput, now: Now) -> None:
            answer(error, out)
            if error == ErrorCode.NONE:
                self._send_markers(txn, out, now)

        self._write(txn, target, written, out)

    def _fence_and_abort(self, txn: TransactionMetadata, now: Now, out: TxnOutput) -> None:
        """Bump the epoch (the open producer's requests are fenced from now on) and abort."""
        txn.producer_epoch += 1
        txn.last_update_ms = now.wall_ms
        self._prepare_end(txn, False, now, out, lambda err, out: None)

    # ------------------------------------------------------------------ markers

    def _send_markers(self, txn: TransactionMetadata, out: TxnOutput, now: Now) -> None:
        commit = _PREPARE[txn.state]
        txn.pending_markers = set(txn.partitions)
        if txn.pending_markers:
            out.markers.append(MarkerRequest(txn.transactional_id, txn.producer_id, txn.producer_epoch, commit,
                                             frozenset(txn.partitions)))
        else:
            self._complete(txn, out, now)

    def markers_written(self, transactional_id: str, producer_id: int, epoch: int,
                        partitions: Iterable[TopicPartition], now: Now) -> TxnOutput:
        """The markers of these partitions are written (or their partitions are gone)."""
        out = TxnOutput()
        txn = self.txns.get(transactional_id)
        if (txn is None or txn.producer_id != producer_id or txn.producer_epoch != epoch
                or txn.state not in _PREPARE or txn.pending_state is not None):
            return out
        txn.pending_markers.difference_update(partitions)
        if not txn.pending_markers:
            self._complete(txn, out, now)
        return out

    def _complete(self, txn: TransactionMetadata, out: TxnOutput, now: Now) -> None:
        commit = _PREPARE[txn.state]
        target = replace(txn.stored(), state=_COMPLETE[commit], partitions=frozenset(), txn_start_ms=-1,
                         last_update_ms=now.wall_ms)

        def written(error: ErrorCode, out: TxnOutput, now: Now) -> None:
            if error not in (ErrorCode.NONE, ErrorCode.NOT_COORDINATOR):
                # Still ours: the markers are written, only the record is missing; try again.
                self.timers.schedule(("complete", txn.transactional_id), now, 1_000)

        self._write(txn, target, written, out)

    # ------------------------------------------------------------------ loading

    def begin_loading(self, partition: int) -> None:
        self.partitions[partition] = PartitionStatus.LOADING

    def load_partition(self, partition: int, records: Iterable[tuple[bytes, bytes | None]], now: Now,
                       on_skip: Callable[[int, str], None] | None = None) -> TxnOutput:
        """Replay the partition's records; transactions left in Prepare* get their markers."""
        out = TxnOutput()
        loaded: dict[str, TransactionMetadata] = {}
        for position, (key, value) in enumerate(records):
            if key is None:
                continue
            try:
                txn_id = decode_key(key)
                if value is None:
                    loaded.pop(txn_id, None)
                else:
                    loaded[txn_id] = decode_value(txn_id, value)
            except DecodeError as exc:
                if on_skip is not None:
                    on_skip(position, str(exc))
        for txn_id in sorted(loaded):
            if self.partition_for(txn_id) == partition:
                txn = self.txns[txn_id] = loaded[txn_id]
                if txn.state is TxnState.ONGOING:
                    # What its start (another broker's wall clock, maybe) leaves of its timeout;
                    # never more than all of it, whatever that clock said.
                    left = min(max(txn.txn_start_ms + txn.timeout_ms - now.wall_ms, 0), txn.timeout_ms)
                    txn.timeout_deadline_ms = now.monotonic_ms + left
        self.partitions[partition] = PartitionStatus.ACTIVE
        for txn_id in sorted(loaded):
            txn = self.txns.get(txn_id)
            if txn is loaded[txn_id] and txn.state in _PREPARE:
                self._send_markers(txn, out, now)
        if _ABORT_TIMER not in self.timers:
            self.timers.schedule(_ABORT_TIMER, now, self.config.abort_check_interval_ms)
        if _EXPIRY_TIMER not in self.timers:
            self.timers.schedule(_EXPIRY_TIMER, now, self.config.expiry_check_interval_ms)
        return out

    def unload_partition(self, partition: int, now: Now) -> TxnOutput:
        out = TxnOutput()
        self.partitions.pop(partition, None)
        for txn_id in sorted(self.txns):
            if self.partition_for(txn_id) == partition:
                del self.txns[txn_id]
                self.timers.cancel(("complete", txn_id))
        for append_id in sorted(self._appends):
            if self._appends[append_id][0] == partition:
                out.extend(self.append_done(append_id, ErrorCode.NOT_LEADER_OR_FOLLOWER, now))
        if not self.partitions:
            self.timers.cancel(_ABORT_TIMER)
            self.timers.cancel(_EXPIRY_TIMER)
        return out

    # ------------------------------------------------------------------ time

    def next_deadline(self) -> int | None:
        """The earliest timer (monotonic ms), or None."""
        return self.timers.next_deadline()

    def tick(self, now: Now) -> TxnOutput:
        out = TxnOutput()
        while (key := self.timers.pop_due(now)) is not None:
            if key == _ABORT_TIMER:
                self.abort_timed_out(now, out)
                self.timers.schedule(_ABORT_TIMER, now, self.config.abort_check_interval_ms)
            elif key == _EXPIRY_TIMER:
                self.expire_ids(now, out)
                self.timers.schedule(_EXPIRY_TIMER, now, self.config.expiry_check_interval_ms)
            elif key[0] == "complete":
                txn = self.txns.get(key[1])
                if txn is not None and txn.state in _PREPARE and txn.pending_state is None and not txn.pending_markers:
                    self._complete(txn, out, now)
        return out

    def abort_timed_out(self, now: Now, out: TxnOutput) -> None:
        for txn_id in sorted(self.txns):
            txn = self.txns[txn_id]
            if (txn.state is TxnState.ONGOING and txn.pending_state is None
                    and txn.timeout_deadline_ms < now.monotonic_ms):
                self._fence_and_abort(txn, now, out)

    def expire_ids(self, now: Now, out: TxnOutput) -> None:
        """Ids idle (no open transaction) for transactional.id.expiration.ms are written Dead (a
        tombstone) and forgotten; the next InitProducerId starts them afresh."""
        for txn_id in sorted(self.txns):
            txn = self.txns[txn_id]
            if (txn.state in _IDLE and txn.pending_state is None
                    and txn.last_update_ms + self.config.id_expiration_ms <= now.wall_ms):
                self._write(txn, replace(txn.stored(), state=TxnState.DEAD, last_update_ms=now.wall_ms),
                            lambda err, out, now: None, out)

    # ------------------------------------------------------------------ describe

    def describe(self, transactional_id: str) -> tuple[ErrorCode, TransactionMetadata | None]:
        """DescribeTransactions of one id: its state here, or why not."""
        error = self.route_error(transactional_id)
        if error != ErrorCode.NONE:
            return error, None
        txn = self.txns.get(transactional_id)
        return (ErrorCode.TRANSACTIONAL_ID_NOT_FOUND, None) if txn is None else (ErrorCode.NONE, txn)

    def list_transactions(self, states: set[TxnState], producer_ids: set[int], min_duration_ms: int,
                          now: Now) -> tuple[ErrorCode, list[TransactionMetadata]]:
        """ListTransactions: the ids this broker coordinates, filtered (empty filters take all;
        a duration takes those open at least that long)."""
        if any(status is PartitionStatus.LOADING for status in self.partitions.values()):
            return ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, []
        found = []
        for txn_id in sorted(self.txns):
            txn = self.txns[txn_id]
            if states and txn.state not in states or producer_ids and txn.producer_id not in producer_ids:
                continue
            if min_duration_ms >= 0 and (txn.txn_start_ms < 0 or now.wall_ms - txn.txn_start_ms < min_duration_ms):
                continue
            found.append(txn)
        return ErrorCode.NONE, found
