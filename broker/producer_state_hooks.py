"""The idempotent and transactional producer on the broker: InitProducerId ids and
per-partition state (dedupe, open and aborted transactions, the last stable offset).

    states = ProducerStates(broker)
    verdict = states.check(partition, header)      # on the leader, before the append
    ... partition.append_as_leader(...)            # no await in between
    states.record(partition, header, info, now_ms)
    await states.maybe_snapshot(partition)

The state of a partition (broker.producer_state.ProducerStateManager) is kept
in step with its log, whoever wrote it: batches appended as a follower (by the
replica fetcher) are replayed from the log the next time this broker leads and
checks a batch, and a log whose segments were truncated, cleaned or replaced
since (its `structure_version` moved) gets its state rebuilt from the newest
producer snapshot at or below its end plus the batches after it. So the state
survives restarts (recovery) and leader changes without the replication code
knowing about it. A snapshot is written next to the segments whenever the log
rolled a segment since the last one (Kafka snapshots on roll), which bounds
what a rebuild replays. A partition's state is brought up to its log end when a
batch is checked, a marker written (broker.txn_markers), or its last stable offset
or aborted transactions asked for (Partition.last_stable_offset, read_committed
fetches) on the leader, and before the log cleaner cleans any replica (`stable_offset`).

Aborted transactions go to the log's per-segment index (PartitionLog.append_aborted_txn)
as the state applies their ABORT markers; a replay writes only the missing ones. A
snapshot is saved only once the entries below it are durable, so a rebuild replays from
the newest snapshot at or below the first segment whose index was lost or damaged
(`txn_index_stale_from`), which writes that index again.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass

from broker.log_scan import iter_log_entries
from broker.producer_state import (
    DEFAULT_PRODUCER_ID_EXPIRATION_MS, ProducerCheck, ProducerIdAllocator, ProducerIdsUnavailable,
    ProducerStateManager,
)
from broker.controller_channel import ControllerUnavailableError
from storage.log import AppendInfo, LogError, PartitionLog
from wire.batch_header import BatchHeader
from wire.error_codes import ErrorCode
from wire.errors import DecodeError

__all__ = ["ProducerStates"]

log = logging.getLogger(__name__)

_EXPIRY_CHECK_INTERVAL_MS = 600_000  # producer.id.expiration.check.interval.ms


@dataclass(slots=True)
class _Tracked:
    state: ProducerStateManager
    log: PartitionLog
    structure_version: int
    last_expiry_check_ms: int = 0
    last_snapshot_segment: int = -1  # base offset of the active segment at the last snapshot


class ProducerStates:
    def __init__(self, broker):
        self.broker = broker
        self.expiration_ms = _static_int(broker.static, "producer.id.expiration.ms",
                                         DEFAULT_PRODUCER_ID_EXPIRATION_MS)
        self.allocator = ProducerIdAllocator(self._fetch_block)
        self._tracked: dict[tuple[str, int], _Tracked] = {}
        self.rebuilds = 0  # full rebuilds from snapshot + log (tests and metrics)

    # -- InitProducerId ---------------------------------------------------------------
    async def _fetch_block(self) -> tuple[int, int]:
        """AllocateProducerIds from the active controller, fenced by our broker epoch."""
        broker = self.broker
        reg = broker.metadata.image.brokers.get(broker.node_id)
        epoch = -1 if reg is None else reg.epoch
        try:
            error, first, size = await broker.controller.allocate_producer_ids(broker.node_id, epoch)
        except ControllerUnavailableError as exc:
            raise ProducerIdsUnavailable(str(exc)) from None
        if ErrorCode(error) != ErrorCode.NONE:
            raise ProducerIdsUnavailable(f"AllocateProducerIds answered {ErrorCode(error).name}")
        return first, size

    # -- dedupe state -------------------------------------------------------------------
    def state_for(self, partition) -> ProducerStateManager:
        """The partition's producer state, brought up to its log end."""
        plog: PartitionLog = partition.log
        key = partition.key
        tracked = self._tracked.get(key)
        if (tracked is None or tracked.log is not plog or tracked.structure_version != plog.structure_version
                or plog.log_end_offset < tracked.state.end_offset):
            # The first expiry pass comes an interval from now, not at once: a rebuilt entry's
            # timestamp is its batch's, possibly old, and the producer may be retrying right now.
            tracked = self._tracked[key] = _Tracked(self._rebuild(plog), plog, plog.structure_version,
                                                    last_expiry_check_ms=self.broker.env.wall_ms())
        elif plog.log_end_offset > tracked.state.end_offset:
            tracked.state.rebuild(iter_log_entries(plog, tracked.state.end_offset))
        _index_aborted(tracked.state, plog)
        return tracked.state

    def _rebuild(self, plog: PartitionLog) -> ProducerStateManager:
        self.rebuilds += 1
        state = ProducerStateManager(producer_id_expiration_ms=self.expiration_ms)
        stale_from = plog.txn_index_stale_from
        snapshot = plog.latest_producer_snapshot(up_to=stale_from)
        if snapshot is not None and snapshot[0] >= plog.log_start_offset:
            try:
                state.load_snapshot(*snapshot)
            except DecodeError as exc:
                log.warning("ignoring unreadable producer snapshot %d of %s: %s", snapshot[0], plog, exc)
                state = ProducerStateManager(producer_id_expiration_ms=self.expiration_ms)
        state.rebuild(iter_log_entries(plog, state.end_offset))
        state.end_offset = plog.log_end_offset
        _index_aborted(state, plog)
        if stale_from is not None:
            plog.txn_indexes_rebuilt()
        return state

    def check(self, partition, header: BatchHeader, now_ms: int) -> ProducerCheck:
        if header.producer_id < 0:
            return ProducerCheck()  # not idempotent: nothing to look up
        state = self.state_for(partition)
        tracked = self._tracked[partition.key]
        if now_ms - tracked.last_expiry_check_ms >= _EXPIRY_CHECK_INTERVAL_MS:
            tracked.last_expiry_check_ms = now_ms
            state.remove_expired(now_ms)
        return state.check(header)

    def check_marker(self, partition, header: BatchHeader, coordinator_epoch: int) -> ProducerCheck:
        return self.state_for(partition).check_marker(header, coordinator_epoch)

    def first_unstable_offset(self, partition) -> int | None:
        """Where the partition's open (or not yet replicated) transactions begin, if any."""
        return self.state_for(partition).first_unstable_offset(partition.log.high_watermark)

    def aborted_transactions(self, partition, start: int, end: int):
        self.state_for(partition)  # indexes any ABORT marker not yet indexed
        return partition.log.collect_aborted_txns(start, end)

    def stable_offset(self, partition) -> int:
        """The partition's last stable offset, leader or follower, with its aborted transactions
        indexed up to its log end (what the log cleaner may clean below)."""
        first = self.first_unstable_offset(partition)
        hw = partition.log.high_watermark
        return hw if first is None else min(hw, first)

    def record(self, partition, header: BatchHeader, info: AppendInfo, now_ms: int,
               commit: bool | None = None, coordinator_epoch: int = -1) -> None:
        """The batch `check` accepted now sits at `info.first_offset` (`commit`, `coordinator_epoch`:
        a transaction marker's)."""
        tracked = self._tracked.get(partition.key)
        if tracked is None or tracked.log is not partition.log:
            if header.producer_id < 0:
                return  # never looked at an idempotent batch here: the next check replays the log
            self.state_for(partition)
            return  # state_for replayed the log, which now holds this batch
        if tracked.state.end_offset != info.first_offset:
            self.state_for(partition)  # something else appended in between: replay instead
            return
        tracked.state.apply(header, info.first_offset, now_ms, commit, coordinator_epoch)
        _index_aborted(tracked.state, partition.log)

    async def maybe_snapshot(self, partition) -> None:
        """Save the state next to the segments if the log rolled since the last snapshot."""
        tracked = self._tracked.get(partition.key)
        if tracked is None or tracked.log is not partition.log:
            return
        active_base = tracked.log.active_segment.base_offset
        if active_base == tracked.last_snapshot_segment or tracked.state.end_offset != tracked.log.log_end_offset:
            return
        tracked.last_snapshot_segment = active_base
        offset, blob = tracked.state.end_offset, tracked.state.to_bytes()
        try:
            await tracked.log.save_producer_snapshot(offset, blob)
        except (LogError, OSError) as exc:
            log.warning("cannot save producer snapshot of %s at %d: %s", tracked.log, offset, exc)

    def forget(self, key: tuple[str, int]) -> None:
        self._tracked.pop(key, None)


def _index_aborted(state: ProducerStateManager, plog: PartitionLog) -> None:
    for txn in state.newly_aborted:
        plog.append_aborted_txn(txn)
    state.newly_aborted.clear()


def _static_int(static, name: str, default: int) -> int:
    raw = static.get(name)
    if raw is None:
        return default
    try:
        return int(str(raw).strip(), 10)
    except ValueError:
        raise ValueError(f"{name}: {raw!r} is not an integer") from None
