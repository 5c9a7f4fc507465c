"""Deliberate bugs in controller election and fencing, producer state, the group
coordinator, Raft (votes, commit rule, snapshots, log cleaning) and partition log
recovery, patched into the real node code.

Each is a function taking a monkeypatch (pytest's, or `pytest.MonkeyPatch()`
outside pytest); nothing here is a switch in node code. tests/simulations/catalogue.py
lists them with the rule each breaks.
"""
from __future__ import annotations

import broker.groups.loader
import metadata.controller.brokers
import metadata.controller.requests
import raft.core
import raft.election
import raft.leader
import storage.log.segment
import storage.raft_snapshots
from broker.group_driver import GroupDriver
from broker.groups import GroupCoordinator, PartitionStatus
from broker.groups.records import OffsetRecordKey
from broker.log_scan import iter_log_headers
from broker.producer_state import ProducerStateManager
from broker.producer_state_hooks import ProducerStates
from raft.node_storage import NodeStorage
from storage.log.log import PartitionLog
from tests.simulations.mutations import write_file_not_synced
from wire.error_codes import ErrorCode

# ---------------------------------------------------------------- controller election and broker fencing


def candidate_wins_without_majority(monkeypatch) -> None:
    """A candidate counts itself as a majority one vote early: two leaders can share an epoch."""
    monkeypatch.setattr(raft.election.VoteTally, "won",
                        lambda self: len(self.granted) >= raft.election.quorum_size(len(self.voters)) - 1)


def fencing_keeps_isr_and_leadership(monkeypatch) -> None:
    """Fencing (session expiry) and re-registration leave the broker in every ISR and leadership it held."""
    monkeypatch.setattr(metadata.controller.brokers, "remove_broker_from_isrs", lambda *a, **kw: [])


# ---------------------------------------------------------------- producer state


def producer_state_kept_across_truncation(monkeypatch) -> None:
    """A leader keeps the producer state it built before its log was truncated (as a follower), so a retry of a
    truncated batch is answered as a duplicate."""
    original = ProducerStates.state_for

    def state_for(self, partition):
        tracked = self._tracked.get(partition.key)
        plog = partition.log
        if tracked is None or tracked.log is not plog:
            return original(self, partition)
        if plog.log_end_offset > tracked.state.end_offset:
            tracked.state.rebuild(iter_log_headers(plog, tracked.state.end_offset))
        return tracked.state

    monkeypatch.setattr(ProducerStates, "state_for", state_for)


def producer_state_not_rebuilt_from_log(monkeypatch) -> None:
    """A new leader (or a restarted broker) builds producer state from the snapshot alone, not the log after it."""

    def rebuild(self, plog):
        self.rebuilds += 1
        state = ProducerStateManager(producer_id_expiration_ms=self.expiration_ms)
        snapshot = plog.latest_producer_snapshot()
        if snapshot is not None and snapshot[0] >= plog.log_start_offset:
            state.load_snapshot(*snapshot)
        state.end_offset = plog.log_end_offset
        return state

    monkeypatch.setattr(ProducerStates, "_rebuild", rebuild)


def producer_id_block_reused(monkeypatch) -> None:
    """The controller hands out producer-id blocks without recording them: every broker gets the same ids."""
    original = metadata.controller.requests.allocate_producer_ids

    def allocate(image, broker_id, broker_epoch):
        records, block = original(image, broker_id, broker_epoch)
        return [], block

    monkeypatch.setattr(metadata.controller.requests, "allocate_producer_ids", allocate)


# ---------------------------------------------------------------- group coordinator


def offset_commit_acked_before_replicated(monkeypatch) -> None:
    """An offset commit is answered once the coordinator appended it, before the HW passes it."""

    def complete_committed(self, index):
        entries = self._pending.get(index)
        while entries:
            entry = entries.pop(0)
            partition = self._leader_replica(index)
            self._fail(entry.append_id, ErrorCode.NOT_LEADER_OR_FOLLOWER if partition is None else ErrorCode.NONE)
        self._pending.pop(index, None)

    monkeypatch.setattr(GroupDriver, "_complete_committed", complete_committed)


def offset_load_keeps_first_commit(monkeypatch) -> None:
    """Loading __consumer_offsets keeps a partition's first committed offset instead of its last."""
    original = broker.groups.loader._apply

    def apply(key_bytes, value_bytes, offsets, metadata):
        key = broker.groups.loader.decode_key(key_bytes)
        if isinstance(key, OffsetRecordKey) and value_bytes is not None \
                and (key.topic, key.partition) in offsets.get(key.group, {}):
            return
        original(key_bytes, value_bytes, offsets, metadata)

    monkeypatch.setattr(broker.groups.loader, "_apply", apply)


def coordinator_serves_while_loading(monkeypatch) -> None:
    """A new coordinator answers for its groups before it has loaded them from __consumer_offsets."""

    def begin_loading(self, partition):
        self.partitions[partition] = PartitionStatus.ACTIVE

    monkeypatch.setattr(GroupCoordinator, "begin_loading", begin_loading)


# ---------------------------------------------------------------- Raft


def vote_ignores_log_up_to_date(monkeypatch) -> None:
    """A voter grants its vote whatever the candidate's log (Raft §5.4.1 dropped)."""
    monkeypatch.setattr(raft.core, "log_is_up_to_date", lambda *args, **kw: True)


def commit_entries_of_earlier_epoch(monkeypatch) -> None:
    """A new leader commits by counting replicas of entries from earlier epochs (Raft §5.4.2, Figure 8)."""

    original = raft.leader.next_high_watermark
    monkeypatch.setattr(raft.leader, "next_high_watermark",
                        lambda end_offsets, epoch_start_offset, current: original(end_offsets, -1, current))


def snapshot_written_without_fsync(monkeypatch) -> None:
    """A Raft snapshot file is renamed into place unsynced, and the log before it is then cleaned."""
    monkeypatch.setattr(storage.raft_snapshots, "write_file_atomic", write_file_not_synced)


def log_cleaning_deletes_latest_snapshot(monkeypatch) -> None:
    """Log cleaning removes the snapshot that covers the cleaned prefix along with the older ones."""
    original = NodeStorage.delete_before

    async def delete_before(self, offset):
        await original(self, offset)
        ids = [s for s in self.snapshots.ids() if s[0] <= offset]
        if ids:
            await self.snapshots.delete_older_than((ids[-1][0] + 1, 0))

    monkeypatch.setattr(NodeStorage, "delete_before", delete_before)


# ---------------------------------------------------------------- partition log recovery


def recovery_keeps_invalid_tail(monkeypatch) -> None:
    """Log recovery indexes the valid batches but leaves the invalid bytes after them in the segment."""
    original = storage.log.segment.scan_valid_batches

    def scan(file, start, end, on_batch):
        original(file, start, end, on_batch)
        return end

    monkeypatch.setattr(storage.log.segment, "scan_valid_batches", scan)


def high_watermark_not_bounded_by_log(monkeypatch) -> None:
    """A log takes any HW it is given (a checkpoint from before a power loss, say), even past its end."""

    def update_high_watermark(self, offset):
        self._high_watermark = max(offset, self._log_start_offset)
        return self._high_watermark

    monkeypatch.setattr(PartitionLog, "update_high_watermark", update_high_watermark)


STATE_MUTATIONS = {f.__name__: f for f in (
    candidate_wins_without_majority, fencing_keeps_isr_and_leadership,
    producer_state_kept_across_truncation, producer_state_not_rebuilt_from_log, producer_id_block_reused,
    offset_commit_acked_before_replicated, offset_load_keeps_first_commit, coordinator_serves_while_loading,
    vote_ignores_log_up_to_date, commit_entries_of_earlier_epoch, snapshot_written_without_fsync,
    log_cleaning_deletes_latest_snapshot,
    recovery_keeps_invalid_tail, high_watermark_not_bounded_by_log,
)}
