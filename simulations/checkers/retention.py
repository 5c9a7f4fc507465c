"""What a partition log may lose: retention, DeleteRecords and compaction, checked.

Polled with the other checks (`observe`), on every partition log of every live broker, from
the moment its log manager opened it (Kafka's UnifiedLog keeps the same order):
- log-bounds: log start offset <= high watermark <= log end offset. A HW past the log end (a
  checkpoint from before a power loss taken as is, say) lets a leader answer offsets it does
  not hold; a log start past the HW means records nobody committed were deleted. Every
  leader-epoch cache entry starts at or below the log end: an entry left past it by a
  truncation makes the replica misstate where that epoch ended (OffsetForLeaderEpoch) and ask
  about an epoch its log does not hold.

At the end, over the History of the retention workload (simulations.workloads.retention), its
final reads and the replicas at quiescence:
- retention-beyond-config: when every replica of the retained topic has its log start past
  every DeleteRecords target, one of them holds at least retention.bytes (Kafka deletes a
  segment only while the log stays at least that large without it: smaller logs everywhere lost
  records the config keeps), less the most bytes a replica was seen to lose to one truncation
  (the size retention kept counted an uncommitted tail);
- lost-write / inconsistent-offsets: an acknowledged send at or above the final log start
  is in the final read, at its offset, with its value;
- compaction-lost-latest: an acknowledged send of the compacted topic missing from the final
  read has a later record of its key there (compaction keeps the latest value of each key).
"""
from __future__ import annotations

from simulations.checkers.raft import RaftChecker
from simulations.history import History
from simulations.workloads.retention import COMPACTED, RETAINED, RETENTION_BYTES, key_of

__all__ = ["RetentionChecker"]


class RetentionChecker:
    def __init__(self, report: RaftChecker):
        self.report = report
        self._reported: set[tuple] = set()  # one log-bounds violation per replica log and kind
        self._retained: dict[int, tuple[int, int]] = {}  # broker -> (log end, bytes) of the retained log
        self.truncated_bytes = 0  # the most bytes a retained replica lost at once to a truncation

    def observe(self, node_id: int, kafka) -> None:
        for (topic, index), log in kafka.log_manager.all_logs():
            if log.closed:
                continue
            start, hw, end = log.log_start_offset, log.high_watermark, log.log_end_offset
            if hw > end:
                self._bounds(node_id, topic, index, log, "hw", f"HW {hw} past the log end {end}")
            if start > hw:
                self._bounds(node_id, topic, index, log, "start", f"log start {start} past the HW {hw}")
            if topic == RETAINED:
                self._watch_truncation(node_id, end, log.size_in_bytes)
            latest = log.epoch_cache.entries()[-1:]
            if latest and latest[0][1] > end:
                epoch, epoch_start = latest[0]
                self._bounds(node_id, topic, index, log, "epoch",
                             f"leader epoch {epoch} starts at {epoch_start}, past the log end {end}")

    def _watch_truncation(self, node_id: int, end: int, size: int) -> None:
        """Retention keeps retention.bytes of the log as it is, uncommitted tail included; a
        truncation (a follower dropping a dead leader's tail, a power loss) may then take the log
        below it, as in Kafka."""
        before = self._retained.get(node_id)
        self._retained[node_id] = (end, size)
        if before is not None and end < before[0]:
            self.truncated_bytes = max(self.truncated_bytes, before[1] - size)

    def _bounds(self, node_id, topic, index, log, kind, what) -> None:
        key = (node_id, id(log), kind)
        if key not in self._reported:
            self._reported.add(key)
            self.report.violate("log-bounds", f"{topic}-{index} on n{node_id}: {what}")

    def check(self, history: History, final: dict[str, dict[int, bytes]], replicas: dict[int, tuple]) -> None:
        """replicas: broker -> (log start, size in bytes) of its replica of the retained topic."""
        targets = [op.value for op in history.of("delete_records")]
        floor = max(targets, default=0)
        # Per partition, not per replica: a follower started again at its leader's log start holds
        # only the bytes from there, while the leader keeps the whole segment holding that start.
        trimmed = {b: (start, size) for b, (start, size) in replicas.items() if start > floor}
        least = RETENTION_BYTES - self.truncated_bytes
        if trimmed and len(trimmed) == len(replicas) and max(size for _, size in trimmed.values()) < least:
            self.report.violate("retention-beyond-config",
                                f"{RETAINED}-0: every replica's log start is past what DeleteRecords asked (at most "
                                f"{floor}) and holds less than retention.bytes {RETENTION_BYTES} (less "
                                f"{self.truncated_bytes} truncated at most): "
                                f"{dict(sorted(trimmed.items()))} (log start, bytes)")
        starts = {op.topic: op.value for op in history.of("log_final_read", "ok")}
        for op in history.of("log_send", "ok"):
            records = final.get(op.topic)
            if records is None or op.result < starts.get(op.topic, 0):
                continue
            found = records.get(op.result)
            if found == op.value:
                continue
            if found is not None:
                self.report.violate("inconsistent-offsets", f"{op.topic}-0@{op.result}: acknowledged "
                                    f"{op.value!r}, final read {found!r}")
            elif op.topic == COMPACTED:
                key = key_of(op.value)
                if not any(o > op.result and key_of(v) == key for o, v in records.items()):
                    self.report.violate("compaction-lost-latest", f"{op.topic}-0@{op.result}: acknowledged "
                                        f"{op.value!r} is gone and no later record of key {key!r} is left")
            else:
                self.report.violate("lost-write", f"{op.value!r} acknowledged at {op.topic}-0@{op.result}, at or "
                                    f"above the final log start {starts.get(op.topic)}, is not in the final read")
