"""Committed records survive leader changes: a check at every election, not only at the end.

Kafka's promise is about the high watermark, not only about acknowledged writes: a record
below a leader's HW is committed (with min.insync.replicas=2 and eligible leader replicas,
every replica that may lead next holds it), and no later leader may lack it or hold another
batch in its place. The data checker sees a broken promise only when a client happened to
ack or read the record and the final read shows the loss; this checker sees it the moment a
leader without it is elected, and also for records no client ever looked at.

Polled with the other checks (`observe`): every batch below a leader's HW is remembered by
(base offset, last offset, CRC-32C) with the leader epoch it was seen committed in; each time
a broker is first seen leading a partition in a leader epoch, its log must hold every
remembered batch of that partition committed in an earlier epoch, byte-for-byte by CRC. (A
broker whose metadata lags may take up an older epoch's leadership after a newer epoch
committed more: that leadership owes nothing to the newer epoch.) Partitions are keyed by
topic id (a deleted and re-created topic is another one); compacted topics are left out (the
cleaner may legitimately remove batches).
"""
from __future__ import annotations

from broker.log_scan import iter_log_headers
from simulations.checkers.raft import RaftChecker
from storage.log import LogError
from wire.errors import CorruptRecordError

__all__ = ["CommittedRecordsChecker"]


class CommittedRecordsChecker:
    def __init__(self, report: RaftChecker):
        self.report = report
        # key -> base -> (last offset, crc, leader epoch it was seen committed in)
        self.batches: dict[tuple, dict[int, tuple[int, int, int]]] = {}
        self.committed_end: dict[tuple, int] = {}
        self.committed_by: dict[tuple, str] = {}  # key -> who exposed the committed end (for the message)
        self._leaders_seen: set[tuple] = set()
        self.elections_checked = 0

    def observe(self, node_id: int, incarnation: int, kafka) -> None:
        for (topic, index), p in sorted(kafka.replicas.partitions.items()):
            if not p.is_leader or p.log.closed or p.log.config.compact:
                continue
            key = (p.topic_id, index)
            term = (key, p.leader_epoch, node_id, incarnation)
            if term not in self._leaders_seen:
                self._leaders_seen.add(term)
                self._check_new_leader(node_id, topic, index, key, p)
            self._remember(node_id, topic, index, key, p)

    def _remember(self, node_id, topic, index, key, p) -> None:
        end = self.committed_end.get(key, 0)
        hw = p.high_watermark
        if hw <= end:
            return
        known = self.batches.setdefault(key, {})
        try:
            for header in iter_log_headers(p.log, end, hw):
                if header.next_offset > hw:
                    break  # a batch is committed only whole
                known[header.base_offset] = (header.last_offset, header.crc, p.leader_epoch)
                end = header.next_offset
        except (CorruptRecordError, LogError):
            return  # bit rot under a node about to die: its restart cuts it
        self.committed_end[key] = end
        self.committed_by[key] = f"n{node_id} epoch {p.leader_epoch}"

    def _check_new_leader(self, node_id, topic, index, key, p) -> None:
        owed = {base: (last, crc) for base, (last, crc, epoch) in self.batches.get(key, {}).items()
                if epoch < p.leader_epoch}
        if not owed:
            return
        self.elections_checked += 1
        where = f"{topic}-{index}: n{node_id}, leader in epoch {p.leader_epoch}"
        end = max(last for last, _ in owed.values()) + 1
        if p.log.log_end_offset < end:
            self._violate(f"{where}, ends at {p.log.log_end_offset}, before the end {end} of what earlier "
                          f"epochs committed (last seen by {self.committed_by[key]})")
            return
        try:
            found = {h.base_offset: (h.last_offset, h.crc) for h in iter_log_headers(p.log, 0, end)}
        except (CorruptRecordError, LogError):
            return
        for base, batch in sorted(owed.items()):
            if base >= p.log.log_start_offset and found.get(base) != batch:
                self._violate(f"{where}, holds {found.get(base)} at {base}, where the committed batch "
                              f"(last offset, crc) {batch} was (last seen by {self.committed_by[key]})")
                return

    def _violate(self, message: str) -> None:
        self.report.violate("committed-record-lost", message)
