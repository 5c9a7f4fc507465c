"""TxnOffsetCommit (KIP-98/447): offsets a transactional producer commits for a group, which
become the group's committed offsets only when the transaction commits. A mixin of
GroupCoordinator.

The records go to `__consumer_offsets` as a transactional batch of the producer; the
transaction coordinator's COMMIT/ABORT marker on that partition then calls
`complete_transaction`. A plain OffsetCommit written after them supersedes them for its
partitions (the later record in the log wins, as in Kafka). A coordinator that loads the partition finds the transactions
with no marker yet (the driver hands them to `load_pending_transactions`).
"""
from __future__ import annotations

from typing import Hashable, Iterable

from broker.groups.group import ClassicGroup, GroupState, OffsetAndMetadata
from broker.groups.offset_ops import OffsetCommit
from broker.groups.records import OffsetRecordKey, decode_key, decode_offset_value
from broker.groups.results import CommitResult, Output, PartitionError
from broker.groups.timers import Now
from wire.error_codes import ErrorCode
from wire.errors import DecodeError

__all__ = ["TxnOffsetOps"]

E = ErrorCode
PendingOffsets = dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]]  # pid -> group -> offsets


class TxnOffsetOps:
    txn_offsets: PendingOffsets

    def txn_commit_offsets(self, token: Hashable, group_id: str, producer_id: int, producer_epoch: int,
                           offsets: Iterable[OffsetCommit], *, generation_id: int = -1, member_id: str = "",
                           group_instance_id: str | None = None, now: Now) -> Output:
        """TxnOffsetCommit; v3+ (KIP-447) names the consumer's generation and member, which must be
        current: a zombie of a rebalanced-away consumer cannot commit offsets it no longer owns."""
        out = Output()
        offsets = list(offsets)
        error = self.route_error(group_id)
        if error == E.NONE:
            if group_id not in self.groups:
                self.groups[group_id] = ClassicGroup(group_id, now.wall_ms)  # as a simple consumer's commit would
            error = _txn_commit_error(self.groups[group_id], generation_id, member_id, group_instance_id)
        if error != E.NONE:
            out.complete(token, CommitResult(tuple(PartitionError(t, p, error) for t, p, *_ in offsets)))
            return out
        results, accepted = self._accept_offsets(offsets, -1, now)

        def store(written: dict[tuple[str, int], OffsetAndMetadata]) -> None:
            self.txn_offsets.setdefault(producer_id, {}).setdefault(group_id, {}).update(written)

        return self._write_offsets(token, group_id, offsets, results, accepted, store, out, now,
                                   producer_id=producer_id, producer_epoch=producer_epoch)

    def pending_partitions(self, group_id: str) -> set[tuple[str, int]]:
        """The group's partitions with transactional offsets whose marker is not written yet."""
        return {key for groups in self.txn_offsets.values() for key in groups.get(group_id, ())}

    def supersede_pending(self, group_id: str, written) -> None:
        """A plain commit of these partitions is now later in the log than any pending
        transactional one: those can no longer take effect (Kafka keeps the later record)."""
        for producer_id in list(self.txn_offsets):
            pending = self.txn_offsets[producer_id].get(group_id)
            if pending:
                for key in written:
                    pending.pop(key, None)

    def complete_transaction(self, partition: int, producer_id: int, commit: bool) -> None:
        """The producer's marker on offsets partition `partition` is written: its offsets for the
        groups there take effect (commit) or are dropped (abort)."""
        groups = self.txn_offsets.get(producer_id)
        if not groups:
            return
        for group_id in sorted(groups):
            if self.partition_for(group_id) != partition:
                continue
            pending = groups.pop(group_id)
            group = self.groups.get(group_id)
            if commit and group is not None:
                group.offsets.update(pending)
        if not groups:
            del self.txn_offsets[producer_id]

    def load_pending_transactions(self, partition: int, records: dict[int, list[tuple[bytes, bytes | None]]],
                                  now: Now) -> None:
        """Transactional offset records with no marker yet, by producer id, found by a load."""
        for producer_id, pairs in records.items():
            for key_bytes, value_bytes in pairs:
                try:
                    key = decode_key(key_bytes)
                    if not isinstance(key, OffsetRecordKey) or value_bytes is None:
                        continue
                    v = decode_offset_value(value_bytes)
                except DecodeError:
                    continue
                if self.partition_for(key.group) != partition:
                    continue
                self.groups.setdefault(key.group, ClassicGroup(key.group, now.wall_ms))
                self.txn_offsets.setdefault(producer_id, {}).setdefault(key.group, {})[(key.topic, key.partition)] = \
                    OffsetAndMetadata(v.offset, v.leader_epoch, v.metadata, v.commit_timestamp, v.expire_timestamp)

    def drop_pending_transactions(self, partition: int) -> None:
        for producer_id in list(self.txn_offsets):
            groups = self.txn_offsets[producer_id]
            for group_id in [g for g in groups if self.partition_for(g) == partition]:
                del groups[group_id]
            if not groups:
                del self.txn_offsets[producer_id]


def _txn_commit_error(group: ClassicGroup, generation_id: int, member_id: str, instance_id: str | None) -> ErrorCode:
    """Kafka's validateOffsetCommit for a transactional commit: a commit naming no member
    (TxnOffsetCommit v0-2, or a producer outside any group) is taken whatever the group's state."""
    if group.state == GroupState.DEAD:
        return E.COORDINATOR_NOT_AVAILABLE
    if generation_id < 0 and not member_id and instance_id is None:
        return E.NONE
    if instance_id is not None:
        known = group.static_members.get(instance_id)
        if known is not None and known != member_id:
            return E.FENCED_INSTANCE_ID
    if member_id and member_id not in group.members:
        return E.UNKNOWN_MEMBER_ID
    if generation_id != group.generation:
        return E.ILLEGAL_GENERATION
    return E.NONE
