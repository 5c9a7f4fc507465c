"""OffsetCommit, OffsetFetch, OffsetDelete and offset expiry. A mixin of GroupCoordinator.

A commit becomes visible to OffsetFetch only once its record is committed in
`__consumer_offsets` (the driver's `append_done`), so a fetch never returns
an offset a coordinator failover could forget.
"""
from __future__ import annotations

from typing import Callable, Hashable, Iterable

from broker.groups.append_errors import commit_error
from broker.groups.group import CONSUMER_PROTOCOL_TYPE, ClassicGroup, GroupState, OffsetAndMetadata
from broker.groups.records import OffsetCommitValue, group_metadata_record, offset_commit_record
from broker.groups.results import (
    CommitResult, DeleteOffsetsResult, FetchedOffset, FetchOffsetsResult, Output, PartitionError,
)
from broker.groups.timers import Now
from wire.error_codes import ErrorCode

__all__ = ["OffsetOps", "OffsetCommit", "offset_records"]

S = GroupState
E = ErrorCode
_INT64_MAX = (1 << 63) - 1
OffsetCommit = tuple[str, int, int, int, str | None]  # topic, partition, offset, leader_epoch, metadata


class OffsetOps:
    # ------------------------------------------------------------------ OffsetCommit

    def commit_offsets(self, token: Hashable, group_id: str, offsets: Iterable[OffsetCommit], *,
                       generation_id: int = -1, member_id: str = "", group_instance_id: str | None = None,
                       retention_ms: int = -1, now: Now) -> Output:
        """OffsetCommit. Generation -1 with no member id is a simple (standalone) consumer's commit."""
        out = Output()
        offsets = list(offsets)
        group = self.groups.get(group_id)
        error = self.route_error(group_id, allow_empty_id=True)
        if error == E.NONE:
            error = self._commit_error(group, generation_id, member_id, group_instance_id)
        if error != E.NONE:
            out.complete(token, CommitResult(tuple(PartitionError(t, p, error) for t, p, *_ in offsets)))
            return out
        if group is None:
            group = self.groups[group_id] = ClassicGroup(group_id, now.wall_ms)  # a simple consumer's group
        elif member_id in group.members:
            self._schedule_heartbeat(group, group.members[member_id], now)
        results, accepted = self._accept_offsets(offsets, retention_ms, now)

        def store(written: dict[tuple[str, int], OffsetAndMetadata]) -> None:
            if self.groups.get(group_id) is group:
                group.offsets.update(written)
                self.supersede_pending(group_id, written)

        return self._write_offsets(token, group_id, offsets, results, accepted, store, out, now)

    def _write_offsets(self, token: Hashable, group_id: str, offsets: list[OffsetCommit],
                       results: dict[tuple[str, int], ErrorCode], accepted: dict[tuple[str, int], OffsetAndMetadata],
                       store: Callable[[dict], None], out: Output, now: Now, **producer: int) -> Output:
        """Append the accepted offsets (as the producer's transactional batch when `producer`
        names one); answer `token` once they are written, after `store(accepted)`."""

        def answer(error: ErrorCode, out: Output, now: Now) -> None:
            mapped = commit_error(error)
            if mapped == E.NONE:
                store(accepted)
            for key in accepted:
                results[key] = mapped
            out.complete(token, CommitResult(tuple(PartitionError(t, p, results[(t, p)]) for t, p, *_ in offsets)))

        if not accepted:
            answer(E.NONE, out, now)
            return out
        self._append(self.partition_for(group_id), offset_records(group_id, accepted), answer, out, **producer)
        return out

    def _accept_offsets(self, offsets: list[OffsetCommit], retention_ms: int, now: Now
                        ) -> tuple[dict[tuple[str, int], ErrorCode], dict[tuple[str, int], OffsetAndMetadata]]:
        """(error per partition, the offsets to write): metadata over offset.metadata.max.bytes is refused."""
        results: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], OffsetAndMetadata] = {}
        for topic, partition, offset, leader_epoch, metadata in offsets:
            metadata = metadata or ""
            if len(metadata.encode()) > self.config.offset_metadata_max_bytes:
                results[(topic, partition)] = E.OFFSET_METADATA_TOO_LARGE
                continue
            # An int64 on disk: a retention near the maximum means "never" rather than an overflow.
            expire = min(now.wall_ms + retention_ms, _INT64_MAX) if retention_ms >= 0 else -1
            accepted[(topic, partition)] = OffsetAndMetadata(offset, leader_epoch, metadata, now.wall_ms, expire)
            results[(topic, partition)] = E.NONE
        return results, accepted

    @staticmethod
    def _commit_error(group: ClassicGroup | None, generation_id: int, member_id: str,
                      instance_id: str | None) -> ErrorCode:
        """Kafka's validateOffsetCommit, then the state check of a classic group's commit."""
        if group is None:
            return E.NONE if generation_id < 0 else E.ILLEGAL_GENERATION
        if group.state == S.DEAD:
            return E.COORDINATOR_NOT_AVAILABLE
        if generation_id < 0 and group.state == S.EMPTY:
            return E.NONE  # simple consumer (or admin) commit to a group nobody is in
        if generation_id >= 0 or member_id or instance_id is not None:
            error = group.validate_member(member_id, instance_id)  # a fenced static member: FENCED_INSTANCE_ID
            if error != E.NONE:
                return error
            if generation_id != group.generation:
                return E.ILLEGAL_GENERATION
        elif group.state != S.EMPTY:
            return E.UNKNOWN_MEMBER_ID  # anonymous commits only while nobody is in the group
        if group.state == S.COMPLETING_REBALANCE:
            return E.REBALANCE_IN_PROGRESS  # the member has its new generation but no assignment yet
        return E.NONE

    # ------------------------------------------------------------------ OffsetFetch

    def fetch_offsets(self, group_id: str, partitions: Iterable[tuple[str, Iterable[int]]] | None, *,
                      now: Now, require_stable: bool = False) -> FetchOffsetsResult:
        """OffsetFetch; `partitions=None` asks for every committed offset of the group. With
        `require_stable` (v7+), a partition with transactional offsets awaiting their
        transaction's marker answers UNSTABLE_OFFSET_COMMIT (the client retries), as Kafka."""
        error = self.route_error(group_id, allow_empty_id=True)
        if error != E.NONE:
            return FetchOffsetsResult(error)
        group = self.groups.get(group_id)
        committed = group.offsets if group is not None else {}
        if partitions is None:
            keys = sorted(committed)
        else:
            keys = [(topic, p) for topic, ps in partitions for p in ps]
        unstable = self.pending_partitions(group_id) if require_stable else set()
        fetched = []
        for topic, partition in keys:
            o = committed.get((topic, partition))
            if (topic, partition) in unstable:
                fetched.append(FetchedOffset(topic, partition, error=E.UNSTABLE_OFFSET_COMMIT))
            else:
                fetched.append(FetchedOffset(topic, partition) if o is None else
                               FetchedOffset(topic, partition, o.offset, o.leader_epoch, o.metadata))
        return FetchOffsetsResult(E.NONE, tuple(fetched))

    # ------------------------------------------------------------------ OffsetDelete

    def delete_offsets(self, token: Hashable, group_id: str, partitions: Iterable[tuple[str, Iterable[int]]], *,
                       now: Now) -> Output:
        out = Output()
        requested = [(topic, p) for topic, ps in partitions for p in ps]
        group = self.groups.get(group_id)
        error = self.route_error(group_id)
        if error == E.NONE and (group is None or group.state == S.DEAD):
            error = E.GROUP_ID_NOT_FOUND
        if error == E.NONE and group.state != S.EMPTY and group.protocol_type != CONSUMER_PROTOCOL_TYPE:
            error = E.NON_EMPTY_GROUP
        if error != E.NONE:
            out.complete(token, DeleteOffsetsResult(error))
            return out
        subscribed = (group.subscribed_topics() or set()) if group.state != S.EMPTY else set()
        results = {k: (E.GROUP_SUBSCRIBED_TO_TOPIC if k[0] in subscribed else E.NONE) for k in requested}
        removed = [k for k in dict.fromkeys(requested) if results[k] == E.NONE and k in group.offsets]
        for key in removed:
            del group.offsets[key]

        def answer(error: ErrorCode, out: Output, now: Now) -> None:
            # The cache already forgot them; a failed tombstone only means the log still has them.
            top = commit_error(error)
            out.complete(token, DeleteOffsetsResult(top, tuple(PartitionError(t, p, results[(t, p)])
                                                               for t, p in requested)))

        if removed:
            records = [offset_commit_record(group_id, t, p, None) for t, p in removed]
            self._append(self.partition_for(group_id), records, answer, out)
        else:
            answer(E.NONE, out, now)
        return out

    # ------------------------------------------------------------------ expiry

    def expire_offsets(self, out: Output, now: Now) -> None:
        """Drop offsets past offsets.retention.minutes; an empty group left with none is deleted."""
        by_partition: dict[int, list] = {}
        for group_id in sorted(self.groups):
            group = self.groups[group_id]
            partition = self.partition_for(group_id)
            if self.route_error(group_id, allow_empty_id=True) != E.NONE or group.state == S.DEAD:
                continue
            records = by_partition.setdefault(partition, [])
            for topic, p in self._expired_offsets(group, now.wall_ms):
                del group.offsets[(topic, p)]
                records.append(offset_commit_record(group_id, topic, p, None))
            if group.state == S.EMPTY and not group.offsets and not group.pending_members:
                group.transition(S.DEAD, now.wall_ms)
                del self.groups[group_id]
                if group.generation > 0:  # only a group that was ever stored has a record to delete
                    records.append(group_metadata_record(group_id, None))
        for partition in sorted(by_partition):
            if by_partition[partition]:
                self._append(partition, by_partition[partition], lambda error, out, now: None, out)

    def _expired_offsets(self, group: ClassicGroup, wall_ms: int) -> list[tuple[str, int]]:
        """By commit (or emptied-group) timestamps: the wall clock, as Kafka."""
        retention = self.config.offsets_retention_ms
        keep_topics: set[str] = set()
        if group.protocol_type and group.state == S.EMPTY:
            base = lambda o: group.state_timestamp  # counted from when the group became empty
        elif group.protocol_type == CONSUMER_PROTOCOL_TYPE and group.state == S.STABLE:
            topics = group.subscribed_topics()
            if topics is None:
                return []
            keep_topics = topics  # offsets of topics still consumed never expire
            base = lambda o: o.commit_timestamp
        elif not group.protocol_type:
            base = lambda o: o.commit_timestamp  # simple consumers: each offset on its own
        else:
            return []
        expired = []
        for key in sorted(group.offsets):
            o = group.offsets[key]
            if key[0] in keep_topics:
                continue
            if (wall_ms >= o.expire_timestamp) if o.expire_timestamp >= 0 else (wall_ms - base(o) >= retention):
                expired.append(key)
        return expired


def offset_records(group_id: str, accepted: dict[tuple[str, int], OffsetAndMetadata]) -> list:
    return [offset_commit_record(group_id, t, p, OffsetCommitValue(
        offset=o.offset, leader_epoch=o.leader_epoch, metadata=o.metadata,
        commit_timestamp=o.commit_timestamp, expire_timestamp=o.expire_timestamp)) for (t, p), o in accepted.items()]
