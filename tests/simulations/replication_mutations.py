"""Deliberate replication bugs patched into the real broker and controller code.

ISR membership, the high watermark, min.insync.replicas, leader-epoch fencing
(KIP-320), truncation, and the ELR/unclean election rules (KIP-966). Each is a
function taking a monkeypatch (pytest's, or `pytest.MonkeyPatch()` outside
pytest); nothing here is a switch in node code. tests/simulations/catalogue.py
lists them with the rule each breaks.
"""
from __future__ import annotations

import dataclasses

import broker.delayed_produce
import broker.coordinator_driver
import broker.handlers.fetch
import broker.handlers.produce
import broker.partition
import broker.replica_fetcher
import broker.replica_manager
import broker.txn_markers
import metadata.controller.alter_partition as ap
import metadata.controller.brokers
import metadata.controller.election
from broker.isr import IsrState
from broker.partition import Partition
from broker.replica_fetcher import ReplicaFetcher
from metadata.records import NO_LEADER, NO_LEADER_CHANGE
from storage.log.epoch_cache import LeaderEpochCache

# ---------------------------------------------------------------- ISR membership


def isr_join_below_high_watermark(monkeypatch) -> None:
    """A follower may join the ISR once it reaches the leader epoch's start, even below the HW."""
    monkeypatch.setattr(broker.partition, "may_join_isr",
                        lambda state, hw, epoch_start: state.log_end_offset >= epoch_start)


def isr_join_before_leader_epoch_start(monkeypatch) -> None:
    """A follower may join the ISR at the HW, though it lacks the records of the leader's epoch."""
    monkeypatch.setattr(broker.partition, "may_join_isr", lambda state, hw, epoch_start: state.log_end_offset >= hw)


def pending_shrink_counts_as_committed(monkeypatch) -> None:
    """While a shrink waits for the controller, the leaving members already stop counting for the HW."""
    original = IsrState.maximal_isr.fget

    def maximal_isr(self):
        if self.removing:
            return tuple(r for r in self.isr if r not in self.removing)
        return original(self)

    monkeypatch.setattr(IsrState, "maximal_isr", property(maximal_isr))


def pending_expand_not_counted_for_hw(monkeypatch) -> None:
    """A member whose addition is in flight does not hold back the HW (Kafka's maximal ISR ignored)."""
    monkeypatch.setattr(IsrState, "maximal_isr", property(lambda self: self.isr))


def controller_accepts_stale_isr_change(monkeypatch) -> None:
    """The controller applies an AlterPartition built on an older partition epoch (a stale ISR)."""
    original = ap._alter_one

    def alter_one(image, broker_id, item, static):
        part = image.partition(item.topic_id, item.partition_id)
        if part is not None and item.leader_epoch == part.leader_epoch:
            item = dataclasses.replace(item, partition_epoch=part.partition_epoch)
        return original(image, broker_id, item, static)

    monkeypatch.setattr(ap, "_alter_one", alter_one)


# ---------------------------------------------------------------- high watermark


def new_leader_trusts_follower_ends(monkeypatch) -> None:
    """A new leader takes every follower to be at its own log end, so the HW jumps at election."""
    original = Partition._set_role

    def set_role(self, registration, previous):
        original(self, registration, previous)
        if self.is_leader:
            for state in self.followers.values():
                if state.log_end_offset < 0:
                    state.log_end_offset = self.log.log_end_offset
            self.maybe_advance_high_watermark()

    monkeypatch.setattr(Partition, "_set_role", set_role)


def follower_hw_is_own_log_end(monkeypatch) -> None:
    """A follower takes its own log end as its HW, not the leader's: as a new leader it serves uncommitted records."""

    def update_follower_high_watermark(self, leader_hw):
        self.log.update_high_watermark(max(self.log.high_watermark, self.log.log_end_offset))

    monkeypatch.setattr(Partition, "update_follower_high_watermark", update_follower_high_watermark)


# ---------------------------------------------------------------- min.insync.replicas and acks=all


def broker_reads_min_isr_as_one(monkeypatch) -> None:
    """The broker resolves every topic's min.insync.replicas to 1 (produce check, acks=all and the HW gate)."""
    for module in (broker.handlers.produce, broker.replica_manager, broker.coordinator_driver, broker.txn_markers):
        original = module.effective_topic_value

        def value(image, topic, name, static=None, _original=original):
            return 1 if name == "min.insync.replicas" else _original(image, topic, name, static)

        monkeypatch.setattr(module, "effective_topic_value", value)


def acks_all_waits_for_one_less(monkeypatch) -> None:
    """acks=all completes once the HW reaches the batch's last offset instead of passing it."""

    def status(pending, current):
        p = pending.partition
        if current is not p or not p.is_leader or p.leader_epoch != pending.leader_epoch:
            return True, broker.delayed_produce.ErrorCode.NOT_LEADER_OR_FOLLOWER
        return p.check_enough_replicas(pending.last_offset, pending.min_isr)

    monkeypatch.setattr(broker.delayed_produce, "status", status)


# ---------------------------------------------------------------- leader-epoch fencing (KIP-320)


def acks_all_survives_leader_epoch_change(monkeypatch) -> None:
    """A parked acks=all is answered by a later epoch of the same leader, though the batch may have been truncated."""

    def status(pending, current):
        p = pending.partition
        if current is not p or not p.is_leader:
            return True, broker.delayed_produce.ErrorCode.NOT_LEADER_OR_FOLLOWER
        return p.check_enough_replicas(pending.last_offset + 1, pending.min_isr)

    monkeypatch.setattr(broker.delayed_produce, "status", status)


def acks_all_answered_after_losing_leadership(monkeypatch) -> None:
    """A parked acks=all is answered once its partition's HW passes the batch, whether or not this broker still leads
    it (as a follower it may have truncated the batch)."""

    def status(pending, current):
        p = pending.partition
        if current is not p:
            return True, broker.delayed_produce.ErrorCode.NOT_LEADER_OR_FOLLOWER
        return p.high_watermark > pending.last_offset, broker.delayed_produce.ErrorCode.NONE

    monkeypatch.setattr(broker.delayed_produce, "status", status)


def replica_removal_keeps_leader_epoch(monkeypatch) -> None:
    """A change that removes a replica from the assignment keeps the leader epoch: a replica
    removed and added back is counted in sync on fetches from the log it is about to delete."""
    election = metadata.controller.election
    original = election._diff

    def diff(topic_id, partition_id, part, *, leader, **fields):
        change = original(topic_id, partition_id, part, leader=leader, **fields)
        if change is not None and change.leader == part.leader:
            change = dataclasses.replace(change, leader=NO_LEADER_CHANGE)
        return change

    monkeypatch.setattr(election, "_diff", diff)


def fetch_leader_epoch_not_checked(monkeypatch) -> None:
    """Fetch (consumer and follower) ignores current_leader_epoch: a follower of an older epoch is served."""
    monkeypatch.setattr(broker.handlers.fetch, "check_leader_epoch", lambda requested, current: 0)


def follower_takes_answers_of_old_epoch(monkeypatch) -> None:
    """The replica fetcher applies an answer meant for an earlier leader epoch of the partition."""

    def current(self, key, state):
        if self.partitions.get(key) is not state:
            return None
        p = state.partition
        return None if p.is_leader or p.log.closed else p

    monkeypatch.setattr(ReplicaFetcher, "_current", current)


# ---------------------------------------------------------------- truncation and OffsetForLeaderEpoch


def leader_never_reports_divergence(monkeypatch) -> None:
    """A leader serves a fetch whose last fetched epoch disagrees with its log instead of answering the diverging epoch."""
    monkeypatch.setattr(broker.handlers.fetch, "diverging_epoch", lambda log, last_fetched_epoch, fetch_offset: None)


def follower_ignores_diverging_epoch(monkeypatch) -> None:
    """A follower answered with a diverging epoch keeps its log and fetches on from its end."""

    async def truncate_on_divergence(self, key, state, p, diverging):
        self._delay(state)

    monkeypatch.setattr(ReplicaFetcher, "_truncate_on_divergence", truncate_on_divergence)


def epoch_end_is_log_end(monkeypatch) -> None:
    """OffsetForLeaderEpoch answers the log end for any epoch the log knows, not where that epoch ended."""
    original = LeaderEpochCache.end_offset_for_epoch

    def end_offset_for_epoch(self, requested, log_end_offset):
        epoch, end = original(self, requested, log_end_offset)
        return (epoch, log_end_offset) if end >= 0 else (epoch, end)

    monkeypatch.setattr(LeaderEpochCache, "end_offset_for_epoch", end_offset_for_epoch)


def follower_keeps_records_below_leader_log_start(monkeypatch) -> None:
    """A follower keeps its records below the leader's log start where the leader, its epoch
    history cut there, cannot vouch for them."""
    monkeypatch.setattr(broker.replica_fetcher, "_beyond_leader_history",
                        lambda plog, diverging_end, leader_log_start: False)


def truncation_ignores_leader_epoch_end(monkeypatch) -> None:
    """A follower truncates to where its own copy of the epoch ends, ignoring where the leader's ended."""
    original = broker.replica_fetcher._truncation_point

    def truncation_point(p, leader_epoch, leader_end):
        offset, done = original(p, leader_epoch, leader_end)
        if done and leader_epoch >= 0 and leader_end >= 0:
            ours_epoch, ours_end = p.log.end_offset_for_epoch(leader_epoch)
            if ours_epoch == leader_epoch:
                return min(ours_end, p.log_end_offset), True
        return offset, done

    monkeypatch.setattr(broker.replica_fetcher, "_truncation_point", truncation_point)


def epoch_cache_kept_on_truncation(monkeypatch) -> None:
    """Truncating a log leaves its leader-epoch cache entries for the removed offsets."""
    monkeypatch.setattr(LeaderEpochCache, "truncate_from_end", lambda self, end_offset: None)


# ---------------------------------------------------------------- unclean election and ELR (KIP-966)


def clean_election_falls_back_to_unclean(monkeypatch) -> None:
    """With no valid ISR/ELR leader, the controller elects any live replica though unclean election is off."""
    original = metadata.controller.election._elect

    def elect(part, replicas, election, valid, is_acceptable):
        leader, unclean = original(part, replicas, election, valid, is_acceptable)
        if leader == NO_LEADER:
            for r in replicas:
                if is_acceptable(r):
                    return r, True
        return leader, unclean

    monkeypatch.setattr(metadata.controller.election, "_elect", elect)


def elr_keeps_uncleanly_restarted_broker(monkeypatch) -> None:
    """A broker that restarted uncleanly (maybe lost unflushed records) stays in the ELR and may be elected."""
    original = metadata.controller.brokers.remove_broker_from_isrs

    def remove(image, broker_id, *, unclean_shutdown=False, static=None):
        return original(image, broker_id, unclean_shutdown=False, static=static)

    monkeypatch.setattr(metadata.controller.brokers, "remove_broker_from_isrs", remove)


def hw_advances_below_min_isr(monkeypatch) -> None:
    """The HW moves while the ISR is below min.insync.replicas (KIP-966 holds it, so ELR members have it all)."""
    monkeypatch.setattr(broker.replica_manager.ReplicaManager, "_hw_min_isr", lambda self, image, topic, replicas: 1)


REPLICATION_MUTATIONS = {f.__name__: f for f in (
    isr_join_below_high_watermark, isr_join_before_leader_epoch_start, pending_shrink_counts_as_committed,
    pending_expand_not_counted_for_hw, controller_accepts_stale_isr_change,
    new_leader_trusts_follower_ends, follower_hw_is_own_log_end,
    broker_reads_min_isr_as_one, acks_all_waits_for_one_less,
    acks_all_survives_leader_epoch_change, acks_all_answered_after_losing_leadership,
    replica_removal_keeps_leader_epoch, fetch_leader_epoch_not_checked, follower_takes_answers_of_old_epoch,
    leader_never_reports_divergence, follower_ignores_diverging_epoch, follower_keeps_records_below_leader_log_start,
    epoch_end_is_log_end, truncation_ignores_leader_epoch_end, epoch_cache_kept_on_truncation,
    clean_election_falls_back_to_unclean, elr_keeps_uncleanly_restarted_broker, hw_advances_below_min_isr,
)}
