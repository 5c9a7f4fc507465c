"""Transactional checker (Jepsen's G1a/G1b/G1c for Kafka) over the history of
simulations.workloads.transactions and its final reads.

- G1a aborted-read: a read_committed reader (a poll or the final read) sees a record of a
  transaction that was aborted (op "txn" fail).
- G1b intermediate-read: a read_committed poll returns a record of a transaction before
  that transaction was asked to commit (the records beyond the last stable offset), or a
  record that is not the one the final read_committed read holds at that offset.
- lost-committed-write: a committed transaction's records are not all in the final
  read_committed read; non-atomic-transaction: some but not all of a transaction's
  records are there (an unknown outcome may commit, but whole).
- duplicate-committed-write / phantom-committed-write: a record twice, or one no
  transaction wrote.
- committed-write-order: one producer's records of a partition are out of the order it
  sent them in (transaction by transaction, record by record).
- uncommitted-read-mismatch: a read_uncommitted poll's record differs from the final
  read_uncommitted read at its offset.
- txn-offsets: the group's committed offset of each producer's input partition is the
  number of its last committed transaction (offsets apply if and only if the transaction
  committed).
"""
from __future__ import annotations

from simulations.checkers.raft import RaftChecker
from simulations.history import History
from simulations.workloads.transactions import PRODUCERS

__all__ = ["TransactionChecker"]


class TransactionChecker:
    def __init__(self, report: RaftChecker, history: History):
        self.report = report
        self.history = history
        self.txn_of: dict[bytes, object] = {}  # value -> its "txn" op
        for op in history.of("txn"):
            for _, value in op.value["values"]:
                self.txn_of[value] = op

    def violate(self, invariant: str, message: str) -> None:
        self.report.violate(invariant, message)

    def check(self) -> None:
        finals = {op.value: op.result for op in self.history.of("txn_final", "ok")}
        committed = finals.get("read_committed")
        if committed is None:
            return  # the liveness check reports the missing final read
        at = {(p, o): v for p, records in committed.items() for o, v in records}
        self._polls(at, finals.get("read_uncommitted"))
        present = self._final_read(committed)
        self._offsets(present)

    def _polls(self, at: dict, uncommitted) -> None:
        uncommitted_at = {(p, o): v for p, records in (uncommitted or {}).items() for o, v in records}
        for op in self.history.of("txn_poll", "ok"):
            for p, o, v in op.result:
                where = f"{op.process} op {op.index}: partition {p} offset {o} {v!r}"
                if op.value == "read_uncommitted":
                    if uncommitted is not None and uncommitted_at.get((p, o), v) != v:
                        self.violate("uncommitted-read-mismatch", f"{where}; final read has {uncommitted_at[(p, o)]!r}")
                    continue
                txn = self.txn_of.get(v)
                if txn is not None and txn.type == "fail":
                    self.violate("G1a", f"{where} of aborted transaction op {txn.index}")
                elif txn is not None and op.completed_at < txn.value.get("commit_at", float("inf")):
                    self.violate("G1b", f"{where} read before its transaction (op {txn.index}) was committed")
                elif at.get((p, o)) != v:
                    self.violate("G1b", f"{where}; the final read_committed read has {at.get((p, o))!r}")

    def _final_read(self, committed: dict) -> dict:
        """Checks the final read_committed read; returns txn op -> its values found there."""
        present: dict = {}
        last: dict = {}  # (partition, producer) -> (n, j, offset) of its previous record
        for p, records in sorted(committed.items()):
            for o, v in records:
                txn = self.txn_of.get(v)
                if txn is None:
                    self.violate("phantom-committed-write", f"partition {p} offset {o}: {v!r} was never sent")
                    continue
                if txn.type == "fail":
                    self.violate("G1a", f"final read, partition {p} offset {o}: {v!r} of aborted transaction "
                                        f"op {txn.index}")
                found = present.setdefault(txn.index, [])
                if v in found:
                    self.violate("duplicate-committed-write", f"partition {p} offset {o}: {v!r} again")
                found.append(v)
                if txn.value["n"] == 0:
                    continue  # the converge phase's settling transaction comes last, n or not
                position = (txn.value["n"], txn.value["values"].index((p, v)))
                previous = last.get((p, txn.process))
                if previous is not None and previous[:2] > position:
                    self.violate("committed-write-order", f"partition {p}: {v!r} at offset {o} after a later "
                                                          f"record of {txn.process} at offset {previous[2]}")
                last[(p, txn.process)] = (*position, o)
        for op in self.history.of("txn"):
            found = len(set(present.get(op.index, ())))
            expected = len(op.value["values"])
            if op.type == "ok" and found < expected:
                self.violate("lost-committed-write", f"{op.process} transaction op {op.index}: {found} of "
                                                     f"{expected} committed records in the final read")
            elif 0 < found < expected:
                self.violate("non-atomic-transaction", f"{op.process} transaction op {op.index} ({op.type}): "
                                                       f"{found} of {expected} records in the final read")
        return present

    def _offsets(self, present: dict) -> None:
        offsets = [op.result for op in self.history.of("txn_offsets", "ok")]
        if not offsets:
            return
        for i in range(PRODUCERS):
            name = f"txn-producer{i}"
            numbers = [op.value["n"] for op in self.history.of("txn")
                       if op.process == name and op.value["n"] > 0 and op.index in present]
            expected = max(numbers, default=None)
            if offsets[-1].get(i) != expected:
                self.violate("txn-offsets", f"{name}: group offset {offsets[-1].get(i)}, but its last committed "
                                            f"transaction is number {expected}")
