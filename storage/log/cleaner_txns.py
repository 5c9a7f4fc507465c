"""What the log cleaner knows about transactions while it walks a log (Kafka's
CleanedTransactionMetadata), sans-IO.

The cleaner walks batches in offset order and tells this object about each one:

- a transactional data batch of a transaction listed in the aborted transaction index
  is aborted: `on_batch` returns True and the cleaner drops its records (and leaves it
  out of the offset map: an aborted record must never displace a committed one);
- an ABORT marker is kept (and its index entry written to the cleaned segment) while this
  pass still met records of its transaction; once a pass meets none, the marker is
  discardable;
- a COMMIT marker is discardable once a pass meets no batch of its transaction;
- a discardable marker is stamped with a delete horizon (now + delete.retention.ms) and
  removed by the first pass after it, as tombstones are (KIP-534): a consumer that read
  the transaction's records before they were cleaned still sees the marker end it.
"""
from __future__ import annotations

import heapq

from storage.log.txn_index import AbortedTxn
from wire.batch_header import BatchHeader

__all__ = ["CleanedTransactions"]


class _OngoingAbort:
    __slots__ = ("txn", "met_data")

    def __init__(self, txn: AbortedTxn):
        self.txn = txn
        self.met_data = False


class CleanedTransactions:
    def __init__(self, aborted: list[AbortedTxn]):
        # Min-heap on first offset; each transaction once however many segments listed it.
        unique = {(t.producer_id, t.last_offset): t for t in aborted}
        self._pending = [(t.first_offset, t.last_offset, t.producer_id, t) for t in unique.values()]
        heapq.heapify(self._pending)
        self._aborting: dict[int, _OngoingAbort] = {}  # producer id -> its aborted txn under way
        self._committing: set[int] = set()  # producers whose (committed) txn had batches in this pass
        self.kept_aborted: list[AbortedTxn] = []  # index entries of the ABORT markers kept, to drain

    def _start_aborts_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0][0] <= offset:
            txn = heapq.heappop(self._pending)[3]
            self._aborting.setdefault(txn.producer_id, _OngoingAbort(txn))

    def on_batch(self, header: BatchHeader) -> bool:
        """A data batch: True if it belongs to an aborted transaction (its records go)."""
        self._start_aborts_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        ongoing = self._aborting.get(header.producer_id)
        if ongoing is not None:
            ongoing.met_data = True
            return True
        self._committing.add(header.producer_id)
        return False

    def on_marker(self, header: BatchHeader, commit: bool | None) -> bool:
        """A control batch (`commit`: True COMMIT, False ABORT, None another or an empty one):
        True if it is discardable (the cleaner removes it after its delete horizon)."""
        self._start_aborts_up_to(header.last_offset)
        if commit is None:
            return False
        pid = header.producer_id
        if commit:
            if pid in self._committing:
                self._committing.discard(pid)
                return False
            return True
        ongoing = self._aborting.pop(pid, None)
        if ongoing is not None and ongoing.met_data:
            self.kept_aborted.append(ongoing.txn)
            return False
        return True
