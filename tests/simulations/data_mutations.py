"""Deliberate data-plane bugs patched into the real broker code, for the mutation tests.

Each mutation is a function taking pytest's `monkeypatch`; the full-cluster
simulation must find each within a bounded number of seeds. Nothing here is a
switch in node code: the bug exists only while the test patches it in.
"""
from __future__ import annotations

import broker.partition
from broker.partition import Partition
from broker.replica_fetcher import ReplicaFetcher
from wire.error_codes import ErrorCode


def hw_without_isr(monkeypatch) -> None:
    """The leader's high watermark is its own log end: nothing waits for the ISR."""

    def high_watermark(current_hw, leader_end, *args, **kwargs):
        return max(current_hw, leader_end)

    monkeypatch.setattr(broker.partition, "high_watermark", high_watermark)


def skip_follower_truncation(monkeypatch) -> None:
    """A follower of a new leader keeps its divergent suffix instead of truncating it."""

    async def truncate_to(self, key, state, offset, *, done):
        state.truncating = not done

    monkeypatch.setattr(ReplicaFetcher, "_truncate_to", truncate_to)


def acks_all_answered_at_append(monkeypatch) -> None:
    """acks=all is answered as soon as the leader appended, before the ISR has the batch."""
    original = Partition.check_enough_replicas

    def check(self, required_offset, min_isr):
        if self.is_leader:
            return True, ErrorCode.NONE
        return original(self, required_offset, min_isr)

    monkeypatch.setattr(Partition, "check_enough_replicas", check)


def fetch_beyond_high_watermark(monkeypatch) -> None:
    """Consumers are served records above the high watermark (not yet committed)."""
    original = Partition.read

    def read(self, offset, max_bytes, *, max_offset, min_one_batch):
        return original(self, offset, max_bytes, max_offset=None, min_one_batch=min_one_batch)

    monkeypatch.setattr(Partition, "read", read)


def reassignment_trusts_new_replicas(monkeypatch) -> None:
    """A reassignment completes at once, counting its new replicas in sync before they copied the log."""
    import metadata.controller.election as election

    def complete(replicas, isr, adding, removing, min_isr):
        target = tuple(r for r in replicas if r not in removing)
        return target, target, (), ()

    monkeypatch.setattr(election, "_maybe_complete_reassignment", complete)


DATA_MUTATIONS = {
    "hw_without_isr": hw_without_isr,
    "skip_follower_truncation": skip_follower_truncation,
    "acks_all_answered_at_append": acks_all_answered_at_append,
    "fetch_beyond_high_watermark": fetch_beyond_high_watermark,
    "reassignment_trusts_new_replicas": reassignment_trusts_new_replicas,
}
