"""Deliberate bugs in fast failover (docs/failover.md), patched into the real node code:
fencing on a closed controller connection, replacing the registration of a dead
incarnation, shrinking the ISR when a follower's fetch connection closes, the high
watermark passing over a follower whose fetch connection closed, and fencing silent brokers
after the previous controller's death.

Each is a function taking a monkeypatch; tests/simulations/catalogue.py lists them with
the rule each breaks.
"""
from __future__ import annotations

import broker.isr
import broker.partition
import metadata.data_dir_lock
import raftkafka.node.assembly
from broker.isr import IsrState
from broker.partition import Partition
from metadata.controller.connection_grace import ConnectionGrace
from metadata.controller.service import ControllerService
from raft.core import RaftCore


def reconnect_keeps_close_fence(monkeypatch) -> None:
    """A heartbeat of the broker on a new connection does not cancel the fence its closed
    connection started: a broker that reconnected within the grace is fenced anyway."""
    original = ConnectionGrace.heard

    def heard(self, connection, broker_id, broker_epoch):
        pending = self._deadlines.get(broker_id)
        original(self, connection, broker_id, broker_epoch)
        if pending is not None:
            self._deadlines[broker_id] = pending

    monkeypatch.setattr(ConnectionGrace, "heard", heard)


class _UnlockedFileSystem:
    """A FileSystem whose lock never refuses (the file is opened, not locked)."""

    def __init__(self, fs):
        self._fs = fs

    def lock(self, path):
        return self._fs.open(path, create=True)

    def __getattr__(self, name):
        return getattr(self._fs, name)


def data_dir_lock_not_exclusive(monkeypatch) -> None:
    """A node starts on log dirs another running process holds (the lock is read, not
    required): it presents that live incarnation as the dead one it replaces."""
    original = metadata.data_dir_lock.lock_data_dirs
    monkeypatch.setattr(raftkafka.node.assembly, "lock_data_dirs",
                        lambda fs, dirs: original(_UnlockedFileSystem(fs), dirs))


def close_shrink_skips_controller(monkeypatch) -> None:
    """A leader whose follower's fetch connection closed drops it from its ISR at once,
    as if the controller had committed the shrink (no AlterPartition)."""

    def on_follower_connection_closed(self, replica_id):
        state = self.followers.get(replica_id)
        if not self.is_leader or state is None or replica_id not in self.isr_state.isr:
            return []
        state.connection_closed = True
        self.isr_state = IsrState(tuple(r for r in self.isr_state.isr if r != replica_id))
        self.maybe_advance_high_watermark()
        return [replica_id]

    monkeypatch.setattr(Partition, "on_follower_connection_closed", on_follower_connection_closed)


def hw_skips_closed_isr_member(monkeypatch) -> None:
    """The high watermark passes over every follower whose fetch connection closed, ISR
    members included, before the controller has committed their removal."""
    original = broker.isr.high_watermark

    def high_watermark(current_hw, leader_end, followers, maximal_isr, now, lag_time_s, eligible=()):
        open_isr = [r for r in maximal_isr if r not in followers or not followers[r].connection_closed]
        return original(current_hw, leader_end, followers, open_isr, now, lag_time_s, eligible)

    monkeypatch.setattr(broker.partition, "high_watermark", high_watermark)


def activation_fences_without_proof_of_death(monkeypatch) -> None:
    """A newly active controller gives every broker only the close grace to heartbeat even
    when nothing says its predecessor died (it may be stopped or cut off, its brokers still
    holding leases from it)."""

    def expect_after_death(self, departed):
        self._departed = None
        self.grace.expect({bid: reg.epoch for bid, reg in sorted(self._spec.brokers.items())
                           if not reg.fenced}, self.env.now())

    monkeypatch.setattr(ControllerService, "_expect_after_death", expect_after_death)


def departed_leader_outlives_its_answer(monkeypatch) -> None:
    """A Raft replica keeps reporting its old leader as departed after hearing from it again."""
    original = RaftCore.handle

    def handle(self, src, msg, now):
        departed = self.departed_leader
        actions = original(self, src, msg, now)
        if departed == src and self.departed_leader is None:
            self.departed_leader = departed
        return actions

    monkeypatch.setattr(RaftCore, "handle", handle)


def controller_leaves_before_peer_shutdowns(monkeypatch) -> None:
    """The active controller's node, stopping, hands over at once, without serving the controlled
    shutdowns of the brokers stopping with it."""

    async def leave_at_once(node) -> None:
        return None

    monkeypatch.setattr(raftkafka.node.assembly, "_serve_peer_shutdowns", leave_at_once)


FAILOVER_MUTATIONS = {f.__name__: f for f in (
    reconnect_keeps_close_fence, data_dir_lock_not_exclusive, close_shrink_skips_controller,
    hw_skips_closed_isr_member, activation_fences_without_proof_of_death,
    departed_leader_outlives_its_answer, controller_leaves_before_peer_shutdowns)}
